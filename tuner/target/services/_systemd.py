"""The server as a systemd unit: trials are drop-ins, the unit file itself is never edited.

The seed edited ``ExecStart`` with ``sed`` and lost the original on the first bad pattern. Here a trial is a
drop-in ``UNIT_DIR/UNIT.d/50-tune.conf`` that resets ``ExecStart=`` and sets the trial's command line and
environment; :meth:`SystemdService.revert` deletes it, and the unit file is checksummed before and after to
prove it was not touched.

Logs. Two ways to follow the journal "since this start", chosen by ``systemd.log_mode``:

- ``cursor`` (real journald): the new process's ``InvocationID`` selects exactly its own lines
  (``journalctl _SYSTEMD_INVOCATION_ID=ID -o cat --show-cursor --after-cursor=C``), so the old process's
  shutdown noise (SGLang workers print tracebacks when killed) is never taken for the new one's failure.
- ``lines`` (journalctl implementations without cursors, e.g. docker-systemctl-replacement): the cursor is a
  character offset into ``journalctl -u UNIT --no-pager`` output, and a restart is done as ``stop`` + count +
  ``start`` so that offset separates old output from new exactly.
- ``auto`` (default): ``cursor`` when ``journalctl --version`` reports systemd, else ``lines``.
"""

from __future__ import annotations

import hashlib
import posixpath
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from tuner.config import GpuWaitSection, SystemdSection
from tuner.errors import ConfigNotApplied, HostError, StartFailed
from tuner.secrets import is_secret_env
from tuner.spec import LaunchSpec, program_part, spec_matches
from tuner.target.hosts import BaseHost, CommandResult
from tuner.target.services._base import (
    BaseService,
    Finding,
    LogChunk,
    Preflight,
    ProcessIdentity,
    Restarted,
    ServiceState,
)
from tuner.target.services._proc import read_specs, serves_port, serving_pids

__all__ = [
    "SystemdService",
    "UnitFileChanged",
    "dropin_text",
    "parse_unit_text",
    "systemd_quote",
    "systemd_split",
]

Progress = Callable[[str], None]


class UnitFileChanged(HostError):
    """The unit file's checksum changed while `tune` managed it (someone else edited it)."""


# -- systemd's quoting ---------------------------------------------------------------------------------------

_SAFE = re.compile(r"^[A-Za-z0-9_,./:=+@-]+$")
_C_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t", "\r": "\\r"}


def _c_escape(text: str) -> str:
    out = []
    for ch in text:
        if ch in _C_ESCAPES:
            out.append(_C_ESCAPES[ch])
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    return "".join(out)


def systemd_quote(arg: str, *, exec_line: bool = True) -> str:
    """One argument as systemd reads it back verbatim (systemd.syntax(7), systemd.service(5)).

    Double quotes around anything but plain words; inside them C escapes for ``\\``, ``"`` and control
    characters; ``%`` doubled (specifiers); on ExecStart lines ``$`` doubled too (systemd expands ``$VAR``
    there, but not in ``Environment=`` values). A quoted ``;`` is an argument, not a command separator.
    """
    text = arg.replace("%", "%%")
    if exec_line:
        text = text.replace("$", "$$")
    if arg and _SAFE.match(arg):
        return text
    return '"' + _c_escape(text) + '"'


def exec_start_value(argv: Sequence[str]) -> str:
    if not argv:
        raise ValueError("empty command")
    program = argv[0]
    if program[:1] in ("-", "@", ":", "+", "!"):
        # systemd would read these as ExecStart prefixes even inside quotes.
        raise ValueError(f"the program {program!r} starts with a character systemd treats as a prefix")
    return " ".join(systemd_quote(a) for a in argv)


def environment_value(key: str, value: str) -> str:
    if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", key):
        raise ValueError(f"{key!r} is not a valid environment variable name")
    return systemd_quote(f"{key}={value}", exec_line=False)


def dropin_text(spec: LaunchSpec, *, unset: Sequence[str] = ()) -> str:
    """The drop-in that makes the unit run ``spec``: ExecStart reset and replaced, environment set/unset."""
    lines = [
        "# Written by `tune` for one trial; `tune restore` removes it. The unit file itself is untouched.",
        "[Service]",
        "ExecStart=",
        "ExecStart=" + exec_start_value(spec.argv),
    ]
    lines += ["Environment=" + environment_value(k, v) for k, v in sorted(spec.env.items())]
    if unset:
        lines.append("UnsetEnvironment=" + " ".join(systemd_quote(k, exec_line=False) for k in unset))
    return "\n".join(lines) + "\n"


_UNESCAPE = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v", "s": " ",
             "\\": "\\", '"': '"', "'": "'"}  # fmt: skip


def systemd_split(text: str, *, exec_line: bool = True) -> list[str]:
    """The inverse of :func:`systemd_quote`: split a value into words as systemd does.

    Handles double and single quotes, C escapes, ``%%`` and (on exec lines) ``$$``. Other specifiers and
    ``$VAR`` references are kept verbatim: they depend on the unit and its environment.
    """
    words: list[str] = []
    i, n = 0, len(text)
    while True:
        while i < n and text[i] in " \t":
            i += 1
        if i >= n:
            return words
        word: list[str] = []
        quote: str | None = None
        while i < n:
            ch = text[i]
            if quote is None and ch in " \t":
                break
            if ch in "\"'" and (quote is None or quote == ch):
                quote = None if quote else ch
                i += 1
                continue
            piece, used = _escape(text, i) if ch == "\\" else (None, 0)
            if piece is None and text[i + 1 : i + 2] == ch and (ch == "%" or (exec_line and ch == "$")):
                piece, used = ch, 2  # %% and (on exec lines) $$ stand for one literal character
            word.append(piece if piece is not None else ch)
            i += used or 1
        words.append("".join(word))


def _escape(text: str, i: int) -> tuple[str | None, int]:
    """The character a backslash escape at ``text[i]`` stands for and its length, or (None, 0) if none."""
    nxt = text[i + 1 : i + 2]
    if nxt and nxt in _UNESCAPE:
        return _UNESCAPE[nxt], 2
    if nxt == "x" and re.fullmatch(r"[0-9a-fA-F]{2}", text[i + 2 : i + 4]):
        return chr(int(text[i + 2 : i + 4], 16)), 4
    if re.fullmatch(r"[0-7]{3}", text[i + 1 : i + 4]):
        return chr(int(text[i + 1 : i + 4], 8)), 4
    if nxt == ";":
        return ";", 2
    return None, 0


@dataclass(frozen=True, kw_only=True)
class UnitConfig:
    """What a unit's files say: the effective ExecStart argv and Environment, file by file."""

    exec_start: tuple[str, ...] | None
    environment: dict[str, str]
    files: tuple[str, ...]
    """The files shown by ``systemctl cat`` (real systemd prints a ``# /path`` header per file)."""
    exec_start_files: tuple[str, ...]
    """Which files set ExecStart (a later drop-in than ours would override the trial's)."""


def parse_unit_text(text: str, *, skip_files: Sequence[str] = ()) -> UnitConfig:
    """Parse ``systemctl cat`` output; files named in ``skip_files`` are ignored (e.g. our own drop-in)."""
    unit = _UnitParse()
    current = "(unit)"
    section = ""
    for line in _logical_lines(text):
        stripped = line.strip()
        if stripped.startswith("# /") and stripped.endswith((".service", ".conf")):
            current = stripped[2:]
            unit.files.append(current)
            section = ""
            continue
        if current in skip_files or not stripped or stripped[0] in "#;":
            continue
        if stripped.startswith("[") and stripped.endswith("]"):
            section = stripped[1:-1]
        elif section == "Service" and "=" in stripped:
            key, _, value = stripped.partition("=")
            unit.assign(key.strip(), value.strip(), file=current)
    return UnitConfig(
        exec_start=unit.exec_start,
        environment=unit.env,
        files=tuple(unit.files),
        exec_start_files=tuple(unit.exec_files),
    )


def _logical_lines(text: str) -> list[str]:
    """Lines with continuations (a trailing backslash) joined, as systemd's parser does."""
    logical: list[str] = []
    for raw in text.splitlines():
        if logical and logical[-1].endswith("\\"):
            logical[-1] = logical[-1][:-1] + " " + raw.strip()
        else:
            logical.append(raw)
    return logical


@dataclass
class _UnitParse:
    """The effective [Service] settings so far, as systemd applies the files in order."""

    exec_start: tuple[str, ...] | None = None
    env: dict[str, str] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)
    exec_files: list[str] = field(default_factory=list)

    def assign(self, key: str, value: str, *, file: str) -> None:
        if key == "ExecStart":
            # An empty assignment resets the list (how a drop-in replaces the unit's command).
            words = systemd_split(value) if value else []
            if words:
                words[0] = words[0].lstrip("-@:+!")
                self.exec_files.append(file)
            self.exec_start = tuple(words) if words else None
        elif key == "Environment":
            if not value:
                self.env.clear()
            for item in systemd_split(value, exec_line=False):
                k, eq, v = item.partition("=")
                if eq:
                    self.env[k] = v
        elif key == "UnsetEnvironment":
            for item in systemd_split(value, exec_line=False):
                self.env.pop(item.partition("=")[0], None)


# -- the service ---------------------------------------------------------------------------------------------

# `systemctl show` then the main process's kernel stat line, in one round trip. "$@" is the show command
# (with any sudo prefix), so nothing is interpolated into shell text.
_SHOW = r"""
out=$("$@") || { st=$?; printf '%s\n' "$out"; exit "$st"; }
printf '%s\n' "$out"
pid=$(printf '%s\n' "$out" | sed -n 's/^MainPID=//p')
if [ -n "$pid" ] && [ "$pid" != 0 ]; then
  printf 'ProcStat='; cat "/proc/$pid/stat" 2>/dev/null || echo
fi
"""

_SHOW_PROPS = (
    "MainPID",
    "ActiveEnterTimestampMonotonic",
    "InvocationID",
    "ActiveState",
    "SubState",
    "ExecMainStatus",
    "Result",
    "FragmentPath",
)

# Write a root-owned file atomically through the sudo prefix (SFTP cannot write as root).
_PRIV_WRITE = r"""
umask 022
d=$(dirname "$1") && mkdir -p "$d" && t=$(mktemp "$d/.tune.XXXXXX") || exit 1
cat > "$t" && chmod 644 "$t" && mv -f "$t" "$1" || { rm -f "$t"; exit 1; }
"""


def _stat_start(stat_line: str) -> tuple[str, str] | None:
    """(state, kernel start time) from a /proc/PID/stat line (the command name may contain spaces)."""
    _, sep, rest = stat_line.rpartition(")")
    fields = rest.split()
    if not sep or len(fields) < 20:
        return None
    return fields[0], fields[19]


@dataclass(frozen=True, kw_only=True)
class _Snapshot:
    props: dict[str, str]
    pid: int
    proc_state: str | None
    proc_start: str | None

    @property
    def identity(self) -> ProcessIdentity | None:
        if self.pid <= 0 or self.proc_start is None:
            return None
        # Real systemd gives ActiveEnterTimestampMonotonic, which changes on every start; implementations
        # without it fall back to the kernel's start time of the PID. Both guard against PID reuse.
        mono = self.props.get("ActiveEnterTimestampMonotonic", "")
        token = f"t{mono}" if mono and mono != "0" else f"k{self.proc_start}"
        return ProcessIdentity(pid=self.pid, started=token)

    @property
    def running(self) -> bool:
        active = self.props.get("ActiveState", "")
        return (
            self.pid > 0
            and active in ("active", "activating", "reloading")
            and self.proc_state
            not in (
                None,
                "Z",
                "X",
            )
        )


class SystemdService(BaseService):
    """A systemd unit on a host (local or SSH), driven through ``systemctl``/``journalctl``.

    ``section`` names the unit and the commands (with an optional ``sudo`` prefix); ``base`` is the
    untouched launch spec (``target.command`` + ``target.env``), used to know which environment variables a
    trial must unset. ``gpu_wait`` (optional) makes a restart a stop, a wait until the GPUs' memory is
    released, then a start.
    """

    def __init__(
        self,
        *,
        host: BaseHost,
        section: SystemdSection,
        base: LaunchSpec,
        gpu_wait: GpuWaitSection | None = None,
        progress: Progress | None = None,
        command_timeout_s: float = 600.0,
    ) -> None:
        self._host = host
        self._s = section
        self._base = base
        self._gpu_wait = gpu_wait
        self._progress = progress
        self._timeout = command_timeout_s
        self.dropin_dir = posixpath.join(section.unit_dir, f"{section.unit}.d")
        self.dropin_path = posixpath.join(self.dropin_dir, section.dropin_name)
        self._unit_sum: str | None = None
        self._log_mode: str | None = None if section.log_mode == "auto" else section.log_mode

    # -- plumbing ----------------------------------------------------------------------------------------

    @property
    def unit(self) -> str:
        return self._s.unit

    def _systemctl(self, *args: str) -> list[str]:
        return [*self._s.sudo, *self._s.systemctl, *args]

    def _journalctl(self, *args: str) -> list[str]:
        return [*self._s.sudo, *self._s.journalctl, *args]

    def _run(self, argv: list[str], *, timeout: float | None = None) -> CommandResult:
        return self._host.run(argv, timeout=timeout or self._timeout)

    def _snapshot(self) -> _Snapshot:
        show = self._systemctl("show", *(f"--property={p}" for p in _SHOW_PROPS), self.unit)
        result = self._host.run(["sh", "-c", _SHOW, "sh", *show], timeout=self._timeout).check()
        props: dict[str, str] = {}
        stat: str | None = None
        for line in result.stdout.splitlines():
            key, eq, value = line.partition("=")
            if not eq:
                continue
            if key == "ProcStat":
                stat = value
            else:
                props[key] = value
        try:
            pid = int(props.get("MainPID") or 0)
        except ValueError:
            pid = 0
        parsed = _stat_start(stat) if stat else None
        return _Snapshot(
            props=props,
            pid=pid,
            proc_state=parsed[0] if parsed else None,
            proc_start=parsed[1] if parsed else None,
        )

    def unit_path(self) -> str:
        """Where the unit file lives (``FragmentPath`` when systemd reports it)."""
        if self._s.unit_file:
            return self._s.unit_file
        fragment = self._snapshot().props.get("FragmentPath", "")
        return fragment or posixpath.join(self._s.unit_dir, self.unit)

    def unit_checksum(self) -> str:
        """SHA-256 of the unit file's bytes, read through the sudo prefix (units can be root-only)."""
        result = self._run([*self._s.sudo, "cat", "--", self.unit_path()])
        if not result.ok:
            raise HostError(f"cannot read unit file {self.unit_path()} on {self._host.name}: {result.stderr.strip()}")
        return hashlib.sha256(result.stdout.encode("utf-8", "surrogateescape")).hexdigest()

    def _remember_checksum(self) -> None:
        if self._unit_sum is None:
            self._unit_sum = self.unit_checksum()

    def _verify_checksum(self) -> None:
        if self._unit_sum is None:
            return
        now = self.unit_checksum()
        if now != self._unit_sum:
            raise UnitFileChanged(
                f"unit file {self.unit_path()} changed while `tune` managed {self.unit} (sha256 "
                f"{self._unit_sum[:12]} before, {now[:12]} now): `tune` never edits it, so someone else did"
            )

    def _write(self, path: str, text: str) -> None:
        if self._s.sudo:
            argv = [*self._s.sudo, "sh", "-c", _PRIV_WRITE, "sh", path]
            self._host.run(argv, stdin=text.encode(), timeout=self._timeout).check()
        else:
            self._run(["mkdir", "-p", posixpath.dirname(path)]).check()
            self._host.write_file(path, text.encode())

    def _daemon_reload(self) -> None:
        result = self._run(self._systemctl("daemon-reload"))
        if not result.ok:
            raise HostError(f"`systemctl daemon-reload` failed on {self._host.name}: {result.stderr.strip()}")

    def log_mode(self) -> str:
        """``cursor`` or ``lines`` (see the module docstring); ``auto`` is resolved once per service."""
        if self._log_mode is None:
            probe = self._run(self._journalctl("--version"), timeout=60)
            self._log_mode = "cursor" if probe.ok and probe.stdout.lstrip().startswith("systemd") else "lines"
        return self._log_mode

    # -- BaseService ---------------------------------------------------------------------------------------

    def apply(self, spec: LaunchSpec) -> None:
        self._remember_checksum()
        unset = sorted(k for k in self._base.env if k not in spec.env)
        try:
            text = dropin_text(spec, unset=unset)
        except ValueError as exc:
            raise ConfigNotApplied(f"cannot express the launch spec as a systemd drop-in: {exc}") from None
        self._write(self.dropin_path, text)
        self._daemon_reload()

    def revert(self) -> None:
        result = self._run([*self._s.sudo, "rm", "-f", "--", self.dropin_path])
        if not result.ok:
            raise HostError(f"cannot remove {self.dropin_path} on {self._host.name}: {result.stderr.strip()}")
        # An empty UNIT.d directory we may have created is left: removing it could race a user's drop-in.
        self._daemon_reload()
        self._verify_checksum()

    def dropin_present(self) -> bool:
        return self._run([*self._s.sudo, "test", "-e", self.dropin_path]).ok

    def state(self) -> ServiceState:
        snap = self._snapshot()
        active = snap.props.get("ActiveState", "unknown")
        sub = snap.props.get("SubState", "")
        status_text = snap.props.get("ExecMainStatus", "")
        exit_status = int(status_text) if status_text.lstrip("-").isdigit() else None
        running = snap.running
        result = snap.props.get("Result", "")
        detail = f"{self.unit} {active}/{sub}".rstrip("/")
        if result not in ("", "success"):
            detail += f", result {result}"
        return ServiceState(
            running=running,
            identity=snap.identity,
            exit_status=None if running else exit_status,
            detail=detail,
        )

    def is_alive(self, identity: ProcessIdentity) -> bool:
        snap = self._snapshot()
        return snap.running and snap.identity == identity

    def restart(self, *, label: str = "run") -> Restarted:
        before = self._snapshot()
        old = before.identity if before.running else None
        mode = self.log_mode()
        cursor = ""
        if mode == "lines" or self._gpu_wait is not None:
            # Stop and start separately: the line count taken while nothing runs splits old output from new,
            # and the GPUs can be waited on while they are idle.
            self._stop_unit()
            if mode == "lines":
                cursor = str(len(self._journal_all()))
            if self._gpu_wait is not None:
                from tuner.target.services._gpu import wait_gpu_free

                wait_gpu_free(self._host, self._gpu_wait, progress=self._progress)
            verb = "start"
        else:
            verb = "restart"
        result = self._run(self._systemctl(verb, self.unit))
        after = self._snapshot()
        if mode == "cursor":
            invocation = after.props.get("InvocationID", "")
            cursor = f"_SYSTEMD_INVOCATION_ID={invocation}|" if invocation else ""
        new = after.identity
        if not result.ok or new is None or not after.running:
            evidence = self._evidence(cursor)
            if not result.ok:
                why = f"`systemctl {verb} {self.unit}` exited with status {result.exit_status}"
            else:
                why = (
                    f"{self.unit} has no running main process after `systemctl {verb}` "
                    f"(state {after.props.get('ActiveState', '?')}/{after.props.get('SubState', '?')}, "
                    f"exit status {after.props.get('ExecMainStatus') or '?'})"
                )
            raise StartFailed(why, evidence=evidence)
        if old is not None and (new.pid == old.pid or new.started == old.started):
            raise ConfigNotApplied(
                f"restart did not replace the process: {self.unit} still runs {new} (before: {old})",
                evidence=self._evidence(cursor),
            )
        return Restarted(old=old, new=new, log_cursor=cursor)

    def _evidence(self, cursor: str) -> str:
        parts = []
        status = self._run(self._systemctl("status", "--no-pager", "--lines=0", self.unit), timeout=60)
        if status.stdout.strip():
            parts.append(status.stdout.strip())
        try:
            text = self.read_log(cursor).text
        except HostError as exc:
            text = f"(journal unavailable: {exc})"
        parts.append("\n".join(text.splitlines()[-60:]))
        return "\n\n".join(p for p in parts if p)

    def _stop_unit(self) -> None:
        result = self._run(self._systemctl("stop", self.unit))
        if not result.ok:
            raise HostError(f"`systemctl stop {self.unit}` failed on {self._host.name}: {result.stderr.strip()}")

    def stop(self) -> None:
        self._stop_unit()

    # -- logs ----------------------------------------------------------------------------------------------

    def _journal_all(self) -> str:
        result = self._run(self._journalctl("-u", self.unit, "--no-pager"), timeout=120)
        if not result.ok and not result.stdout and "No such file" in result.stderr:
            return ""  # a unit that never logged (journalctl3 keeps one file per unit, created on first start)
        if not result.ok:
            raise HostError(f"`journalctl -u {self.unit}` failed on {self._host.name}: {result.stderr.strip()}")
        return result.stdout

    def read_log(self, cursor: str) -> LogChunk:
        if self.log_mode() == "lines":
            text = self._journal_all()
            offset = int(cursor or 0)
            if offset > len(text):  # the journal was rotated or vacuumed: start over rather than go silent
                offset = 0
            return LogChunk(text=text[offset:], cursor=str(len(text)))
        match, _, after = cursor.partition("|")
        args = ["--no-pager", "-q", "-o", "cat", "--show-cursor"]
        args += [match] if match else ["-u", self.unit]
        if not match and not after:
            args += ["-n", "300"]  # no invocation to select: the recent past, not the unit's whole history
        if after:
            args.append(f"--after-cursor={after}")
        result = self._run(self._journalctl(*args), timeout=120)
        if not result.ok:
            raise HostError(f"`journalctl` failed on {self._host.name}: {result.stderr.strip()}")
        lines = result.stdout.splitlines(keepends=True)
        if lines and lines[-1].startswith("-- cursor: "):
            after = lines.pop()[len("-- cursor: ") :].strip()
        return LogChunk(text="".join(lines), cursor=f"{match}|{after}")

    def log_location(self) -> str | None:
        where = "" if self._host.name == "local" else f" on {self._host.name}"
        return f"`journalctl -u {self.unit}`{where}"

    # -- what really runs ------------------------------------------------------------------------------------

    def running_spec(self) -> LaunchSpec | None:
        snap = self._snapshot()
        specs = read_specs(self._host, [snap.pid], sudo=self._s.sudo) if snap.running else []
        return specs[0] if specs else None

    def running_specs(self, *, port: int | None = None) -> tuple[LaunchSpec, ...]:
        snap = self._snapshot()
        if not snap.running:
            return ()
        return tuple(read_specs(self._host, serving_pids(self._host, snap.pid, port), sudo=self._s.sudo))

    def serves(self, identity: ProcessIdentity, port: int) -> bool | None:
        if not self.is_alive(identity):
            return False
        return serves_port(self._host, identity.pid, port)

    def preflight(self) -> Preflight:
        """The unit exists, its ExecStart/Environment are the study's base command, nothing overrides our drop-in."""
        fallback = program_part(self._base.argv)
        try:
            unit = self.unit_config()
        except HostError as exc:
            return Preflight(findings=(Finding(ok=False, text=f"unit {self.unit}: {exc}"),), program=fallback)
        found = [Finding(ok=True, text=f"unit {self.unit} exists")]
        if unit.exec_start is None:
            found.append(Finding(ok=False, text=f"unit {self.unit} has no ExecStart"))
            return Preflight(findings=tuple(found), program=fallback)
        if tuple(unit.exec_start) == tuple(self._base.argv):
            found.append(Finding(ok=True, text="ExecStart matches target.command"))
        else:
            diff = spec_matches(LaunchSpec(argv=self._base.argv), LaunchSpec(argv=tuple(unit.exec_start)))
            found.append(Finding(ok=False, text="ExecStart differs from target.command: " + "; ".join(diff)))
        for key, value in self._base.env.items():
            got = unit.environment.get(key)
            if got != value and is_secret_env(key):  # a secret's values are never shown, only that they differ
                found.append(Finding(ok=None, text=f"unit Environment {key} differs from target.env's"))
            elif got != value:
                found.append(Finding(ok=None, text=f"unit Environment {key}={got!r}, target.env says {value!r}"))
        later = [f for f in unit.exec_start_files if f.endswith(".conf") and f > self.dropin_path]
        if later:
            found.append(Finding(ok=False, text=f"drop-ins sorted after ours override ExecStart: {', '.join(later)}"))
        if self.dropin_present():
            found.append(
                Finding(ok=None, text=f"{self.dropin_path} from an earlier run is in place (`tune restore` removes it)")
            )
        return Preflight(findings=tuple(found), program=program_part(tuple(unit.exec_start)))

    def unit_config(self) -> UnitConfig:
        """The unit as configured without our drop-in (``systemctl cat``), for ``tune check``."""
        result = self._run(self._systemctl("cat", self.unit), timeout=60)
        if not result.ok:
            raise HostError(
                f"`systemctl cat {self.unit}` failed on {self._host.name}: "
                f"{(result.stderr or result.stdout).strip() or f'status {result.exit_status}'}"
            )
        return parse_unit_text(result.stdout, skip_files=(self.dropin_path,))
