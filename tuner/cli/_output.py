"""Where a command writes what a user asked for (``--out``): checked first, so a bad path is one line, not a traceback.

A path that cannot be what the option asks for (a file where a directory is wanted, a directory that does not
exist) is the command line's mistake: a :class:`~tuner.errors.ConfigError`, exit status 2. A path that is right
but cannot be written (a read-only file system, permission denied, a full disk) is the environment's: an
:class:`~tuner.errors.EnvironmentFault`, exit status 3.
"""

from __future__ import annotations

import errno
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tuner.errors import ConfigError, EnvironmentFault

__all__ = ["output_dir", "output_file", "writing"]


def output_dir(path: Path, *, option: str) -> Path:
    """Create the directory ``path`` (and its parents) for a command's output."""
    if path.exists() and not path.is_dir():
        raise ConfigError(file=None, key=option, expected=f"a directory, not the file {path}")
    _parents_are_directories(path, option=option, what="a directory path")
    with writing(path, what=f"cannot create {option} {path}"):
        path.mkdir(parents=True, exist_ok=True)
    return path


def output_file(path: Path, *, option: str) -> Path:
    """Check that the file ``path`` can be created: its directory exists (nothing is created here)."""
    _parents_are_directories(path, option=option, what="a file path")
    if not path.parent.is_dir():
        raise ConfigError(
            file=None, key=option, expected=f"a file in an existing directory ({path.parent} does not exist)"
        )
    return path


@contextmanager
def writing(path: Path, *, what: str) -> Iterator[None]:
    """An OSError while writing ``path`` as one line: ``WHAT: read-only file system``."""
    try:
        yield
    except OSError as exc:
        reason = {errno.EROFS: "read-only file system", errno.ENOSPC: "the disk is full"}.get(
            exc.errno or 0, exc.strerror or str(exc)
        )
        where = f" ({exc.filename})" if exc.filename and str(exc.filename) != str(path) else ""
        raise EnvironmentFault(f"{what}: {reason.lower()}{where}") from None


def _parents_are_directories(path: Path, *, option: str, what: str) -> None:
    for parent in path.parents:
        if parent.exists() and not parent.is_dir():
            expected = f"{what} ({parent} is a file, not a directory)"
            raise ConfigError(file=None, key=option, expected=expected, got=str(path))
