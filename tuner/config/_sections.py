from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from tuner.config._fleet import FleetHost, parse_hosts
from tuner.config._reader import Table
from tuner.config._slo import Slo, parse_slo
from tuner.dialects import KNOWN_VERSIONS, SERVER_CHOICES, BaseServerDialect, default_dialect, sglang_version
from tuner.errors import ConfigError

ON_EXIT = ("baseline", "best", "leave", "stop")
#: ``[benchmark] warmup`` choices (:mod:`tuner.bench._warmup`).
WARMUPS = ("always", "auto")

DEFAULT_FATAL_PATTERNS = (
    r"Traceback \(most recent call last\)",
    r"unrecognized arguments",
    r"[Oo]ut of memory",
    r"OutOfMemoryError",
    r"AssertionError",
    r"Address already in use",
)

DEFAULT_PHASE_MARKERS = default_dialect().phase_markers


@dataclass(frozen=True, kw_only=True)
class StudySection:
    name: str
    storage: str
    """An Optuna storage URL: ``sqlite:///path.db`` (default, WAL mode) or ``postgresql://...``."""
    trials: int = 30
    seed: int | None = None
    on_exit: str = "baseline"
    artifacts_dir: Path = Path("runs/artifacts")
    heartbeat_s: float = 20.0
    """How often a running trial marks itself alive in the study (other workers watch it)."""
    stale_after_s: float = 90.0
    """A running trial whose heartbeat is older than this belongs to a dead worker: FAIL, retried elsewhere."""
    storage_busy_s: float = 600.0
    """How long a write waits for a database locked by another process (a backup, the dashboard) before the
    run stops as an environment fault."""
    notify: tuple[str, ...] = ()
    """A command run when a run of the study ends, however it ends, with a JSON summary on its stdin."""
    notify_timeout_s: float = 30.0


@dataclass(frozen=True, kw_only=True)
class SSHSection:
    host: str
    port: int = 22
    user: str | None = None
    key_file: str | None = None
    known_hosts: str | None = None
    """known_hosts file to verify the host key against (default ``~/.ssh/known_hosts``)."""
    accept_new_host_key: bool = False
    connect_timeout_s: float = 10.0
    command_timeout_s: float = 120.0
    keepalive_s: float = 15.0
    retries: int = 3
    """Reconnect attempts when connecting fails (never re-runs a command that was already sent)."""
    retry_backoff_s: float = 1.0
    """First pause between reconnect attempts; doubles on each further attempt."""
    hosts: tuple[FleetHost, ...] = ()
    """A fleet of identical servers: ``tune start`` runs one worker per host (``host`` is then the first)."""


@dataclass(frozen=True, kw_only=True)
class SystemdSection:
    unit: str
    unit_dir: str = "/etc/systemd/system"
    dropin_name: str = "50-tune.conf"
    systemctl: tuple[str, ...] = ("systemctl",)
    journalctl: tuple[str, ...] = ("journalctl",)
    sudo: tuple[str, ...] = ()
    log_mode: str = "auto"
    """How the journal is followed: ``cursor`` (real journald: invocation id + cursors), ``lines`` (offset
    into ``journalctl -u UNIT`` output, for implementations without cursors) or ``auto`` (probe once)."""
    unit_file: str | None = None
    """The unit file to checksum (default: systemd's FragmentPath, else ``unit_dir/unit``)."""


@dataclass(frozen=True, kw_only=True)
class GpuWaitSection:
    command: tuple[str, ...] = ("nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits")
    below_mib: float = 2048.0
    timeout_s: float = 180.0
    poll_interval_s: float = 2.0


@dataclass(frozen=True, kw_only=True)
class TargetSection:
    transport: str = "local"
    manager: str = "process"
    server: str = "auto"
    """The server dialect (``sglang``, ``vllm``, ``llama.cpp``, ``generic``) or ``auto``: from the command."""
    server_version: str = "auto"
    """SGLang's version (``0.5.23``, ``ddtree-pr29907``, ...) or ``auto``: found on the host by check / start."""
    command: tuple[str, ...]
    base_url: str
    env: dict[str, str] = field(default_factory=dict)
    log_dir: str = "runs/logs"
    """Where per-trial server logs go on the target host (process manager)."""
    workdir: str | None = None
    stop_grace_s: float = 30.0
    model: str | None = None
    """Model name sent in requests; by default the first id from ``/v1/models``."""
    api_key: str | None = None
    api_key_env: str | None = None
    """The environment variable that holds the benchmark's bearer token (instead of ``api_key`` in the file)."""
    secret_flags: tuple[str, ...] = ()
    """Flags whose values are secrets besides those whose name says so (:mod:`tuner.secrets`)."""
    secret_env: tuple[str, ...] = ()
    """Environment variables whose values are secrets besides those whose name says so."""
    lock: bool = True
    state_dir: str | None = None
    """Server records (what runs, its process group); default ``runs/<study>/state`` beside the study file."""
    check_flags: bool = True
    """`tune check` runs ``PROGRAM --help`` to verify the tuned flags (off for a server whose --help serves)."""
    check_timeout_s: float = 60.0
    ssh: SSHSection | None = None
    systemd: SystemdSection | None = None
    gpu_wait: GpuWaitSection | None = None


@dataclass(frozen=True, kw_only=True)
class Scenario:
    name: str
    concurrency: int
    prompt_tokens: int
    output_tokens: int
    requests: int
    weight: float = 1.0
    prompts: str = "random"
    """``random``, ``humaneval`` or the resolved path of a JSONL file of chats (see ``tuner/config/_workloads.py``)."""
    # --- open loop (requests arrive on a schedule, whatever the server does); see tuner.bench._arrivals ---
    rate: float | None = None
    """Requests/s of an open-loop scenario (None: closed loop, ``concurrency`` streams, or a ``trace``)."""
    arrival: str = "poisson"
    """How ``rate``'s arrivals are spaced: :data:`ARRIVALS`."""
    burstiness: float = 1.0
    """The gamma arrivals' shape: 1 is Poisson, below 1 burstier, above 1 more regular."""
    max_concurrency: int | None = None
    """An open-loop cap on requests in flight: a request due while the cap is reached waits for a slot."""
    trace: str | None = None
    """The resolved path of a JSONL arrival trace (:mod:`tuner.config._traces`)."""
    trace_speed: float = 1.0
    """Divides the trace's offsets: 2.0 replays it twice as fast."""
    slo: Slo | None = None
    """The latency each request is promised (``[slo]``, or the scenario's own ``[benchmark.scenarios.slo]``)."""

    @property
    def load(self) -> str:
        """How the requests come, as a table shows it: ``8`` streams, ``6 req/s poisson (max 16)``, ``trace x2``."""
        cap = f" (max {self.max_concurrency})" if self.max_concurrency else ""
        if self.trace is not None:
            return f"trace x{self.trace_speed:g}{cap}"
        if self.rate is not None:
            return f"{self.rate:g} req/s {self.arrival}{cap}"
        return str(self.concurrency)

    @property
    def open_loop(self) -> bool:
        """Requests arrive on a schedule (``rate`` or ``trace``), not when a stream frees up."""
        return self.rate is not None or self.trace is not None

    @property
    def cost(self) -> float:
        """A proxy for how long the scenario takes: per concurrent stream, its rounds of requests times the
        tokens each request costs, prompt tokens at 1/8 of a generated one (prefill is batched; decode is not).
        An open-loop scenario lasts about its schedule: at a nominal 50 tokens/s per stream that is worth
        ``50 x seconds`` tokens of one stream, plus the last request's own.
        """
        per_request = self.output_tokens + self.prompt_tokens / 8
        if self.open_loop:
            span = self.requests / self.rate if self.rate else _trace_span(self)
            return 50.0 * span + per_request
        rounds = -(-self.requests // self.concurrency)
        return rounds * per_request

    def comparable(self) -> dict[str, Any]:
        """What makes two trials of this scenario comparable (the study fingerprint's part): a closed-loop
        scenario leaves the open-loop keys out, so studies written before they existed keep their fingerprint."""
        out = asdict(self)
        if not self.open_loop:
            for key in _OPEN_LOOP_KEYS:
                out.pop(key)
        if self.slo is None:
            out.pop("slo")
        return out


#: Arrival processes of ``rate`` scenarios: Poisson (exponential gaps), evenly spaced, or gamma gaps of shape
#: ``burstiness`` (AIPerf's and vLLM's ``--burstiness``).
ARRIVALS = ("poisson", "constant", "gamma")
_OPEN_LOOP_KEYS = ("rate", "arrival", "burstiness", "max_concurrency", "trace", "trace_speed")


def _trace_span(scenario: Scenario) -> float:
    from tuner.config._traces import load_trace

    assert scenario.trace is not None
    return load_trace(scenario.trace)[: scenario.requests][-1].offset_s / scenario.trace_speed


@dataclass(frozen=True, kw_only=True)
class BenchmarkSection:
    scenarios: tuple[Scenario, ...]
    warmup: str = "always"
    """``always``: ``warmup_requests`` unmeasured requests before every scenario; ``auto``: none while the study's
    first passes show the server does not need one, a measured warm-up pass (a probe) once they show it does
    (:mod:`tuner.bench._warmup`)."""
    warmup_requests: int = 2
    min_repeats: int = 1
    max_repeats: int = 6
    """Sequential repeats (:class:`tuner.stats.SequentialPolicy`): at least ``min_repeats``, at most
    ``max_repeats``, stopping when the score is ``precision``-precise or confidently worse/better than the
    reference trial."""
    precision: float = 0.02
    """Relative half-width of the objective's interval that is precise enough (0.02 = +-2%)."""
    precision_share: float = 1.0
    """How much wider a scenario's interval may be than the objective's (set with the objective, see
    :func:`precision_share`): ``1 / sqrt(sum of squared normalised weights)`` for a geomean objective."""
    confidence: float = 0.8
    """Two-sided level of the score's interval; the score is its lower end (:func:`tuner.stats.estimate`)."""
    repeats: int | None = None
    """Fixed repeats (old study files): sets ``min_repeats = max_repeats = repeats``, no early stop."""
    mad_k: float = 1.0
    """Deprecated and unused: the score was ``median - k * 1.4826 * MAD``; it is now a t lower bound."""
    request_timeout_s: float = 120.0
    flush_cache: bool = True
    api: str = "chat"
    seed: int = 0
    client_processes: int | str = "auto"
    """Processes that run the load: ``"auto"`` (enough for the expected event rate, capped by cores) or N."""
    http_client: str = "aiohttp"
    """The load generator's HTTP library: ``aiohttp`` (default) or ``httpx`` (about twice the CPU per token)."""

    def __post_init__(self) -> None:
        if self.repeats is not None:
            # frozen: the alias is resolved once, here, so every reader sees plain min/max
            object.__setattr__(self, "min_repeats", self.repeats)
            object.__setattr__(self, "max_repeats", self.repeats)

    @property
    def scenario_precision(self) -> float:
        """What each scenario is measured to, so that the objective's interval is ``precision`` wide."""
        return self.precision * self.precision_share

    def objective_weights(self) -> dict[str, float]:
        """The geomean objective's weights, normalised to sum to 1 (all equal when none is > 0)."""
        weights = {s.name: s.weight for s in self.scenarios if s.weight > 0}
        if not weights:
            weights = {s.name: 1.0 for s in self.scenarios}
        total = sum(weights.values())
        return {name: w / total for name, w in weights.items()}

    def in_run_order(self) -> tuple[Scenario, ...]:
        """Cheapest first, so a regression pruner can stop a slow config before the expensive scenarios."""
        return tuple(sorted(self.scenarios, key=lambda s: s.cost))


@dataclass(frozen=True, kw_only=True)
class ReadinessSection:
    timeout_s: float = 900.0
    poll_interval_s: float = 1.0
    request_timeout_s: float = 10.0
    health_path: str | None = default_dialect().health_path
    generation_check: bool = True
    stall_s: float = 120.0
    """A server that accepts connections but answers nothing for this long is hung."""
    verify_settle_s: float = 3.0
    """Right after the start, how long the new process may take to show the trial's flags and environment
    (a launch wrapper before its ``exec``) before the trial fails as not applied, without awaiting readiness;
    0 turns this early check off (the check after readiness always runs)."""
    fatal_patterns: tuple[str, ...] = DEFAULT_FATAL_PATTERNS
    phase_markers: tuple[tuple[str, str], ...] = DEFAULT_PHASE_MARKERS
    progress: bool = True


def default_storage(base_dir: Path, name: str) -> str:
    """Where a study file that names no ``storage`` keeps study ``name``: its own SQLite file under ``runs/``."""
    return f"sqlite:///{(base_dir / 'runs' / name / 'study.db').as_posix()}"


def parse_study(t: Table, *, base_dir: Path, default_name: str) -> StudySection:
    name = t.str("name", default_name)
    storage = t.str("storage", default_storage(base_dir, name))
    if not storage.startswith(("sqlite:///", "postgresql", "mysql")):
        raise t.error("storage", "an Optuna RDB URL (sqlite:///FILE or postgresql://...)", storage)
    section = StudySection(
        name=name,
        storage=storage,
        trials=t.int("trials", 30, min=1),
        seed=t.int("seed", None),
        on_exit=t.choice("on_exit", ON_EXIT, "baseline"),
        artifacts_dir=_path(base_dir, t.str("artifacts_dir", f"runs/{name}/artifacts")),
        heartbeat_s=t.float("heartbeat_s", 20.0, min=0.01),
        stale_after_s=t.float("stale_after_s", 90.0, min=0.01),
        storage_busy_s=t.float("storage_busy_s", 600.0, min=1),
        notify=_notify(t),
        notify_timeout_s=t.float("notify_timeout_s", 30.0, min=0.1),
    )
    if section.stale_after_s <= 2 * section.heartbeat_s:
        raise t.error("stale_after_s", f"more than twice heartbeat_s ({section.heartbeat_s})", section.stale_after_s)
    t.finish()
    return section


def _notify(t: Table) -> tuple[str, ...]:
    command = _argv(t, "notify", ())
    if t.has("notify") and not command:
        raise t.error("notify", "a command (a list of strings, or one command-line string)", t.raw("notify"))
    return command


def parse_target(t: Table, *, base_dir: Path) -> TargetSection:
    raw_command = t.raw("command")
    if isinstance(raw_command, str):
        try:
            command = tuple(shlex.split(raw_command))
        except ValueError as exc:
            raise t.error("command", f"a shell-quoted command line ({exc})", raw_command) from None
    elif isinstance(raw_command, list) and all(isinstance(a, str) for a in raw_command):
        command = tuple(raw_command)
    else:
        raise t.error("command", "an argv list of strings or one command-line string", raw_command)
    if not command:
        raise t.error("command", "a non-empty command", raw_command)
    base_url = t.str("base_url")
    if not base_url.startswith(("http://", "https://")):
        raise t.error("base_url", "an http:// or https:// URL", base_url)
    transport = t.choice("transport", ("local", "ssh"), "local")
    server = t.choice("server", SERVER_CHOICES, "auto")
    server_version = _server_version(t)
    manager = t.choice("manager", ("process", "systemd"), "process")
    ssh_t = t.table("ssh", required=transport == "ssh")
    systemd_t = t.table("systemd", required=manager == "systemd")
    gpu_t = t.table("gpu_wait")
    log_dir = t.str("log_dir", "runs/logs")
    section = TargetSection(
        transport=transport,
        manager=manager,
        server=server,
        server_version=server_version,
        command=command,
        base_url=base_url.rstrip("/"),
        env=t.str_map("env", {}),
        log_dir=str(_path(base_dir, log_dir)) if transport == "local" else log_dir,
        workdir=t.str("workdir", None),
        stop_grace_s=t.float("stop_grace_s", 30.0, min=0),
        model=t.str("model", None),
        api_key=t.str("api_key", None),
        api_key_env=_api_key_env(t),
        secret_flags=tuple(t.str_list("secret_flags", [])),
        secret_env=tuple(t.str_list("secret_env", [])),
        lock=t.bool("lock", True),
        state_dir=_state_dir(t, base_dir, transport),
        check_flags=t.bool("check_flags", True),
        check_timeout_s=t.float("check_timeout_s", 60.0, min=1),
        ssh=_parse_ssh(ssh_t) if ssh_t else None,
        systemd=_parse_systemd(systemd_t) if systemd_t else None,
        gpu_wait=_parse_gpu_wait(gpu_t) if gpu_t else None,
    )
    t.finish()
    return section


def _server_version(t: Table) -> str:
    value = t.str("server_version", "auto")
    if value == "auto":
        return value
    try:
        return sglang_version(value).name
    except ValueError:
        known = ", ".join(v.name for v in KNOWN_VERSIONS[:2])
        raise t.error("server_version", f'"auto" or an SGLang version ({known}, or a release like 0.5.20)',
                      value) from None


def _api_key_env(t: Table) -> str | None:
    name = t.str("api_key_env", None)
    if name is not None and t.has("api_key"):
        raise t.error("api_key_env", "either api_key or api_key_env, not both", name)
    if name is not None and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise t.error("api_key_env", "the name of an environment variable", name)
    return name


def _state_dir(t: Table, base_dir: Path, transport: str) -> str | None:
    value = t.str("state_dir", None)
    if value is None or transport != "local":
        return value
    return str(_path(base_dir, value))


def _parse_ssh(t: Table) -> SSHSection:
    hosts = parse_hosts(t)
    s = SSHSection(
        host=t.str("host", hosts[0].host) if hosts else t.str("host"),
        hosts=hosts,
        port=t.int("port", 22, min=1, max=65535),
        user=t.str("user", None),
        key_file=t.str("key_file", None),
        known_hosts=t.str("known_hosts", None),
        accept_new_host_key=t.bool("accept_new_host_key", False),
        connect_timeout_s=t.float("connect_timeout_s", 10.0, min=0.1),
        command_timeout_s=t.float("command_timeout_s", 120.0, min=0.1),
        keepalive_s=t.float("keepalive_s", 15.0, min=0),
        retries=t.int("retries", 3, min=0),
        retry_backoff_s=t.float("retry_backoff_s", 1.0, min=0),
    )
    t.finish()
    return s


def _argv(t: Table, name: str, default: tuple[str, ...]) -> tuple[str, ...]:
    value = t.raw(name, None)
    if value is None:
        return default
    if isinstance(value, str):
        return tuple(shlex.split(value))
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise t.error(name, "a command as a string or a list of strings", value)


def _parse_systemd(t: Table) -> SystemdSection:
    unit = t.str("unit")
    if not unit.endswith(".service") or "/" in unit:
        raise t.error("unit", "a unit name ending in .service", unit)
    s = SystemdSection(
        unit=unit,
        unit_dir=t.str("unit_dir", "/etc/systemd/system"),
        dropin_name=t.str("dropin_name", "50-tune.conf"),
        systemctl=_argv(t, "systemctl", ("systemctl",)),
        journalctl=_argv(t, "journalctl", ("journalctl",)),
        sudo=_argv(t, "sudo", ()),
        log_mode=t.choice("log_mode", ("auto", "cursor", "lines"), "auto"),
        unit_file=t.str("unit_file", None),
    )
    t.finish()
    return s


def _parse_gpu_wait(t: Table) -> GpuWaitSection:
    d = GpuWaitSection()
    s = GpuWaitSection(
        command=_argv(t, "command", d.command),
        below_mib=t.float("below_mib", d.below_mib, min=0),
        timeout_s=t.float("timeout_s", d.timeout_s, min=0),
        poll_interval_s=t.float("poll_interval_s", d.poll_interval_s, min=0.01),
    )
    t.finish()
    return s


def _parse_prompts(t: Table, base_dir: Path) -> str:
    from tuner.config._workloads import BUILTIN, load_chats

    prompts = t.str("prompts", "random")
    if prompts in BUILTIN:
        resolved = prompts
    elif prompts.endswith((".jsonl", ".json")):
        resolved = str(_path(base_dir, prompts).resolve())
    else:
        raise t.error("prompts", '"random", "humaneval" or the path of a .jsonl file of chats', prompts)
    if resolved != "random":
        _read(t, "prompts", prompts, lambda: load_chats(resolved))  # a bad file fails now, not a trial later
    return resolved


def _read(t: Table, key: str, value: str, read: Callable[[], Any]) -> Any:
    """``read()`` a file a key names; its problem as this study file's error on that key (the file's own line
    and what was wrong in it in the words)."""
    try:
        return read()
    except ConfigError as exc:
        where = Path(exc.file).name if exc.file else value
        line = "" if exc.key == "(file)" else f" {exc.key}"
        got = "" if exc.got is None else f", got {exc.got!r}"
        scenario = t.data.get("name")
        whose = f" for scenario {scenario}" if isinstance(scenario, str) else ""
        raise t.error(key, f"a usable file{whose} ({where}{line}: {exc.expected}{got})", value) from None


def _parse_scenario(st: Table, base_dir: Path) -> Scenario:
    """One ``[[benchmark.scenarios]]`` table: closed loop (``concurrency``) or open loop (``rate``, ``trace``)."""
    given = [k for k in ("concurrency", "rate", "trace") if st.has(k)]
    if len(given) > 1:
        raise st.error(
            given[1], 'exactly one of "concurrency" (closed loop), "rate" (requests/s) or "trace" (a JSONL file)'
        )
    if not given or given[0] == "concurrency":  # none: the closed loop's reader names the missing key or its typo
        for key in ("max_concurrency", *_OPEN_LOOP_KEYS):
            if st.has(key):
                raise st.error(key, 'no open-loop key beside "concurrency" (use "rate" or "trace" instead)', None)
        sc = Scenario(
            name=st.str("name"),
            concurrency=st.int("concurrency", min=1),
            prompt_tokens=st.int("prompt_tokens", min=1),
            output_tokens=st.int("output_tokens", min=2),
            requests=st.int("requests", min=1),
            weight=st.float("weight", 1.0, min=0),
            prompts=_parse_prompts(st, base_dir),
        )
        if sc.requests < sc.concurrency:
            raise st.error("requests", f"at least concurrency ({sc.concurrency}) requests", sc.requests)
        return sc
    return _parse_open_scenario(st, base_dir)


def _positive(t: Table, name: str, default: Any) -> Any:
    value = t.float(name, default)
    if value is not None and value <= 0:
        raise t.error(name, "a number > 0", value)
    return value


def _parse_open_scenario(st: Table, base_dir: Path) -> Scenario:
    max_concurrency = st.int("max_concurrency", None, min=1)
    common = dict(name=st.str("name"), weight=st.float("weight", 1.0, min=0), max_concurrency=max_concurrency)
    if st.has("rate"):
        arrival = st.choice("arrival", ARRIVALS, "poisson")
        if st.has("burstiness") and arrival != "gamma":
            raise st.error("burstiness", 'arrival = "gamma" (burstiness is the gamma shape)', st.raw("burstiness"))
        requests = st.int("requests", min=1)
        return Scenario(
            **common,
            rate=_positive(st, "rate", None),
            arrival=arrival,
            burstiness=_positive(st, "burstiness", 1.0),
            concurrency=max_concurrency or requests,
            prompt_tokens=st.int("prompt_tokens", min=1),
            output_tokens=st.int("output_tokens", min=2),
            requests=requests,
            prompts=_parse_prompts(st, base_dir),
        )
    return _parse_trace_scenario(st, base_dir, common)


def _parse_trace_scenario(st: Table, base_dir: Path, common: dict[str, Any]) -> Scenario:
    from tuner.config._traces import load_trace

    for key in ("arrival", "burstiness", "prompts"):
        if st.has(key):
            raise st.error(key, "no such key with a trace (its lines give arrivals and prompts)", st.raw(key))
    name = st.str("trace")
    if not name.endswith(".jsonl"):
        raise st.error("trace", "the path of a .jsonl trace file", name)
    path = str(_path(base_dir, name).resolve())
    lines = _read(st, "trace", name, lambda: load_trace(path))  # a bad file fails now, not a trial later
    requests = st.int("requests", len(lines), min=1, max=len(lines))
    lines = lines[:requests]
    needs_output = any(line.output_length is None for line in lines)
    output = st.int("output_tokens", None if not needs_output else _MISSING_OUTPUT, min=2)
    if output is _MISSING_OUTPUT:
        raise st.error("output_tokens", "a default answer length (some trace lines have no output_length)", None)
    lengths = [line.input_length for line in lines if line.input_length is not None]
    outputs = [line.output_length or output for line in lines]
    max_concurrency = common["max_concurrency"]
    return Scenario(
        **common,
        trace=path,
        trace_speed=_positive(st, "trace_speed", 1.0),
        concurrency=max_concurrency or requests,
        prompt_tokens=st.int("prompt_tokens", round(sum(lengths) / len(lengths)) if lengths else 1, min=1),
        output_tokens=round(sum(outputs) / len(outputs)) if output is None else output,
        requests=requests,
    )


_MISSING_OUTPUT: Any = object()


def parse_benchmark(t: Table, *, base_dir: Path = Path("."), slo: Slo | None = None) -> BenchmarkSection:
    scenarios = []
    names: set[str] = set()
    for st in t.tables("scenarios", required=True):
        sc = replace(_parse_scenario(st, base_dir), slo=parse_slo(st.table("slo"), base=slo))
        if sc.name in names:
            raise st.error("name", "a scenario name not used before", sc.name)
        names.add(sc.name)
        st.finish()
        scenarios.append(sc)
    if not scenarios:
        raise t.error("scenarios", "at least one [[benchmark.scenarios]] table", [])
    section = BenchmarkSection(
        scenarios=tuple(scenarios),
        **_parse_warmup(t),
        **_parse_repeats(t),
        mad_k=t.float("mad_k", 1.0, min=0),
        request_timeout_s=t.float("request_timeout_s", 120.0, min=0.1),
        flush_cache=t.bool("flush_cache", True),
        api=t.choice("api", ("chat", "completions"), "chat"),
        seed=t.int("seed", 0),
        client_processes=_client_processes(t),
        http_client=t.choice("http_client", ("aiohttp", "httpx"), "aiohttp"),
    )
    t.finish()
    return section


def _client_processes(t: Table) -> int | str:
    value = t.raw("client_processes", "auto")
    if value == "auto" or (isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 256):
        return value
    raise t.error("client_processes", '"auto" or a whole number of load-generator processes from 1 to 256', value)


def _parse_warmup(t: Table) -> dict[str, Any]:
    """``warmup`` ("always" or "auto") and the ``warmup_requests`` both use (auto times it once, then probes)."""
    mode = t.choice("warmup", WARMUPS, "always")
    requests = t.int("warmup_requests", 2, min=0)
    if mode == "auto" and requests == 0:
        expected = 'at least 1 with warmup = "auto" (it times that warm-up to know what a probe would cost)'
        raise t.error("warmup_requests", expected, requests)
    return {"warmup": mode, "warmup_requests": requests}


def _parse_repeats(t: Table) -> dict[str, Any]:
    """``min_repeats``/``max_repeats``/``precision``/``confidence``, or the old fixed ``repeats`` alone."""
    d = BenchmarkSection(scenarios=())
    if t.has("repeats"):
        for key in ("min_repeats", "max_repeats", "precision"):
            if t.has(key):
                expected = "either `repeats` (fixed) or min_repeats/max_repeats/precision, not both"
                raise t.error(key, expected, t.raw(key))
        fixed = t.int("repeats", min=1)
        return {"repeats": fixed, "confidence": _confidence(t, d.confidence)}
    low = t.int("min_repeats", d.min_repeats, min=1)
    high = t.int("max_repeats", max(d.max_repeats, low), min=1)
    if high < low:
        raise t.error("max_repeats", f"an integer >= min_repeats ({low})", high)
    precision = t.float("precision", d.precision, min=0)
    if not 0 < precision < 1:
        raise t.error("precision", "a relative half-width in (0, 1), e.g. 0.02 for +-2%", precision)
    return {"min_repeats": low, "max_repeats": high, "precision": precision, "confidence": _confidence(t, d.confidence)}


def _confidence(t: Table, default: float) -> float:
    c = t.float("confidence", default, min=0)
    if not 0 < c < 1:
        raise t.error("confidence", "a probability in (0, 1), e.g. 0.8", c)
    return c


def parse_readiness(t: Table | None, dialect: BaseServerDialect) -> ReadinessSection:
    """The readiness section; what the study file leaves out comes from the server's dialect."""
    d = ReadinessSection(
        health_path=dialect.health_path,
        fatal_patterns=DEFAULT_FATAL_PATTERNS + dialect.fatal_patterns,
        phase_markers=dialect.phase_markers,
    )
    if t is None:
        return d
    markers_raw = t.raw("phase_markers", None)
    markers = d.phase_markers
    if markers_raw is not None:
        if not isinstance(markers_raw, dict) or not all(isinstance(v, str) for v in markers_raw.values()):
            raise t.error("phase_markers", "a table of phase name = regex", markers_raw)
        markers = tuple(markers_raw.items())
    extra = t.str_list("extra_fatal_patterns", ())
    health = t.str("health_path", d.health_path)
    section = ReadinessSection(
        timeout_s=t.float("timeout_s", d.timeout_s, min=0.1),
        poll_interval_s=t.float("poll_interval_s", d.poll_interval_s, min=0.01),
        request_timeout_s=t.float("request_timeout_s", d.request_timeout_s, min=0.1),
        health_path=health or None,
        generation_check=t.bool("generation_check", True),
        stall_s=t.float("stall_s", d.stall_s, min=0.1),
        verify_settle_s=t.float("verify_settle_s", d.verify_settle_s, min=0),
        fatal_patterns=t.str_list("fatal_patterns", d.fatal_patterns) + extra,
        phase_markers=markers,
        progress=t.bool("progress", True),
    )
    if section.health_path is None and not section.generation_check:
        raise t.error(
            "generation_check",
            f"true: without a health path ({dialect.name} has none, or health_path is empty) a real "
            "generation is the only readiness signal",
            False,
        )
    _check_regexes(t, "fatal_patterns", section.fatal_patterns)
    _check_regexes(t, "phase_markers", tuple(p for _, p in section.phase_markers))
    t.finish()
    return section


def _check_regexes(t: Table, name: str, patterns: tuple[str, ...]) -> None:
    import re

    for p in patterns:
        try:
            re.compile(p)
        except re.error as exc:
            raise t.error(name, f"valid regular expressions ({exc})", p) from None


def _path(base_dir: Path, value: str) -> Path:
    p = Path(value).expanduser()
    return p if p.is_absolute() else base_dir / p
