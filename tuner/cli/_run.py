"""A run of a study from this controller: recorded, told to ``[study] notify`` at its end, and, with ``--detach``,
in a session of its own that outlives the terminal.

- :func:`recorded` wraps ``tune start`` / ``resume`` / ``finish``: the run record (``runs/<study>/run.json``,
  :mod:`tuner.cli._record`) at the start and the end, and the notify hook at the end, however the run ends.
- :func:`detach` starts the same command again as its own session (``setsid``: no controlling terminal, so a
  closed terminal or a dropped SSH session sends it no hang-up), stdin from ``/dev/null``, output appended to
  ``runs/<study>/tune.log``; it shows the first seconds of that log, then says where to follow and how to stop it.
- ``tune logs [-f]`` prints (and follows) the log of the study's last detached run; ``tune interrupt`` stops the
  run as Ctrl-C would (the running trial FAIL and retried on resume, the server put back per ``on_exit``).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from tuner.cli._common import add_study_args, study_location
from tuner.cli._exits import Ending, ending, of_status
from tuner.cli._notify import notify, summary
from tuner.cli._record import RunRecord, log_path, masked_argv, new_directories, record_path, shown, withdraw
from tuner.config import StudyConfig
from tuner.errors import EnvironmentFault, LockHeld, TuneError
from tuner.secrets import masked_url

__all__ = ["add_detach_args", "detach", "recorded", "register", "run_lines", "running_run_hint"]

#: How long ``--detach`` waits for the new run to pass its preflight and open its study (its parent says why it
#: failed, in the foreground, when it fails before that); past this it is left starting in the background.
DETACH_SETTLE_S = 300.0
#: The environment variable that gives a detached run the pipe on which it says it is under way.
DETACH_FD_ENV = "TUNE_DETACH_FD"
POLL_S = 0.5


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg,unused-ignore]
    p = sub.add_parser("logs", help="print the log of the study's detached run (tune start --detach); -f follows it")
    add_study_args(p)
    p.add_argument("-f", "--follow", action="store_true", help="keep printing what the run logs until it ends")
    p.add_argument("-n", "--lines", type=int, metavar="N", default=None, help="only the last N lines (default: all)")
    p.set_defaults(func=_logs)

    p = sub.add_parser(
        "interrupt",
        help="stop the study's running run as Ctrl-C would: the running trial is retried on resume, the server "
        "put back per on_exit",
    )
    add_study_args(p)
    p.add_argument("--no-wait", action="store_true", help="ask it to stop, and return without waiting until it has")
    p.set_defaults(func=_interrupt)


def add_detach_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--detach",
        action="store_true",
        help="run in the background, in a session of its own (a closed terminal or SSH session does not stop it), "
        "logging to runs/<study>/tune.log",
    )
    p.add_argument("--detached-log", type=Path, default=None, help=argparse.SUPPRESS)  # the detached run itself


# -- the record and the hook around a run -------------------------------------------------------------------


@dataclass
class Run:
    """What the wrapped command tells :func:`recorded` about its run."""

    ran: int | None = None
    """Trials run now (from the run's summary)."""
    status: int = 0
    """The exit status of a command that returns one instead of raising (a fleet's launcher)."""
    book: _Book | None = None
    under_way_fd: int | None = None
    """A detached run's end of the pipe its parent watches (``tune start --detach``)."""

    def held(self) -> None:
        """The run holds the server's lock (``run_study``'s ``on_locked``): the run is this study's run now."""
        if self.book is not None:
            self.book.begin()

    def under_way(self) -> None:
        """The preflight passed and the study is open (``run_study``'s ``on_open``): a detached run tells the
        ``--detach`` that started it, which then leaves it in the background."""
        fd, self.under_way_fd = self.under_way_fd, None
        if fd is not None:
            with contextlib.suppress(OSError):  # the parent gave up waiting: nothing to tell
                os.write(fd, b"1")
            os.close(fd)


@dataclass(kw_only=True)
class _Book:
    """The run record of this process's run: written once the run holds its lock, never over a live run's."""

    path: Path
    study: str
    command: str
    log: Path | None
    offset: int = 0
    """Where this run's part of the log begins: its first line is printed before it holds the lock."""
    record: RunRecord | None = None
    began: bool = False

    def begin(self) -> None:
        if self.began:
            return
        self.began = True
        current = RunRecord.read(self.path)
        if current is not None and current.alive and current.pid != os.getpid():
            return  # another run of this study from here holds another server (a fleet by hand): its record stays
        with contextlib.suppress(OSError):  # a convenience: an unwritable run directory is the run's to report
            self.record = RunRecord.begin(
                self.path, study=self.study, command=self.command, log=self.log, offset=self.offset
            )

    def refused(self, exc: BaseException) -> bool:
        """Whether the run ended before it was one: refused because another run holds the lock or the record.
        Such a start touches nothing of that run's (its record, the notify hook)."""
        if self.began:
            return False
        current = RunRecord.read(self.path)
        return isinstance(exc, LockHeld) or (current is not None and current.alive)


@contextlib.contextmanager
def recorded(config: StudyConfig, args: argparse.Namespace, *, study: str, storage: str) -> Iterator[Run]:
    """Record the run this process is (once it holds the lock: :meth:`Run.held`) and, when it ends however it
    ends, its end; then run the notify hook. A start refused by another run's lock leaves both alone."""
    log: Path | None = getattr(args, "detached_log", None)
    if log is not None:
        _as_detached(log)
    path = record_path(config, study, storage)
    created = new_directories(path)
    command = "tune " + shlex.join(masked_argv(_own_argv(args)))
    offset = log.stat().st_size if log is not None and log.exists() else 0
    book = _Book(path=path, study=study, command=command, log=log, offset=offset)
    if log is not None:
        print(f"=== {datetime.now():%Y-%m-%d %H:%M:%S} {command} (pid {os.getpid()}) ===", flush=True)
    run = Run(book=book, under_way_fd=_under_way_fd() if log is not None else None)
    try:
        yield run
    except BaseException as exc:
        if book.refused(exc):
            raise
        run.ran = getattr(exc, "ran", run.ran)  # an interrupted run still ran its trials (Interrupted.ran)
        book.begin()  # a run that failed before it held the lock (the SSH host down) is still recorded
        end = ending(exc) or Ending(status=1, state="crashed", reason=f"{type(exc).__name__}: {exc}")
        _ended(config, book.record, path, end, study=study, storage=storage, run=run)
        withdraw(path, created)  # refused before it made anything (the preflight): nothing stays
        raise
    book.begin()
    _ended(config, book.record, path, of_status(run.status), study=study, storage=storage, run=run)


def _ended(
    config: StudyConfig,
    record: RunRecord | None,
    path: Path,
    end: Ending,
    *,
    study: str,
    storage: str,
    run: Run,
) -> None:
    message = masked_url(config.secrets.text(end.line)) if end.line else None
    if record is not None:
        with contextlib.suppress(OSError):
            record = record.end(path, status=end.status, state=end.state, message=message)
    facts: dict[str, Any] = {"run_now": run.ran, "host": None, "pid": os.getpid(), "log": None}
    if record is not None:
        facts.update(
            host=record.host,
            log=record.log,
            started_at=_iso(record.since),
            ended_at=_iso(record.ended or time.time()),
            seconds=round((record.ended or time.time()) - record.since, 1),
        )
    notify(config, summary(config, study=study, storage=storage, end=end, run=facts))


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t).astimezone().isoformat(timespec="seconds")


def _own_argv(args: argparse.Namespace) -> list[str]:
    """This command's arguments as typed, without the detached run's own bookkeeping."""
    argv = list(getattr(args, "argv", []))
    if "--detached-log" in argv:
        i = argv.index("--detached-log")
        del argv[i : i + 2]
    return argv


def _under_way_fd() -> int | None:
    """The pipe to the ``--detach`` parent, taken out of the environment (the server is not to inherit it)."""
    text = os.environ.pop(DETACH_FD_ENV, "")
    return int(text) if text.isdigit() else None


def _as_detached(log: Path) -> None:
    """The detached run itself: its lines reach the log as they are printed, and Ctrl-C (``tune interrupt``)
    stops it even when the shell that ran ``--detach`` ignored SIGINT for its background jobs."""
    with contextlib.suppress(AttributeError, ValueError):
        sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    signal.signal(signal.SIGINT, signal.default_int_handler)


# -- --detach ------------------------------------------------------------------------------------------------


def detach(config: StudyConfig, args: argparse.Namespace, *, study: str, storage: str) -> int:
    """Start this command again as a session of its own, logging to ``runs/<study>/tune.log``; watch it until
    its preflight passed and its study is open, then leave it (or, when it ended before, end as it did)."""
    from tuner.cli._output import writing
    from tuner.report import tune_command

    current = RunRecord.read(record_path(config, study, storage))
    if current is not None and current.alive:
        raise EnvironmentFault(
            f"study {study} is running already: {current.describe()}; stop it first with "
            f"{tune_command('interrupt', config, storage=storage, study=study)}"
        )
    log = log_path(config, study, storage)
    argv = [sys.executable, "-m", "tuner", *[a for a in _own_argv(args) if a != "--detach"], "--detached-log", str(log)]
    ready, told = os.pipe()
    try:
        with writing(log, what=f"cannot write the run's log {log}"):
            log.parent.mkdir(parents=True, exist_ok=True)
            with log.open("ab") as out:
                offset = out.tell()
                child = subprocess.Popen(
                    argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                    pass_fds=(told,), env={**os.environ, DETACH_FD_ENV: str(told)},
                )  # fmt: skip
    finally:
        os.close(told)  # the child's copy is the only one left: its exit ends the pipe
    with os.fdopen(ready, "rb", buffering=0) as pipe:
        status = _settle(child, log, offset, pipe)
    if status is not None:
        return status
    def command(verb: str) -> str:
        return tune_command(verb, config, storage=storage, study=study)

    print(f"tune: running in the background as pid {child.pid}, in a session of its own: closing this terminal "
          "or SSH session does not stop it")
    print(f"  log:    {shown(log)}")
    print(f"  follow: {command('logs -f')}")
    print(f"  status: {command('status')}")
    print(f"  stop:   {command('interrupt')} (as Ctrl-C would: the running trial is retried on resume)")
    return 0


def _settle(child: subprocess.Popen[bytes], log: Path, offset: int, pipe: Any) -> int | None:
    """Show what the new run logs until it says it is under way (None) or ends (its exit status): a run that
    fails in its preflight fails here, however slowly a loaded machine brings it there."""
    import select

    shown = offset
    deadline = time.monotonic() + DETACH_SETTLE_S
    while time.monotonic() < deadline:
        readable, _, _ = select.select([pipe], [], [], 0.1)
        said = pipe.read(1) if readable else None
        shown = _show(log, shown, sys.stderr)
        if said:
            return None
        if said == b"":  # the pipe ended without a word: the run ended before it was under way
            status = child.wait()
            _show(log, shown, sys.stderr)
            return status
    return None


def _show(log: Path, offset: int, stream: Any) -> int:
    """Write what ``log`` holds past ``offset`` to ``stream``; the new offset."""
    try:
        with log.open("rb") as fh:
            fh.seek(offset)
            data = fh.read()
    except OSError:
        return offset
    if data:
        stream.write(data.decode(errors="replace"))
        stream.flush()
    return offset + len(data)


# -- tune logs, tune interrupt, and what tune status says ---------------------------------------------------


def _record(path: Path, study: str) -> RunRecord:
    record = RunRecord.read(path)
    if record is None:
        raise TuneError(f"no run of study {study} was started from here ({path} does not exist)")
    return record


def _logs(args: argparse.Namespace) -> int:
    config, storage, study = study_location(args)
    path = record_path(config, study, storage)
    record = _record(path, study)
    if record.log is None:
        raise TuneError(
            f"the last run of study {study} ({record.describe()}) printed to its terminal: only a run started "
            "with --detach writes runs/<study>/tune.log"
        )
    log = Path(record.log)
    try:
        raw = log.read_bytes()[record.log_offset :]
    except OSError as exc:
        raise TuneError(f"cannot read the run's log {log}: {exc.strerror}") from None
    lines = raw.decode(errors="replace").splitlines(keepends=True)
    if args.lines is not None:
        lines = lines[-args.lines :] if args.lines > 0 else []
    sys.stdout.write("".join(lines))
    sys.stdout.flush()
    if args.follow:
        with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C is how a follow is meant to stop
            _follow(path, study, log, record.log_offset + len(raw))
            print(f"tune logs: the run ended: {_record(path, study).outcome()}", file=sys.stderr)
    return 0


def _follow(path: Path, study: str, log: Path, offset: int) -> int:
    """Print what the log gains until the run has ended and nothing more comes."""
    while True:
        alive = _record(path, study).alive
        offset = _show(log, offset, sys.stdout)
        if not alive:
            return _show(log, offset, sys.stdout)
        time.sleep(POLL_S)


def _interrupt(args: argparse.Namespace) -> int:
    config, storage, study = study_location(args)
    path = record_path(config, study, storage)
    record = _record(path, study)
    if not record.here:
        raise TuneError(f"study {study} runs on {record.host} ({record.describe()}): run tune interrupt there")
    if not record.alive:
        raise TuneError(f"study {study} is not running: its last run was {record.past()}")
    if record.interrupt_requested is None:
        os.kill(record.pid, signal.SIGINT)
        replace(record, interrupt_requested=time.time()).write(path)
        print(f"asked pid {record.pid} to stop as Ctrl-C would: the running trial is marked FAIL and retried on "
              f"resume, and the server is put back (on_exit = {config.study.on_exit!r})", file=sys.stderr)
    else:
        print(f"pid {record.pid} was asked to stop already; waiting for it", file=sys.stderr)
    if args.no_wait:
        return 0
    try:
        _wait_stopped(path, study, record)
    except KeyboardInterrupt:
        print("tune interrupt: no longer waiting; the run goes on stopping (tune logs -f follows it)", file=sys.stderr)
        return 130
    ended = _record(path, study)
    print(f"the run ended: {ended.outcome()}", file=sys.stderr)
    if ended.message and not ended.log:
        print(ended.message, file=sys.stderr)  # a detached run's last line was in its log, shown above
    return 0


def _wait_stopped(path: Path, study: str, record: RunRecord) -> None:
    """Until the run's process is gone: its log as it is written (a detached run), or a line now and then."""
    offset = Path(record.log).stat().st_size if record.log and Path(record.log).exists() else 0
    said = time.monotonic()
    while _record(path, study).alive:
        if record.log:
            offset = _show(Path(record.log), offset, sys.stderr)
        elif time.monotonic() - said > 30:
            print(f"  still putting the server back (pid {record.pid})", file=sys.stderr)
            said = time.monotonic()
        time.sleep(POLL_S)
    if record.log:
        _show(Path(record.log), offset, sys.stderr)


def running_run_hint(config: StudyConfig, *, study: str, storage: str) -> str | None:
    """How to stop the study's run when one runs from here (None: none does)."""
    from tuner.report import tune_command

    record = RunRecord.read(record_path(config, study, storage))
    if record is None or not record.alive:
        return None
    return f"To stop that run as Ctrl-C would: {tune_command('interrupt', config, storage=storage, study=study)}"


def run_lines(config: StudyConfig, *, study: str, storage: str) -> list[str]:
    """What ``tune status`` says about the study's run from here: running now (where, how to follow and stop
    it), or how the last one ended."""
    from tuner.report import tune_command

    record = RunRecord.read(record_path(config, study, storage))
    if record is None:
        return []
    if record.alive:
        stop = tune_command("interrupt", config, storage=storage, study=study)
        lines = [f"run: {record.describe()}; stop it with: {stop}"]
        if record.log:
            lines.append(f"  follow it with: {tune_command('logs -f', config, storage=storage, study=study)}")
        return lines
    return [f"last run: {record.past()}"]
