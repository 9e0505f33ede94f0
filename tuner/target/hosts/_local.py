from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from tuner.errors import HostError
from tuner.target.hosts._base import BaseHost, CommandResult, quote_command


class LocalHost(BaseHost):
    """This machine, through ``subprocess`` (no shell unless a script asks for one)."""

    def __init__(self, *, env: dict[str, str] | None = None) -> None:
        self._env = env

    @property
    def name(self) -> str:
        return "local"

    def run(self, argv: Sequence[str], *, timeout: float | None = None, stdin: bytes | None = None) -> CommandResult:
        command = quote_command(argv)
        try:
            proc = subprocess.run(
                list(argv),
                input=stdin,
                capture_output=True,
                timeout=timeout,
                env=self._env,
                # Without this a backgrounded server would inherit our stdin and our terminal's signals.
                stdin=None if stdin is not None else subprocess.DEVNULL,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise HostError(f"`{command}` timed out after {timeout} s on {self.name}") from exc
        except OSError as exc:
            raise HostError(f"`{command}` could not be started on {self.name}: {exc}") from exc
        return CommandResult(
            command=command,
            exit_status=proc.returncode,
            stdout=proc.stdout.decode(errors="replace"),
            stderr=proc.stderr.decode(errors="replace"),
        )

    def read_file(self, path: str, *, offset: int = 0) -> bytes:
        with open(path, "rb") as fh:
            fh.seek(offset)
            return fh.read()

    def write_file(self, path: str, data: bytes, *, mode: int = 0o644) -> None:
        target = Path(path)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            os.chmod(tmp, mode)
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
