from __future__ import annotations

import abc
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from types import TracebackType

from tuner.errors import HostError


@dataclass(frozen=True, kw_only=True)
class CommandResult:
    """What a command did on a host. ``command`` is the shell-quoted form, for messages and logs."""

    command: str
    exit_status: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.exit_status == 0

    def check(self) -> CommandResult:
        """Return self, or raise :class:`HostError` naming the command, its status and its stderr."""
        if not self.ok:
            detail = (self.stderr.strip() or self.stdout.strip())[-2000:]
            raise HostError(f"`{self.command}` exited with status {self.exit_status}: {detail}")
        return self


class BaseHost(abc.ABC):
    """How commands and files reach a machine: the transport seam.

    Everything above this seam (service managers, locks, preflight checks) speaks argv lists and paths;
    whether the bytes travel through ``subprocess`` or an SSH channel is this class's business alone.
    Commands are always argv lists: implementations quote them (``shlex.join``) when a shell is in the way,
    so a categorical value such as ``a;rm -rf /`` stays one literal argument.
    """

    @property
    @abc.abstractmethod
    def name(self) -> str:
        """A short label for messages: ``local`` or ``user@host:port``."""

    @abc.abstractmethod
    def run(self, argv: Sequence[str], *, timeout: float | None = None, stdin: bytes | None = None) -> CommandResult:
        """Run ``argv`` to completion and capture its exit status, stdout and stderr.

        A non-zero exit status is returned, not raised (call :meth:`CommandResult.check`); failing to run
        the command at all (connection lost, timeout) raises :class:`HostError`.
        """

    @abc.abstractmethod
    def read_file(self, path: str, *, offset: int = 0) -> bytes:
        """Return a file's bytes from ``offset`` on; :class:`FileNotFoundError` if it does not exist.

        The offset lets log followers read only what is new, locally or over SFTP alike.
        """

    @abc.abstractmethod
    def write_file(self, path: str, data: bytes, *, mode: int = 0o644) -> None:
        """Replace ``path`` atomically: write a temporary file beside it, then rename it over the target.

        A reader (or systemd) never sees a half-written file, and a failure leaves the old file intact.
        """

    def run_script(self, script: str, *args: str, timeout: float | None = None) -> CommandResult:
        """Run a POSIX ``sh`` script with positional arguments ``$1..$n`` (passed as literal arguments)."""
        return self.run(["sh", "-c", script, "sh", *args], timeout=timeout)

    def verify(self) -> str:
        """Reach the host now (verifying its identity where there is one) and say how; raises HostError."""
        return f"{self.name} host"

    def remove_file(self, path: str) -> None:
        """Remove ``path`` if it exists."""
        self.run(["rm", "-f", "--", path]).check()

    def close(self) -> None:  # noqa: B027 - optional hook: most hosts hold nothing
        """Release connections; the host may not be used afterwards."""

    def __enter__(self) -> BaseHost:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def quote_command(argv: Sequence[str]) -> str:
    """The one place argv becomes shell text."""
    return shlex.join(argv)
