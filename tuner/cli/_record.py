"""The record of a study's run on this controller: ``runs/<study>/run.json``.

``tune start`` / ``resume`` / ``finish`` write it once they hold the server's lock (the pid, the process's kernel
start time and the machine's boot id, so a recycled pid is never taken for the run; the log of a detached run)
and when they end (the exit status, its state and last line): a start refused because another run holds the lock
leaves the record of that run alone. ``tune status`` says from it whether the study runs now and where, ``tune
logs`` finds the log, and ``tune interrupt`` the process to stop. A study in another storage than the study file's
(``--storage``) has a record and a log of its own (``run-<hash>.json``, ``tune-<hash>.log``): the same name in
two storages is two studies. The command line is kept with every storage password as ``***``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import socket
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from tuner.config import StudyConfig
from tuner.secrets import masked_url

__all__ = [
    "RunRecord",
    "log_path",
    "masked_argv",
    "new_directories",
    "record_path",
    "shown",
    "this_machine",
    "withdraw",
]


def _suffix(config: StudyConfig, storage: str) -> str:
    """``""`` for the study file's own storage, ``-<hash>`` for another: its runs are another study's."""
    if storage == config.study.storage:
        return ""
    return "-" + hashlib.sha256(storage.encode()).hexdigest()[:8]


def record_path(config: StudyConfig, study: str, storage: str) -> Path:
    """``runs/<study>/run.json`` beside the study file (the directory of its database and artifacts)."""
    return config.base_dir / "runs" / study / f"run{_suffix(config, storage)}.json"


def log_path(config: StudyConfig, study: str, storage: str) -> Path:
    """Where a detached run of ``study`` writes what it prints: ``runs/<study>/tune.log``."""
    return config.base_dir / "runs" / study / f"tune{_suffix(config, storage)}.log"


def masked_argv(argv: list[str]) -> list[str]:
    """A command line as tune keeps it: every URL's password ``***`` (``--storage postgresql://u:***@db/t``)."""
    return [masked_url(a) for a in argv]


def this_machine() -> str:
    """This boot of this machine: a pid and a start time mean the same process only within one boot."""
    parts = []
    for name in ("/etc/machine-id", "/proc/sys/kernel/random/boot_id"):
        with contextlib.suppress(OSError):
            parts.append(Path(name).read_text().strip())
    return ":".join(parts)


def _start_time(pid: int) -> str | None:
    """The process's kernel start time (None: no such process, or it is a zombie)."""
    from tuner.target.services import parse_stat

    try:
        st = parse_stat(Path(f"/proc/{pid}/stat").read_text())
    except OSError:
        return None
    return st.start if st is not None and st.alive else None


@dataclass(frozen=True, kw_only=True)
class RunRecord:
    study: str
    pid: int
    started: str
    """The process's kernel start time: with ``machine``, what tells the run from a process that got its pid."""
    machine: str
    host: str
    command: str
    since: float
    log: str | None = None
    """The log of a detached run (None: the run prints to the terminal that started it)."""
    log_offset: int = 0
    """Where this run's part of the log begins (a log holds every detached run of the study, one after another)."""
    ended: float | None = None
    status: int | None = None
    state: str | None = None
    message: str | None = None
    """The run's last line when it did not simply finish (``tune: stopped at 3/30 trials. Resume with: ...``)."""
    interrupt_requested: float | None = None

    @classmethod
    def begin(cls, path: Path, *, study: str, command: str, log: Path | None, offset: int = 0) -> RunRecord:
        """The record of this process's run, written (``offset``: where its part of the log begins)."""
        pid = os.getpid()
        record = cls(
            study=study,
            pid=pid,
            started=_start_time(pid) or "",
            machine=this_machine(),
            host=socket.gethostname(),
            command=command,
            since=time.time(),
            log=str(log) if log is not None else None,
            log_offset=offset,
        )
        record.write(path)
        return record

    @classmethod
    def read(cls, path: Path) -> RunRecord | None:
        try:
            data: dict[str, Any] = json.loads(path.read_text())
            return cls(**data)
        except (OSError, ValueError, TypeError):
            return None

    def write(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2) + "\n")
        os.replace(tmp, path)

    def end(self, path: Path, *, status: int, state: str, message: str | None) -> RunRecord:
        done = replace(self, ended=time.time(), status=status, state=state, message=message)
        done.write(path)
        return done

    @property
    def here(self) -> bool:
        """Whether the run was on this machine, in this boot (only then can its pid be looked at)."""
        return self.machine == this_machine()

    @property
    def alive(self) -> bool:
        """Whether the run's process still runs (it may be telling the notify hook how it ended); of a run on
        another machine, whether it has not recorded its end."""
        if not self.here:
            return self.ended is None
        return bool(self.started) and _start_time(self.pid) == self.started

    def describe(self) -> str:
        """``pid 4242 on gpu-ctl since 21:03 (detached, log runs/demo/tune.log)``."""
        how = f"detached, log {shown(self.log)}" if self.log else "in the terminal that started it"
        return f"pid {self.pid} on {self.host} since {_clock(self.since)} ({how})"

    def outcome(self) -> str:
        """How the run ended, for a person: ``finished (exit 0) at 07:29``; a run that vanished says so."""
        if self.ended is None:
            return "ended without a word (killed, or the machine restarted)"
        return f"{self.state} (exit {self.status}) at {_clock(self.ended)}"

    def past(self) -> str:
        """A run that is over: ``pid 4242 on gpu-ctl from 21:03: finished (exit 0) at 07:29; log ...``."""
        log = f"; log {shown(self.log)}" if self.log else ""
        return f"pid {self.pid} on {self.host} from {_clock(self.since)}: {self.outcome()}{log}"


def new_directories(path: Path) -> list[Path]:
    """The directories writing ``path`` will create, outermost first."""
    return [d for d in reversed(path.parents) if not d.exists()]


def withdraw(path: Path, created: list[Path]) -> None:
    """Take back the record of a run refused before it made anything (``created``: the directories its record
    made), so that a refused start leaves nothing behind: only when they hold nothing but the record."""
    if not created:
        return
    top = created[0]
    held = [p for p in top.rglob("*") if p.is_file()]
    if held == [path]:
        path.unlink()
        for d in reversed(created):
            with contextlib.suppress(OSError):
                d.rmdir()


def _clock(t: float) -> str:
    """``21:03``, or ``Dec 02 21:03`` for another day."""
    then = time.localtime(t)
    same_day = time.strftime("%Y%m%d", then) == time.strftime("%Y%m%d")
    return time.strftime("%H:%M" if same_day else "%b %d %H:%M", then)


def shown(path: str | Path) -> str:
    """A path as a message shows it: relative to the working directory when under it."""
    p = Path(path)
    with contextlib.suppress(ValueError):
        return str(p.resolve().relative_to(Path.cwd()))
    return str(p)
