"""One tuner per server: a lock file on the target host.

Two tuners restarting the same server would each measure the other's configuration. The lock lives on the
*target* host (where the server is), so tuners started from two laptops still see each other.

- Atomic creation: the owner record is written to a temporary file which is then hard-linked to the lock path.
  ``ln`` fails when the path exists, so exactly one tuner wins, and a reader never sees a half-written record.
- The record names the owner (``user@hostname``), its PID and that PID's kernel start time, the study, and
  when it was taken; times come from the target host's clock, so tuners with skewed clocks agree.
- Stale locks: when the owner ran on the target host itself (same machine and boot id), a dead owner PID
  frees the lock at once. Otherwise the owner refreshes a heartbeat (a background thread by default) and a
  lock whose heartbeat is older than ``stale_after_s`` is taken over. Take-overs are serialised by a
  ``mkdir`` mutex and re-check the record, so two tuners cannot both take over the same stale lock.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import re
import secrets
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from urllib.parse import urlsplit

from tuner.config import TargetSection
from tuner.errors import HostError, LockHeld
from tuner.target.hosts import BaseHost
from tuner.wait import Every

__all__ = ["LockInfo", "TargetLock", "lock_path_for"]

# Prints the host's identity and clock, then tries to create the lock: "ACQUIRED" or "HELD" + the record.
_ACQUIRE = r"""
path=$1; record=$2
machine=$(cat /etc/machine-id 2>/dev/null)$(cat /proc/sys/kernel/random/boot_id 2>/dev/null)
printf 'host_machine=%s\n' "$machine"
now=$(date +%s); printf 'host_now=%s\n' "$now"
tmp="$path.$$.tmp"
umask 022
printf '%s\nsince=%s\nheartbeat=%s\n' "$record" "$now" "$now" > "$tmp" || exit 3
if ln "$tmp" "$path" 2>/dev/null; then rm -f "$tmp"; echo ACQUIRED; exit 0; fi
rm -f "$tmp"
echo HELD
cat "$path" 2>/dev/null
pid=$(sed -n 's/^pid=//p' "$path" 2>/dev/null)
if [ -n "$pid" ] && [ -r "/proc/$pid/stat" ]; then printf 'pidstat=%s\n' "$(cat "/proc/$pid/stat")"; fi
"""

# Replace a stale lock: under a mkdir mutex, only if the record still carries the stale token.
_TAKEOVER = r"""
path=$1; stale_token=$2; record=$3
mutex="$path.takeover"
if ! mkdir "$mutex" 2>/dev/null; then
  # A take-over that died half-way leaves its mutex: ignore one older than a minute.
  if [ -n "$(find "$mutex" -maxdepth 0 -mmin +1 2>/dev/null)" ]; then rmdir "$mutex" 2>/dev/null; fi
  mkdir "$mutex" 2>/dev/null || { echo BUSY; exit 0; }
fi
current=$(sed -n 's/^token=//p' "$path" 2>/dev/null)
if [ -n "$current" ] && [ "$current" != "$stale_token" ]; then rmdir "$mutex"; echo CHANGED; exit 0; fi
now=$(date +%s); tmp="$path.$$.tmp"
printf '%s\nsince=%s\nheartbeat=%s\n' "$record" "$now" "$now" > "$tmp" && mv -f "$tmp" "$path"
st=$?
rmdir "$mutex"
[ "$st" = 0 ] && echo ACQUIRED || echo FAILED
"""

# Rewrite the record with a new heartbeat, only while it is still ours (token matches).
_REFRESH = r"""
path=$1; token=$2
grep -qx "token=$token" "$path" 2>/dev/null || { echo LOST; exit 0; }
tmp="$path.$$.tmp"; now=$(date +%s)
sed "s/^heartbeat=.*/heartbeat=$now/" "$path" > "$tmp" && mv -f "$tmp" "$path" && echo OK
"""

_RELEASE = r"""
path=$1; token=$2
grep -qx "token=$token" "$path" 2>/dev/null && rm -f "$path"
exit 0
"""


@dataclass(frozen=True, kw_only=True)
class LockInfo:
    """Who holds a lock, as recorded in it."""

    owner: str
    pid: int
    pid_start: str
    machine: str
    study: str
    since: int
    heartbeat: int
    token: str

    @classmethod
    def parse(cls, text: str) -> LockInfo | None:
        fields: dict[str, str] = {}
        for line in text.splitlines():
            key, eq, value = line.partition("=")
            if eq:
                fields[key] = value
        try:
            return cls(
                owner=fields.get("owner", "?"),
                pid=int(fields.get("pid", "0")),
                pid_start=fields.get("pid_start", ""),
                machine=fields.get("machine", ""),
                study=fields.get("study", "?"),
                since=int(fields.get("since", "0")),
                heartbeat=int(fields.get("heartbeat", fields.get("since", "0"))),
                token=fields.get("token", ""),
            )
        except ValueError:
            return None

    def describe(self, now: int) -> str:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.since))
        return (
            f"{self.owner} (pid {self.pid}, study {self.study!r}, since {when}, {_ago(now - self.since)}; "
            f"last heartbeat {_ago(now - self.heartbeat)})"
        )


def _ago(seconds: int) -> str:
    seconds = max(0, seconds)
    if seconds < 120:
        return f"{seconds} s ago"
    if seconds < 7200:
        return f"{seconds // 60} min ago"
    return f"{seconds / 3600:.1f} h ago"


def _self_identity() -> tuple[str, str]:
    """(machine+boot id, kernel start time of this process): what lets the target judge our PID."""
    parts = []
    for name in ("/etc/machine-id", "/proc/sys/kernel/random/boot_id"):
        with contextlib.suppress(OSError):
            parts.append(Path(name).read_text().strip())
    try:
        stat = Path(f"/proc/{os.getpid()}/stat").read_text()
        start = stat.rpartition(")")[2].split()[19]
    except (OSError, IndexError):
        start = ""
    return "".join(parts), start


def lock_path_for(target: TargetSection) -> str:
    """``/tmp/tune-<unit>.lock`` for a systemd target, ``/tmp/tune-port-<port>.lock`` otherwise."""
    if target.systemd is not None and target.manager == "systemd":
        name = target.systemd.unit
    else:
        url = urlsplit(target.base_url)
        name = f"port-{url.port or (443 if url.scheme == 'https' else 80)}"
    return f"/tmp/tune-{re.sub(r'[^A-Za-z0-9_.@-]', '_', name)}.lock"


class TargetLock:
    """The server's lock, held for the duration of a study (``with TargetLock(...):``).

    ``heartbeat_s`` > 0 starts a daemon thread that refreshes the heartbeat while the lock is held (it uses
    the same host object; hosts are safe to share between threads).
    """

    def __init__(
        self,
        *,
        host: BaseHost,
        path: str,
        study: str,
        stale_after_s: float = 900.0,
        heartbeat_s: float = 60.0,
    ) -> None:
        self._host = host
        self.path = path
        self._study = study
        self._stale_after = stale_after_s
        self._heartbeat = heartbeat_s
        self._token = secrets.token_hex(8)
        self._held = False
        self._beat: Every | None = None
        self.took_over: LockInfo | None = None
        """The stale lock this one replaced, if any (for a message)."""

    @property
    def held(self) -> bool:
        return self._held

    def _record(self) -> str:
        machine, start = _self_identity()
        owner = f"{getpass.getuser()}@{socket.gethostname()}"
        study = re.sub(r"[\n\r]", " ", self._study)
        return "\n".join(
            [
                f"owner={owner}",
                f"pid={os.getpid()}",
                f"pid_start={start}",
                f"machine={machine}",
                f"study={study}",
                f"token={self._token}",
            ]
        )

    def _stale_reason(
        self, info: LockInfo, *, host_machine: str, now: int, pidstat: str | None
    ) -> str | None:
        """Why the lock is stale, or None when its owner may still be alive."""
        if info.machine and host_machine and info.machine == host_machine:
            # Same machine and boot: the PID is meaningful here; check it is still the same process.
            if pidstat is None:
                return f"owner pid {info.pid} is gone"
            start = pidstat.rpartition(")")[2].split()[19:20]
            if info.pid_start and start and start[0] != info.pid_start:
                return f"owner pid {info.pid} was reused by another process"
            return None
        if now - info.heartbeat > self._stale_after:
            return f"no heartbeat for {now - info.heartbeat} s (stale after {self._stale_after:.0f} s)"
        return None

    def acquire(self) -> None:
        """Take the lock, or raise :class:`LockHeld` naming the holder."""
        if self._held:
            return
        record = self._record()
        for _ in range(3):
            result = self._host.run(["sh", "-c", _ACQUIRE, "sh", self.path, record], timeout=60)
            if not result.ok:
                detail = result.stderr.strip() or result.stdout
                raise HostError(f"cannot create lock {self.path} on {self._host.name}: {detail}")
            lines = result.stdout.splitlines()
            verdict = next((i for i, line in enumerate(lines) if line in ("ACQUIRED", "HELD")), None)
            if verdict is None:
                raise HostError(f"unexpected answer while creating lock {self.path}: {result.stdout!r}")
            head = dict(line.partition("=")[::2] for line in lines[:verdict])
            host_machine = head.get("host_machine", "")
            now = int(head.get("host_now") or 0) or int(time.time())
            if lines[verdict] == "ACQUIRED":
                self._held = True
                self._start_heartbeat()
                return
            body = lines[verdict + 1 :]
            pidstat = next((line[len("pidstat=") :] for line in body if line.startswith("pidstat=")), None)
            info = LockInfo.parse("\n".join(line for line in body if not line.startswith("pidstat=")))
            if info is None or not info.token:
                # Unreadable or vanished between `ln` and `cat` (released just now): try again.
                time.sleep(0.1)
                continue
            reason = self._stale_reason(info, host_machine=host_machine, now=now, pidstat=pidstat)
            if reason is None:
                raise LockHeld(
                    f"{self._host.name} is being tuned by {info.describe(now)}; lock {self.path}. Wait for "
                    "it to finish, or stop it; if it is gone, the lock is taken over automatically once "
                    "stale "
                    f"(owner pid dead on this host, or no heartbeat for {self._stale_after:.0f} s)"
                )
            take = self._host.run(["sh", "-c", _TAKEOVER, "sh", self.path, info.token, record], timeout=60)
            if take.stdout.strip() == "ACQUIRED":
                self.took_over = info
                self._held = True
                self._start_heartbeat()
                return
            time.sleep(0.1)  # someone else changed it: look again
        raise LockHeld(f"could not take lock {self.path} on {self._host.name}: it keeps changing hands")

    def refresh(self) -> None:
        """Renew the heartbeat; :class:`LockHeld` if the lock is no longer ours (taken over as stale)."""
        if not self._held:
            return
        result = self._host.run(["sh", "-c", _REFRESH, "sh", self.path, self._token], timeout=60)
        if result.stdout.strip() == "LOST":
            self._held = False
            raise LockHeld(f"lock {self.path} on {self._host.name} was taken over by another tuner")

    def release(self) -> None:
        if self._beat is not None:
            self._beat.stop()
            self._beat = None
        if self._held:
            self._held = False
            self._host.run(["sh", "-c", _RELEASE, "sh", self.path, self._token], timeout=60)

    def holder(self) -> LockInfo | None:
        """Who holds the lock now (None when free), without taking it: for ``tune check``."""
        try:
            text = self._host.read_file(self.path).decode(errors="replace")
        except FileNotFoundError:
            return None
        return LockInfo.parse(text)

    def _start_heartbeat(self) -> None:
        if self._heartbeat <= 0:
            return

        def beat() -> bool:
            try:
                self.refresh()
            except LockHeld:
                return False
            except HostError:
                pass  # a network blip: the next beat tries again, long before the lock goes stale
            return True

        self._beat = Every(self._heartbeat, beat, name="tune-lock-heartbeat").start()

    def __enter__(self) -> TargetLock:
        self.acquire()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()
