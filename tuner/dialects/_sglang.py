from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from tuner.dialects._base import BaseServerDialect, Run, Verdict, VersionedFlags
from tuner.dialects._capacity import KvCapacity, answer_int
from tuner.dialects._counters import ServerSnapshot, counter, number, prometheus_series
from tuner.dialects._sglang_check import check_command, metrics_verdict
from tuner.dialects._sglang_init import (
    DDTREE_ENV,
    DFLASH_CONSTRAINTS,
    algorithm,
    dflash_knobs,
    drafter_block_size,
    fit_knobs,
)
from tuner.dialects._sglang_preflight import detect_version, help_verdicts, judged_flags, table_verdicts
from tuner.dialects._sglang_versions import DDTREE_BRANCH, KNOWN_VERSIONS, MAINLINE, SGLangVersion, sglang_version
from tuner.space import SearchSpace


def _find(argv: Sequence[str], *needles: str) -> str | None:
    for arg in argv:
        for n in needles:
            if n in arg:
                return n
    return None


def _merged_markers() -> tuple[tuple[str, str], ...]:
    """Each start-up phase as any known version logs it (readiness does not know the version in advance)."""
    merged: dict[str, list[str]] = {}
    for version in KNOWN_VERSIONS:
        for label, pattern in version.markers:
            merged.setdefault(label, [])
            merged[label] += [p for p in pattern.split("|") if p not in merged[label]]
    return tuple((label, "|".join(patterns)) for label, patterns in merged.items())


class SGLangDialect(BaseServerDialect):
    """``python -m sglang.launch_server`` (and the bundled simulator, which mimics it flag for flag).

    Which SGLang (mainline 0.5.23, the DDTree branch, 0.5.10 or older) is :attr:`version`: set by ``[target]
    server_version``, or found on the host by ``tune check`` / ``tune start`` (see ``_sglang_versions``).
    """

    name = "sglang"
    context_flags: ClassVar[tuple[str, ...]] = ("--context-length",)
    # The scheduler admits a waiting request when fewer than this many run: a client cap queues it the same way.
    batch_cap_flags: ClassVar[tuple[str, ...]] = ("--max-running-requests",)
    draft_lengths: ClassVar[tuple[str, ...]] = ("budget", "block_size")
    health_path = "/health"
    phase_markers: ClassVar[tuple[tuple[str, str], ...]] = _merged_markers()
    # SGLang's parser errors and its unknown-algorithm ValueError, in the words of its own code.
    fatal_patterns: ClassVar[tuple[str, ...]] = (
        r"error: (ambiguous option|argument --)",
        r"Unknown speculative algorithm name",
    )
    flush_path = "/flush_cache"
    acceptance = "server_info"
    metrics_path = "/metrics"
    info_paths = ("/server_info", "/get_server_info")  # renamed in 0.4.x; older servers answer the second
    stream_usage = True
    bool_style = "switch"
    flag_separator = "-"
    default_port = 30000
    tunable_constraints = DFLASH_CONSTRAINTS
    map_axes = ("--speculative-ddtree-budget", "SGLANG_DDTREE_MAX_TOPK")  # DDTree's two tree-shape knobs
    tunable = (
        {
            "name": "budget",
            "type": "int",
            "low": 4,
            "high": 32,
            "flag": "--speculative-ddtree-budget",
            "requires": ("--speculative-algorithm", "DDTREE"),
        },
        {
            "name": "topk",
            "type": "int",
            "low": 1,
            "high": 10,
            "env": "SGLANG_DDTREE_MAX_TOPK",
            "default": 6,
            "requires": ("--speculative-algorithm", "DDTREE"),
        },
        *dflash_knobs(),
    )

    def read_counters(self, metrics: str, info: Mapping[str, Any] | None) -> ServerSnapshot:
        """With ``--enable-metrics``: ``sglang:generation_tokens_total`` and ``sglang:spec_verify_calls_total``, both
        incremented when a request finishes, so their deltas over a scenario are SGLang's own per-request
        ``completion_tokens / spec_verify_ct`` over exactly its requests; ``sglang:spec_accept_length`` is a gauge
        of the last log interval, one series per rank. ``/server_info`` ``internal_states[0].avg_spec_accept_length``
        is accepted / verify steps since boot, folded in only every ``--decode-log-interval`` (40) decode batches."""
        series = prometheus_series(metrics)
        state: Mapping[str, Any] = {}
        states = (info or {}).get("internal_states")
        if isinstance(states, list) and states and isinstance(states[0], dict):
            state = states[0]
        elif isinstance(states, dict):
            state = states
        generated = counter(series, "sglang:generation_tokens_total")
        return ServerSnapshot(
            accepted=generated,
            steps=counter(series, "sglang:spec_verify_calls_total"),
            avg_accept=number(state, "avg_spec_accept_length"),
            generated=generated,
            gauge_accept=tuple(v for _, v in series.get("sglang:spec_accept_length", ()) if math.isfinite(v)),
        )

    def inert(self, argv: Sequence[str], env: Mapping[str, str]) -> frozenset[str]:
        """DDTree's budget and top-k knobs under any other algorithm than DDTREE (the DDTree branch, PR #29907,
        reads them only in its DDTREE worker)."""
        if algorithm(argv) == "DDTREE":
            return frozenset()
        return frozenset(("--speculative-ddtree-budget", *DDTREE_ENV))

    def __init__(self, *, reason: str = "", version: SGLangVersion | None = None, version_reason: str = "") -> None:
        super().__init__(reason=reason)
        self.version = version
        self.version_reason = version_reason
        """How the version was found (``[target] server_version``, what the host reported, ...)."""

    def with_version(self, version: SGLangVersion | None, reason: str) -> SGLangDialect:
        """The same dialect for a known version (a new object: a config's dialect is never changed in place)."""
        return SGLangDialect(reason=self.reason, version=version, version_reason=reason)

    @classmethod
    def matches(cls, argv: Sequence[str]) -> str | None:
        found = _find(argv, "sglang.launch_server", "tuner.sim")
        if found:
            return found
        for i, arg in enumerate(argv[:-1]):
            if arg.rsplit("/", 1)[-1] in ("sglang", "tune") and argv[i + 1] in ("serve", "sim"):
                return f"{arg.rsplit('/', 1)[-1]} {argv[i + 1]}"
        return None

    def own_flag_prefix(self, argv: Sequence[str]) -> str | None:
        """The simulator's own options (``--sim-...``) are not SGLang's: flag tables skip them."""
        return "--sim-" if _find(argv, "tuner.sim") or self.matches(argv) == "tune sim" else None

    def version_line(self) -> str:
        if self.version is None:
            return "SGLang version: not set ([target] server_version); found on the host by tune check / tune start"
        how = f" ({self.version_reason})" if self.version_reason else ""
        return f"SGLang version: {self.version.describe()}{how}"

    def describe(self) -> list[str]:
        lines = super().describe()
        return [lines[0], f"  {self.version_line()}", *lines[1:]]

    def tunable_for(self, argv: Sequence[str], env: Mapping[str, str]) -> tuple[dict[str, Any], ...]:
        """The knobs for this command on this version: flags the version lacks are left out, a deprecated
        spelling in the command is read as the knob's value, the block size reaches the drafter's trained one
        (read from the drafter's config.json when its path is local)."""
        return fit_knobs(self.tunable, argv, self.version, trained_block_size=drafter_block_size(argv))

    def versions(self) -> SGLangVersions:
        return SGLangVersions(dialect=self)

    capacity_paths: ClassVar[tuple[str, ...]] = ("/get_server_info", "/server_info")

    def server_capacity(
        self, answers: Mapping[str, Any], argv: Sequence[str], env: Mapping[str, str]
    ) -> KvCapacity | None:
        """``/get_server_info`` (``/server_info`` on newer versions): ``context_length`` for one request, within
        ``max_total_num_tokens``, the KV pool (SGLang queues and retracts what the pool cannot hold at once,
        rather than failing it, so only one request must fit)."""
        info = next((a for a in answers.values() if isinstance(a, dict)), None)
        context, pool = answer_int(info, "context_length"), answer_int(info, "max_total_num_tokens")
        request = min(v for v in (context, pool) if v) if context or pool else None
        if request is None:
            return None
        said = [f"context_length {context}"] * bool(context) + [f"max_total_num_tokens {pool}"] * bool(pool)
        return KvCapacity(request=request, source="/get_server_info: " + ", ".join(said))

    def __repr__(self) -> str:
        version = f"version={self.version.name!r}" if self.version else ""
        return f"SGLangDialect({version})"


class SGLangVersions(VersionedFlags):
    """SGLang's releases differ in their flags (renames, DDTree on its branch only): each known version has a
    flag table (``sglang_flags/``), and the study is judged against the one the host runs."""

    def __init__(self, *, dialect: SGLangDialect) -> None:
        self._dialect = dialect

    @property
    def version(self) -> SGLangVersion | None:
        return self._dialect.version

    def pinned(self, name: str, reason: str) -> SGLangDialect:
        try:
            version = sglang_version(name)
        except ValueError:
            raise ValueError("an SGLang version such as 0.5.23 or ddtree-pr29907") from None
        return self._dialect.with_version(version, reason)

    def detect(
        self, run: Run, program: Sequence[str], *, listed: frozenset[str] | None = None, quick: bool = False
    ) -> tuple[SGLangVersion | None, str]:
        return detect_version(run, program, listed=listed, quick=quick)

    def version_line(self, version: SGLangVersion, how: str) -> str:
        return self._dialect.with_version(version, how).version_line()

    def exact(self, version: SGLangVersion) -> bool:
        return version.exact

    def not_found(self, how: str) -> str:
        return f"SGLang version not found ({how}); set [target] server_version to check flags against its table"

    def table_verdicts(
        self,
        version: SGLangVersion,
        command: Sequence[str],
        space: SearchSpace,
        env: Mapping[str, str],
        *,
        spellings: bool,
    ) -> list[Verdict]:
        prefix = self._dialect.own_flag_prefix(command)
        return table_verdicts(version, command, space, env, prefix=prefix, spellings=spellings)

    def judged_flags(self, version: SGLangVersion | None, command: Sequence[str], space: SearchSpace) -> set[str]:
        return judged_flags(version, command, space)

    def help_verdicts(
        self,
        listed: frozenset[str],
        command: Sequence[str],
        space: SearchSpace,
        *,
        judged: set[str],
        version: SGLangVersion | None,
    ) -> list[Verdict]:
        prefix = self._dialect.own_flag_prefix(command)
        return help_verdicts(listed, command, space, judged=judged, version=version, prefix=prefix)

    def refusal(self, version: SGLangVersion) -> str:
        return f"a command and space {version.label} accepts (nothing was changed)"

    def init_check(
        self, command: Sequence[str], env: Mapping[str, str], server_version: str
    ) -> tuple[SGLangDialect, list[Verdict], str]:
        """Without a named version, a command that runs DDTREE is checked against the DDTree branch and any other
        against mainline (the newest known); the study file keeps ``server_version = "auto"``."""
        if server_version != "auto":
            dialect = self.pinned(server_version, "tune init --server-version")
        else:
            assumed = DDTREE_BRANCH if algorithm(command) == "DDTREE" else MAINLINE
            dialect = self._dialect.with_version(assumed, "assumed by tune init; --server-version names another")
        version = dialect.version
        assert version is not None  # just set
        metrics = metrics_verdict(command, None)
        # The same table and exemption as `tune check`: the simulator's own `--sim-...` options are not SGLang's.
        prefix = self._dialect.own_flag_prefix(command)
        verdicts = [*check_command(version, command, env=env, ignore_prefix=prefix), *([metrics] if metrics else [])]
        return dialect, verdicts, f"a launch command {version.label} starts"

