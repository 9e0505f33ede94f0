"""Run model-written programs in a sandbox and say whether they passed: the judging seam.

Model code is never run in the tuner's own process. Every program runs in a fresh ``python -I`` process
(started through the stdlib-only bootstrap ``_sandbox_child.py``) with:

Always (root or not, any kernel):
  * its own fresh temporary directory as cwd, ``HOME`` and ``TMPDIR``, removed afterwards;
  * a clean environment: ``PATH=/usr/bin:/bin``, ``LANG``, nothing else (no API keys, no proxies, no HOME);
  * rlimits: ``RLIMIT_CPU`` (a backstop to the wall-clock timeout), ``RLIMIT_AS`` (memory hogs get
    ``MemoryError``), ``RLIMIT_FSIZE`` (output files and the captured stdout/stderr), ``RLIMIT_NOFILE``,
    no core dumps, ``PR_SET_NO_NEW_PRIVS``;
  * a wall-clock timeout, then ``SIGKILL`` to its whole process group (``start_new_session``);
  * stdout/stderr go to a size-limited file, never a pipe: flooding or closing them cannot block or bloat us;
  * pass = exit status 0 *and* a completion marker printed after the tests, so ``sys.exit(0)`` or
    ``os._exit(0)`` before the tests, or a closed stdout, is a failure.

As root (this container): the program runs under a throwaway uid/gid (a random one from a high range, not
``nobody``, so concurrent sandboxes cannot signal each other and ``RLIMIT_NPROC`` is per run). That makes
``RLIMIT_NPROC`` a real fork-bomb limit, makes ``os.kill(os.getppid(), 9)`` fail with EPERM, denies writes to
anything not world-writable (root-owned 0700 dirs such as pytest's ``tmp_path``, the repo, /root) and lets
the judge kill every process of that uid afterwards, including ones that escaped the process group with
``setsid()``. The interpreter must be executable by that uid (/root is 0700 here, so a world-readable system
``python3`` is picked automatically; see :func:`sandbox_python`).

Not root: the uid cannot change, so ``RLIMIT_NPROC`` counts *all* of our user's processes: it is set to the
current count plus the allowance, a weak limit; the program could signal our processes, and leftovers that
called ``setsid()`` are not found. :class:`NamespaceJudge` closes most of these gaps where user namespaces
are allowed.

:class:`NamespaceJudge` additionally unshares network, mount, PID, IPC and UTS namespaces (as root directly,
otherwise through a user namespace if the kernel permits): no network at all (only a down loopback), private
tmpfs over ``/tmp``, ``/var/tmp`` and ``/dev/shm`` (so even world-writable places are private and vanish),
the program is PID 1 of its own PID namespace (it cannot see or signal any outside process; when it ends,
the kernel kills everything it left behind). :func:`namespaces_available` probes whether this works;
:func:`default_judge` picks the namespace judge when it does and says which protections applied in each
:class:`Verdict`. Not covered by either: a CPU/memory budget across a fork bomb's children (rlimits are per
process; cgroups would be needed), reads of world-readable files, and deliberate cheating (a program that
monkeypatches its own tests can always pass: this gate catches broken decoding, not adversaries).
"""

from __future__ import annotations

import abc
import contextlib
import functools
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

__all__ = [
    "BaseJudge",
    "NamespaceJudge",
    "RlimitJudge",
    "SandboxLimits",
    "Verdict",
    "default_judge",
    "namespaces_available",
    "sandbox_python",
]

_BOOTSTRAP = Path(__file__).with_name("_sandbox_child.py")
_SETUP_FAILED = 121
_OUTPUT_TAIL = 4000
# Throwaway uids come from a range no distribution allocates (systemd's dynamic users stop at 65519, container
# subuid ranges usually start at 100000 and span 65536 per container).
_UID_RANGE = (1_500_000_000, 1_900_000_000)
_SIGNAL_REASONS = {
    signal.SIGKILL: "killed (SIGKILL: CPU limit or out of memory)",
    signal.SIGXCPU: "CPU time limit exceeded",
    signal.SIGXFSZ: "file size limit exceeded (too much output)",
    signal.SIGSEGV: "crashed (SIGSEGV)",
}


@dataclass(frozen=True, kw_only=True)
class Verdict:
    passed: bool
    reason: str
    """``passed``, or why not: the exception's last line, timeout, limit, early exit."""
    output: str = ""
    """The tail of the program's combined stdout/stderr."""
    seconds: float = 0.0
    protections: tuple[str, ...] = ()
    """What isolation actually applied to this run (e.g. ``uid``, ``netns``), for the record."""


@dataclass(frozen=True, kw_only=True)
class SandboxLimits:
    memory_mb: int = 1024
    """RLIMIT_AS (virtual memory) per process."""
    max_processes: int = 16
    """RLIMIT_NPROC: processes/threads the program may have at once (per run when a throwaway uid is used)."""
    max_output_kb: int = 1024
    """RLIMIT_FSIZE: the largest file (including captured stdout/stderr) the program may write."""
    max_open_files: int = 256
    cpu_slack_s: float = 1.0
    """RLIMIT_CPU = the wall-clock timeout plus this, rounded up: the wall clock normally ends it first."""


class BaseJudge(abc.ABC):
    """Runs one complete program (solution + tests) and says whether it passed."""

    @abc.abstractmethod
    def judge(self, program: str, *, timeout_s: float) -> Verdict:
        """Run ``program``; it passes if it exits 0 after running to its end within ``timeout_s``."""

    @property
    @abc.abstractmethod
    def name(self) -> str:
        """A short name for reports (``rlimit``, ``namespace``)."""


def _uid_can_run(python: str, uid: int, gid: int) -> bool:
    try:
        probe = subprocess.run(
            [python, "-I", "-c", "import math, hashlib, typing, collections, itertools"],
            user=uid,
            group=gid,
            extra_groups=[],
            env={"PATH": "/usr/bin:/bin"},
            cwd="/",
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=20,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return probe.returncode == 0


@functools.cache
def sandbox_python(*, unprivileged: bool) -> str:
    """The interpreter programs run with: this one when it is usable by a throwaway uid, else a system one.

    Our own interpreter may live under a private directory (here ``/root/.pyenv``, /root being 0700); a
    throwaway uid could not even start it. Programs need only the standard library, so any Python 3 does.
    """
    ours = os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)
    if not unprivileged:
        return ours
    candidates = [
        ours,
        *(shutil.which(n, path="/usr/bin:/bin:/usr/local/bin") for n in ("python3", "python")),
    ]
    probe_uid = _UID_RANGE[0] - 1  # a fixed unused uid: the probe needs no per-run isolation
    for candidate in dict.fromkeys(c for c in candidates if c):
        if _uid_can_run(candidate, probe_uid, probe_uid):
            return candidate
    raise RuntimeError(
        "no Python interpreter is usable by an unprivileged uid (checked "
        + ", ".join(c for c in candidates if c)
        + "); install a system python3 or pass python= to the judge"
    )


def _throwaway_uid() -> int:
    return _UID_RANGE[0] + secrets.randbelow(_UID_RANGE[1] - _UID_RANGE[0])


def _processes_of(uid: int) -> list[int]:
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if os.stat(f"/proc/{entry}").st_uid == uid:
                pids.append(int(entry))
        except OSError:
            continue  # exited meanwhile
    return pids


def _kill_uid(uid: int) -> int:
    """SIGKILL every process running as ``uid`` until none is left; return how many rounds found some."""
    rounds = 0
    for _ in range(50):
        pids = _processes_of(uid)
        if not pids:
            break
        rounds += 1
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.01)
    return rounds


def _count_own_processes() -> int:
    return len(_processes_of(os.getuid()))


class RlimitJudge(BaseJudge):
    """Subprocess + rlimits + clean env + temp dir (+ throwaway uid as root). Works on any Linux, any user.

    The portable baseline: containers without ``CAP_SYS_ADMIN`` and kernels that forbid unprivileged user
    namespaces still get it. See the module docstring for what it does and does not stop.
    """

    namespaces = False

    def __init__(
        self,
        *,
        limits: SandboxLimits | None = None,
        python: str | None = None,
        drop_privileges: bool | None = None,
        temp_root: Path | None = None,
    ) -> None:
        self.limits = limits or SandboxLimits()
        self.drop_privileges = (os.geteuid() == 0) if drop_privileges is None else drop_privileges
        if self.drop_privileges and os.geteuid() != 0:
            raise ValueError("drop_privileges needs root (a throwaway uid can only be taken by root)")
        self.python = python or sandbox_python(unprivileged=self.drop_privileges)
        self.temp_root = temp_root

    @property
    def name(self) -> str:
        return "rlimit"

    def protections(self) -> tuple[str, ...]:
        base = ("tempdir", "clean-env", "rlimits", "timeout", "killpg")
        return (*base, "uid") if self.drop_privileges else base

    def judge(self, program: str, *, timeout_s: float) -> Verdict:
        marker = "__tune_gate_done_" + secrets.token_hex(8)
        source = program.rstrip() + f"\n\nprint({marker!r}, flush=True)\n"
        started = time.monotonic()
        uid = _throwaway_uid() if self.drop_privileges else None
        scratch = Path(tempfile.mkdtemp(prefix="tune-gate-", dir=self.temp_root))
        try:
            workdir = scratch / "work"
            workdir.mkdir()
            (workdir / "solution.py").write_text(source)
            if uid is not None:
                # Only the work dir is the program's; the output file next to it stays ours.
                os.chmod(scratch, 0o711)
                for path in (workdir, workdir / "solution.py"):
                    os.chown(path, uid, uid)
            output_path = scratch / "output.txt"
            with open(output_path, "wb") as output:
                returncode, timed_out = self._run(workdir, uid, output, timeout_s)
            text = _tail(output_path)
        finally:
            if uid is not None:
                _kill_uid(uid)
            shutil.rmtree(scratch, ignore_errors=True)
        seconds = time.monotonic() - started
        passed, reason = _decide(returncode, timed_out, text, marker, timeout_s)
        return Verdict(
            passed=passed,
            reason=reason,
            output=text.replace(marker, "").rstrip(),
            seconds=seconds,
            protections=self.protections(),
        )

    def _spec(self, workdir: Path, uid: int | None, timeout_s: float) -> dict[str, object]:
        limits = self.limits
        nproc = limits.max_processes
        if uid is None:
            # Without our own uid, NPROC counts every process of this user: leave room for those (weak).
            nproc += _count_own_processes()
        return {
            "workdir": str(workdir),
            "program": str(workdir / "solution.py"),
            "python": self.python,
            "uid": uid,
            "gid": uid,
            "namespaces": self.namespaces,
            "private_dirs": ["/tmp", "/var/tmp", "/dev/shm"],
            "env": {
                "PATH": "/usr/bin:/bin",
                "HOME": str(workdir),
                "TMPDIR": str(workdir),
                "LANG": "C.UTF-8",
            },
            "limits": {
                "cpu_s": int(timeout_s + limits.cpu_slack_s + 0.999),
                "as_bytes": limits.memory_mb * 1024 * 1024,
                "fsize_bytes": limits.max_output_kb * 1024,
                "nofile": limits.max_open_files,
                "nproc": nproc,
            },
        }

    def _run(self, workdir: Path, uid: int | None, output: IO[bytes], timeout_s: float) -> tuple[int, bool]:
        spec = self._spec(workdir, uid, timeout_s)
        bootstrap_python = os.path.realpath(sys.executable)
        process = subprocess.Popen(
            [bootstrap_python, "-I", str(_BOOTSTRAP), json.dumps(spec)],
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            cwd=workdir,
            env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
            start_new_session=True,
            close_fds=True,
        )
        timed_out = False
        try:
            returncode = process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            # Always, even after a normal exit: children it left behind in its group die too.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
            returncode = process.wait()
        return returncode, timed_out


class NamespaceJudge(RlimitJudge):
    """:class:`RlimitJudge` plus new network, mount, PID, IPC and UTS namespaces.

    Why a second judge rather than a flag: it needs privileges the first does not (root, or unprivileged user
    namespaces), so it can fail where the baseline works; :func:`default_judge` picks it only after
    :func:`namespaces_available` proved it works here. With it, the program has no network, writes outside its
    work dir land on a private tmpfs that vanishes, and nothing it spawns outlives it.
    """

    namespaces = True

    @property
    def name(self) -> str:
        return "namespace"

    def protections(self) -> tuple[str, ...]:
        return (*super().protections(), "netns", "mountns", "pidns", "private-tmp")


def _tail(path: Path) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - _OUTPUT_TAIL))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def _last_error_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    for line in reversed(lines):
        # The exception line of a traceback: "AssertionError", "NameError: name 'x' is not defined".
        head = line.split(":", 1)[0]
        if head.endswith(("Error", "Exception", "Interrupt", "Exit")) and " " not in head:
            return line[:300]
    return lines[-1][:300] if lines else ""


def _decide(returncode: int, timed_out: bool, output: str, marker: str, timeout_s: float) -> tuple[bool, str]:
    if timed_out:
        return False, f"timeout after {timeout_s:g} s"
    if returncode == _SETUP_FAILED and "sandbox setup failed" in output:
        return False, _last_error_line(output) or "sandbox setup failed"
    if returncode < 0 or returncode > 128:
        sig = -returncode if returncode < 0 else returncode - 128
        try:
            reason = _SIGNAL_REASONS.get(signal.Signals(sig), f"killed by {signal.Signals(sig).name}")
        except ValueError:
            reason = f"killed by signal {sig}"
        return False, reason
    if returncode != 0:
        error = _last_error_line(output)
        return False, error or f"exit status {returncode}"
    if marker not in output:
        return False, "exited before the tests finished (exit status 0 without the completion marker)"
    return True, "passed"


@functools.cache
def namespaces_available() -> bool:
    """Whether :class:`NamespaceJudge` works on this machine (probed once by running a tiny program)."""
    try:
        judge = NamespaceJudge()
        verdict = judge.judge("import socket\nassert socket.if_nameindex()\n", timeout_s=20)
    except (OSError, RuntimeError, ValueError):
        return False
    return verdict.passed


def default_judge(*, kind: str = "auto", limits: SandboxLimits | None = None) -> BaseJudge:
    """The judge for ``kind``: ``namespace``, ``rlimit`` or ``auto`` (namespace when available)."""
    if kind == "rlimit":
        return RlimitJudge(limits=limits)
    if kind == "namespace":
        if not namespaces_available():
            raise RuntimeError(
                "the namespace sandbox does not work here (needs root or unprivileged user namespaces); "
                'use sandbox = "rlimit" or "auto"'
            )
        return NamespaceJudge(limits=limits)
    if kind != "auto":
        raise ValueError(f"unknown sandbox kind {kind!r}")
    return NamespaceJudge(limits=limits) if namespaces_available() else RlimitJudge(limits=limits)
