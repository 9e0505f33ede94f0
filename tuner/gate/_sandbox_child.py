"""Sandbox bootstrap: runs as the judge's child, sets up isolation, then execs the untrusted program.

Run as ``python -I _sandbox_child.py SPEC_JSON``; standard library only (``-I`` keeps ``tuner`` off the path).
Why a bootstrap instead of ``subprocess``'s ``preexec_fn``: the gate judges answers from a thread pool, and
``preexec_fn`` runs Python between ``fork`` and ``exec``, which can deadlock in a threaded parent. Here the
setup runs in a fresh single-threaded interpreter *before* any untrusted code exists, and the program itself
starts in a pristine interpreter via ``execve``, inheriting only the limits, namespaces and credentials.

Order matters: namespaces and mounts need privileges, so they come first; the rlimits next; the credentials
are dropped last (after which nothing privileged can happen); the parent-death signal is armed after the
uid change because changing credentials clears it.

Exit codes of the bootstrap itself (never produced by a normal program run): 121 = setup failed.
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import signal
import sys

SETUP_FAILED = 121

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
PR_SET_PDEATHSIG = 1
PR_SET_NO_NEW_PRIVS = 38

_libc = ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    _check(
        _libc.mount(
            source.encode() if source else None,
            target.encode(),
            fstype.encode() if fstype else None,
            ctypes.c_ulong(flags),
            data.encode() if data else None,
        ),
        f"mount {target}",
    )


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def _enter_namespaces(spec: dict) -> None:
    flags = CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS
    uid, gid = os.getuid(), os.getgid()
    if uid != 0:
        # Unprivileged: a user namespace (mapping only our own uid) grants the rights to make the others.
        flags |= CLONE_NEWUSER
    _check(_libc.unshare(flags), "unshare")
    if uid != 0:
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"{uid} {uid} 1\n")
        _write("/proc/self/gid_map", f"{gid} {gid} 1\n")
    # Keep our mounts out of the host's mount table (and the host's out of ours).
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    workdir = spec["workdir"]
    keep = os.open(workdir, os.O_RDONLY | os.O_DIRECTORY)
    # Fresh, private tmpfs over every world-writable scratch place: writes outside the work dir vanish with
    # the namespace instead of landing on the host's /tmp.
    for scratch in spec["private_dirs"]:
        if os.path.isdir(scratch):
            _mount("tmpfs", scratch, "tmpfs", MS_NOSUID | MS_NODEV, "size=64m,mode=1777")
    # The work dir lived under one of those (usually /tmp): bring it back at the same path.
    if not os.path.isdir(workdir):
        os.makedirs(workdir, mode=0o755)
        _mount(f"/proc/self/fd/{keep}", workdir, None, MS_BIND)
    os.close(keep)


def _limit(name: str, value: int | None) -> None:
    if value is None:
        return
    which = getattr(resource, name)
    _soft, hard = resource.getrlimit(which)
    value = value if hard == resource.RLIM_INFINITY else min(value, hard)
    resource.setrlimit(which, (value, value))


def _become_program(spec: dict) -> None:
    limits = spec["limits"]
    # The CPU limit is a backstop for the wall-clock timeout; SIGXCPU then SIGKILL end a spinning program.
    _limit("RLIMIT_CPU", limits.get("cpu_s"))
    _limit("RLIMIT_AS", limits.get("as_bytes"))
    _limit("RLIMIT_FSIZE", limits.get("fsize_bytes"))
    _limit("RLIMIT_NOFILE", limits.get("nofile"))
    _limit("RLIMIT_CORE", 0)
    if spec.get("uid") is not None:
        os.setgroups([])
        os.setgid(spec["gid"])
        os.setuid(spec["uid"])
    # NPROC counts processes per real uid, so it is set once the uid is the sandbox's own.
    _limit("RLIMIT_NPROC", limits.get("nproc"))
    os.chdir(spec["workdir"])
    os.umask(0o077)
    parent = os.getppid()
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    # No setuid binary run by the program can regain privileges.
    _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    if os.getppid() != parent:  # our parent died before the death signal was armed
        os._exit(SETUP_FAILED)
    python = spec["python"]
    os.execve(python, [python, "-I", spec["program"]], spec["env"])


def _relay(pid: int) -> None:
    # The bootstrap waits for the namespace's init (the program) and mirrors how it ended.
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
    os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 1)


def main() -> None:
    spec = json.loads(sys.argv[1])
    try:
        if spec["namespaces"]:
            _enter_namespaces(spec)
            # CLONE_NEWPID applies to children: fork so the program becomes the namespace's init. When it
            # exits (or is killed), the kernel kills every process left inside, even setsid() escapees.
            pid = os.fork()
            if pid:
                _relay(pid)
            _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
        _become_program(spec)
    except Exception as exc:
        # Reported distinctly: a setup failure is the sandbox's fault, not the model's.
        print(f"sandbox setup failed: {exc}", file=sys.stderr, flush=True)
        os._exit(SETUP_FAILED)


if __name__ == "__main__":
    main()
