from __future__ import annotations

import json
import posixpath
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tuner.errors import HostError, StartFailed
from tuner.spec import LaunchSpec, program_part
from tuner.target.hosts import BaseHost
from tuner.target.services._base import (
    BaseService,
    Finding,
    LogChunk,
    Preflight,
    ProcessIdentity,
    Restarted,
    ServiceState,
)
from tuner.target.services._proc import (
    ProcStat,
    descendants,
    listen_ports,
    process_table,
    read_specs,
    serves_port,
    serving_pids,
    stat_of,
)
from tuner.wait import wait_until

if TYPE_CHECKING:  # tuner.config imports this package (launch specs); only the type is needed here
    from tuner.config import GpuWaitSection

# The launcher runs under `sh` on the target host (local or remote alike).
# - `setsid` gives the server its own session and process group, so stop() can signal exactly the server and
#   its children, and a terminal's Ctrl-C never reaches it.
# - A small wrapper shell waits for the server and records its exit status in the log and in a file: after a
#   crash we can say "exited with status 1" instead of guessing. The wrapper ignores TERM/INT/HUP itself
#   (set *after* forking the server, so the server keeps default signal handling) so that it survives the
#   group-wide SIGTERM long enough to write the status.
_LAUNCH = r"""
log=$1; state=$2; cwd=$3; shift 3
mkdir -p "$(dirname "$log")" "$(dirname "$state")" || exit 97
rm -f "$state.pid" "$state.pgid" "$state.exit"
[ -n "$cwd" ] && { cd "$cwd" || exit 98; }
setsid sh -c '
  state=$1; shift
  echo "$$" > "$state.pgid"
  "$@" &
  child=$!
  echo "$child" > "$state.pid"
  trap "" TERM INT HUP
  wait "$child"; st=$?
  echo "$st" > "$state.exit"
  echo "tune: server process $child exited with status $st"
' sh "$state" "$@" > "$log" 2>&1 < /dev/null &
echo "$!"
i=0
while [ ! -s "$state.pid" ] && [ "$i" -lt 1000 ]; do sleep 0.01; i=$((i+1)); done
cat "$state.pid"
"""


# Is the launch program there and executable (a path is checked as a file, a bare name on PATH)?
_PROGRAM = r"""
[ -n "$2" ] && cd "$2" 2>/dev/null
case $1 in
  */*) if [ ! -e "$1" ]; then echo missing; elif [ -d "$1" ] || [ ! -x "$1" ]; then echo noexec; else echo ok; fi ;;
  *) if command -v "$1" >/dev/null 2>&1; then echo ok; else echo missing; fi ;;
esac
"""


@dataclass(frozen=True)
class _Running:
    identity: ProcessIdentity | None
    """None in an intent record: written before the launch, so a tune killed mid-launch leaves a trace."""
    pgid: int
    log: str
    state_file: str


class ProcessService(BaseService):
    """The server as a plain process on a host (local or over SSH): ``setsid``, a log file per start.

    Stops are SIGTERM to the server's process group, a grace period, then SIGKILL to the group; processes
    are only ever addressed by the PID/PGID we started (plus the kernel start time), never by name. What runs
    is remembered in ``LOG_DIR/<record_name>`` on the host (one record per served port), so a new ``tune``
    process (after a crash or ``kill -9``) stops the server its predecessor left instead of colliding with it
    on the port.
    """

    def __init__(
        self,
        *,
        host: BaseHost,
        base: LaunchSpec,
        log_dir: str,
        workdir: str | None = None,
        stop_grace_s: float = 30.0,
        poll_interval_s: float = 0.05,
        gpu_wait: GpuWaitSection | None = None,
        record_name: str = "current.json",
        state_dir: str | None = None,
    ) -> None:
        self._host = host
        self._base = base
        self._staged = base
        self._log_dir = log_dir
        self._workdir = workdir
        self._grace = stop_grace_s
        self._poll = poll_interval_s
        # Records and exit-status files live apart from the logs: a user (or a tmp cleaner) may delete logs.
        self._state_dir = state_dir or log_dir
        self._record = posixpath.join(self._state_dir, record_name)
        self._gpu_wait = gpu_wait

    # -- what runs ---------------------------------------------------------------------------------------

    def _load(self) -> _Running | None:
        try:
            data = json.loads(self._host.read_file(self._record))
        except FileNotFoundError:
            return None
        except (ValueError, KeyError):
            return None
        pid = data.get("pid")
        identity = None if pid is None else ProcessIdentity(pid=int(pid), started=str(data["started"]))
        return _Running(
            identity=identity,
            pgid=int(data.get("pgid") or 0),
            log=str(data["log"]),
            state_file=str(data["state_file"]),
        )

    def _save(self, running: _Running | None) -> None:
        if running is None:
            self._host.remove_file(self._record)
            return
        data = {
            "pid": running.identity.pid if running.identity else None,
            "started": running.identity.started if running.identity else None,
            "pgid": running.pgid,
            "log": running.log,
            "state_file": running.state_file,
        }
        self._host.write_file(self._record, json.dumps(data).encode())

    def _stats(self) -> dict[int, ProcStat]:
        return process_table(self._host)

    @staticmethod
    def _alive_in(stats: dict[int, ProcStat], identity: ProcessIdentity) -> bool:
        st = stats.get(identity.pid)
        return st is not None and st.start == identity.started and st.state not in ("Z", "X")

    def _group_alive(self, stats: dict[int, ProcStat], pgid: int) -> list[int]:
        return [s.pid for s in stats.values() if s.pgid == pgid and s.state not in ("Z", "X")]

    # -- BaseService ---------------------------------------------------------------------------------------

    def apply(self, spec: LaunchSpec) -> None:
        self._staged = spec

    def revert(self) -> None:
        self._staged = self._base

    def is_alive(self, identity: ProcessIdentity) -> bool:
        st = self._stat_of(identity.pid)
        return st is not None and st.start == identity.started and st.state not in ("Z", "X")

    def _stat_of(self, pid: int) -> ProcStat | None:
        return stat_of(self._host, pid)

    def serves(self, identity: ProcessIdentity, port: int) -> bool | None:
        if not self.is_alive(identity):
            return False
        return serves_port(self._host, identity.pid, port)

    def listen_ports(self, identity: ProcessIdentity) -> set[int] | None:
        if not self.is_alive(identity):
            return set()
        return listen_ports(self._host, descendants(self._stats(), identity.pid))

    def state(self) -> ServiceState:
        running = self._load()
        if running is None:
            return ServiceState(running=False, identity=None, detail="not started")
        if running.identity is None:
            launched = self._launched(running)
            st = self._stat_of(launched.pgid) if launched.pgid > 0 else None
            if st is None or not st.alive:
                return ServiceState(running=False, identity=None, detail=f"launch of {running.log} interrupted")
            # The launch wrapper leads the group: the server runs below it.
            wrapper = ProcessIdentity(pid=launched.pgid, started=st.start)
            return ServiceState(running=True, identity=wrapper, detail=f"left by an interrupted launch ({running.log})")
        if self.is_alive(running.identity):
            return ServiceState(running=True, identity=running.identity, detail=f"running, log {running.log}")
        status = self._exit_status(running)
        detail = "exited" if status is None else f"exited with status {status}"
        return ServiceState(running=False, identity=running.identity, exit_status=status, detail=detail)

    def _exit_status(self, running: _Running) -> int | None:
        try:
            return int(self._host.read_file(running.state_file + ".exit").decode().strip())
        except (FileNotFoundError, ValueError):
            return None

    def restart(self, *, label: str = "run") -> Restarted:
        previous = self._load()
        old = previous.identity if previous and previous.identity and self.is_alive(previous.identity) else None
        self.stop()
        if self._gpu_wait is not None:
            from tuner.target.services._gpu import wait_gpu_free

            # The old process is gone, but the driver may still be releasing its memory.
            wait_gpu_free(self._host, self._gpu_wait)
        spec = self._staged
        log = posixpath.join(self._log_dir, f"{label}.log")
        # Named after this server's record too: two workers of a study on one host share the state directory.
        record = posixpath.splitext(posixpath.basename(self._record))[0]
        state_file = posixpath.join(self._state_dir, f".{record}.{label}")
        # The intent first: a tune killed during the launch leaves a record the next one finds (by its files).
        made = self._host.run(["mkdir", "-p", self._state_dir])
        if not made.ok:
            raise HostError(f"cannot create the state directory {self._state_dir} on {self._host.name}: {made.stderr}")
        self._save(_Running(identity=None, pgid=0, log=log, state_file=state_file))
        argv = [
            *(["env", *(f"{k}={v}" for k, v in sorted(spec.env.items()))] if spec.env else []),
            *spec.argv,
        ]
        result = self._host.run_script(_LAUNCH, log, state_file, self._workdir or "", *argv, timeout=30)
        lines = result.stdout.split()
        if not result.ok or len(lines) < 2:
            raise StartFailed(
                f"could not launch the server on {self._host.name} (launcher exited {result.exit_status})",
                evidence=(result.stderr or result.stdout)[-4000:],
                phase=None,
            )
        pgid, pid = int(lines[0]), int(lines[1])
        st = self._stat_of(pid)
        if st is None:
            # Exited before we could read its start time: still identify it, so readiness reports the exit.
            st = ProcStat(pid=pid, state="X", ppid=0, pgid=pgid, start="exited-before-identified")
        identity = ProcessIdentity(pid=pid, started=st.start)
        self._save(_Running(identity=identity, pgid=pgid, log=log, state_file=state_file))
        return Restarted(old=old, new=identity, log_cursor="0")

    def stop(self) -> None:
        running = self._load()
        if running is None:
            return
        if running.identity is None:
            running = self._launched(running)
        stats = self._stats()
        leader = stats.get(running.pgid)
        # Signal the group only while its members are the ones we started: the recorded server PID must
        # still carry its start time, or (the server gone) the wrapper must still lead its group. A recycled
        # PGID belongs to someone else and is left alone.
        ours = (running.identity is not None and self._alive_in(stats, running.identity)) or (
            running.pgid > 0 and leader is not None and leader.pgid == running.pgid and leader.state not in ("Z", "X")
        )
        if ours and self._group_alive(stats, running.pgid):
            self._host.run(["kill", "-TERM", "--", f"-{running.pgid}"])
            if not self._wait_gone(running.pgid, self._grace):
                self._host.run(["kill", "-KILL", "--", f"-{running.pgid}"])
                if not self._wait_gone(running.pgid, 10.0):
                    raise HostError(f"process group {running.pgid} survived SIGKILL on {self._host.name}")
        self._save(None)

    def _launched(self, intent: _Running) -> _Running:
        """What an interrupted launch started: the wrapper's group, proven ours by the state path it carries."""
        try:
            pgid = int(self._host.read_file(intent.state_file + ".pgid").decode().strip())
        except (FileNotFoundError, ValueError):
            return intent  # the launcher never ran
        cmdline = self._host.run(["cat", f"/proc/{pgid}/cmdline"])
        if not cmdline.ok or intent.state_file not in cmdline.stdout.split("\0"):
            return intent  # gone, or the pgid was recycled by someone else's process
        return _Running(identity=None, pgid=pgid, log=intent.log, state_file=intent.state_file)

    def _wait_gone(self, pgid: int, seconds: float) -> bool:
        """Whether every process of the group exited within ``seconds``."""
        gone = wait_until(
            lambda _: True if not self._group_alive(self._stats(), pgid) else None,
            timeout=seconds,
            interval=self._poll,
        )
        return bool(gone)

    def preflight(self) -> Preflight:
        program = self._base.argv[0]
        result = self._host.run_script(_PROGRAM, program, self._workdir or "", timeout=30)
        where = f" on {self._host.name}" if self._host.name != "local" else ""
        text = {
            "ok": f"program {program} found",
            "missing": f"launch program {program} not found{where} (target.command[0])",
            "noexec": f"launch program {program} is not executable{where} (target.command[0])",
        }.get(result.stdout.strip(), f"launch program {program}: cannot check{where} ({result.stderr.strip()})")
        finding = Finding(ok=result.stdout.strip() == "ok", text=text)
        return Preflight(findings=(finding,), program=program_part(self._base.argv))

    def read_log(self, cursor: str) -> LogChunk:
        running = self._load()
        if running is None:
            return LogChunk(text="", cursor=cursor)
        offset = int(cursor or 0)
        try:
            data = self._host.read_file(running.log, offset=offset)
        except FileNotFoundError:
            data = b""
        return LogChunk(text=data.decode(errors="replace"), cursor=str(offset + len(data)))

    def log_location(self) -> str | None:
        running = self._load()
        if running is None:
            return None
        return running.log if self._host.name == "local" else f"{running.log} on {self._host.name}"

    def running_spec(self) -> LaunchSpec | None:
        pid = self._live_pid()
        specs = read_specs(self._host, [pid]) if pid is not None else []
        return specs[0] if specs else None

    def running_specs(self, *, port: int | None = None) -> tuple[LaunchSpec, ...]:
        pid = self._live_pid()
        if pid is None:
            return ()
        return tuple(read_specs(self._host, serving_pids(self._host, pid, port)))

    def _live_pid(self) -> int | None:
        running = self._load()
        if running is None or running.identity is None or not self.is_alive(running.identity):
            return None
        return running.identity.pid
