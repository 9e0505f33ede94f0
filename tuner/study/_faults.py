"""Storage faults as one line naming the path and the cause, instead of a 90-line traceback ending in Optuna's
``StorageInternalError``.

A full disk, a read-only database, an unwritable directory or a write lock held past the wait limit are the
environment's faults: :func:`storage_faults` turns them into :class:`~tuner.errors.EnvironmentFault` (exit
status 3) while the run's ``finally`` blocks still put the server back and release the lock. A lock held for
a while (another process, a backup) is waited out by SQLite's own busy handler up to ``[study]
storage_busy_s``; :func:`watch_busy` says so on stderr once a statement has waited a few seconds.
"""

from __future__ import annotations

import errno
import os
import sqlite3
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import optuna
import sqlalchemy.exc
from sqlalchemy import event

from tuner.errors import EnvironmentFault
from tuner.secrets import masked_url

__all__ = ["BUSY_NOTICE_AFTER_S", "RUN_AFTERMATH", "masked_url", "storage_faults", "watch_busy"]

BUSY_NOTICE_AFTER_S = 5.0

_CAUSES = (
    ("database or disk is full", "the disk is full"),
    ("no space left on device", "the disk is full"),
    ("database is locked", "another process held its write lock past the wait limit ([study] storage_busy_s)"),
    ("readonly database", "it is read-only (the file, or the file system it is on)"),
    ("read-only file system", "it is on a read-only file system"),
    ("unable to open database file", "it cannot be opened (its directory is missing or not writable)"),
    ("disk i/o error", "a disk I/O error"),
    # A database server (PostgreSQL) that cannot be reached: the URL's host, port, name or credentials.
    ("connection refused", "the database server refused the connection (is it running, on that host and port?)"),
    ("could not translate host name", "its host name does not resolve"),
    ("name or service not known", "its host name does not resolve"),
    ("password authentication failed", "the database refused the user name or password"),
    ("timeout expired", "the database server did not answer in time"),
    ("connection timed out", "the database server did not answer in time"),
)
_OS_CAUSES = {
    errno.ENOSPC: "the disk is full",
    errno.EROFS: "the file system is read-only",
    errno.EACCES: "permission denied",
    errno.EDQUOT: "the disk quota is exceeded",
}


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        yield cur
        cur = cur.__cause__ or cur.__context__


def describe(exc: BaseException, url: str) -> str | None:
    """``storage PATH: CAUSE`` when ``exc`` is a storage fault tune can name, else None."""
    where = _shown(url)
    for e in _chain(exc):
        if isinstance(e, OSError) and not isinstance(e, sqlite3.Error) and e.errno in _OS_CAUSES:
            return f"{e.filename or where}: {_OS_CAUSES[e.errno]}"
        text = str(e).lower()
        for needle, cause in _CAUSES:
            if needle in text:
                if needle == "disk i/o error" and _full(where):
                    cause = "the disk is full (SQLite saw a disk I/O error)"
                return f"storage {where}: {cause}"
    if isinstance(exc, sqlalchemy.exc.OperationalError) and not url.startswith("sqlite:///"):
        # Any other failure to talk to a database server is the world's too: its own first line says which.
        first = str(exc.orig or exc).strip().splitlines()
        return f"storage {where}: {first[0] if first else type(exc).__name__}"
    return None


def _shown(url: str) -> str:
    """The storage as a message shows it: a SQLite file's path; any other URL without its password."""
    return url.removeprefix("sqlite:///") if url.startswith("sqlite:///") else masked_url(url)


def _full(path: str) -> bool:
    """Whether the file system holding ``path`` has (almost) no space left: SQLite may call ENOSPC an I/O error."""
    try:
        st = os.statvfs(os.path.dirname(path) or ".")
    except OSError:
        return False
    return st.f_bavail * st.f_frsize < 256 * 1024


RUN_AFTERMATH = (
    "the running trial is not counted and the server was put back per on_exit: fix it, then run `tune start` again"
)


@contextmanager
def storage_faults(url: str, *, aftermath: str = "fix it, then run the command again") -> Iterator[None]:
    """Re-raise a storage fault as one :class:`EnvironmentFault` line naming the path and the cause."""
    try:
        yield
    except (sqlite3.Error, sqlalchemy.exc.SQLAlchemyError, optuna.exceptions.StorageInternalError, OSError) as exc:
        what = describe(exc, url)
        if what is None:
            raise
        raise EnvironmentFault(f"{what}; {aftermath}") from exc


def watch_busy(engine: Any, *, label: str, limit_s: float) -> None:
    """Print once per wait when a statement on ``engine`` has been blocked for a few seconds."""
    started: dict[int, float] = {}
    lock = threading.Lock()

    def before(*_: object, **__: object) -> None:
        with lock:
            started[threading.get_ident()] = time.monotonic()

    def after(*_: object, **__: object) -> None:
        with lock:
            started.pop(threading.get_ident(), None)

    notice_after = min(BUSY_NOTICE_AFTER_S, limit_s / 3)

    def watch() -> None:
        noticed: set[float] = set()
        while True:
            time.sleep(notice_after / 4)
            with lock:
                waiting = [t for t in started.values() if time.monotonic() - t > notice_after]
            for t in waiting:
                if t not in noticed:
                    noticed.add(t)
                    print(
                        f"  storage {label} is locked by another process; waiting up to {limit_s:.0f} s "
                        "([study] storage_busy_s)",
                        file=sys.stderr,
                        flush=True,
                    )

    event.listen(engine, "before_cursor_execute", before)
    event.listen(engine, "after_cursor_execute", after)
    event.listen(engine, "handle_error", after)
    threading.Thread(target=watch, name="tune-storage-busy", daemon=True).start()
