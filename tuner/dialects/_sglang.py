from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from tuner.dialects._base import BaseServerDialect
from tuner.dialects._sglang_init import DDTREE_ENV, DFLASH_CONSTRAINTS, algorithm, dflash_knobs, fit_knobs
from tuner.dialects._sglang_versions import KNOWN_VERSIONS, SGLangVersion


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

    def tunable_for(
        self, argv: Sequence[str], env: Mapping[str, str], *, trained_block_size: int | None = None
    ) -> tuple[dict[str, Any], ...]:
        """The knobs for this command on this version: flags the version lacks are left out, a deprecated
        spelling in the command is read as the knob's value, the block size reaches the drafter's trained one."""
        return fit_knobs(self.tunable, argv, self.version, trained_block_size=trained_block_size)

    def __repr__(self) -> str:
        version = f"version={self.version.name!r}" if self.version else ""
        return f"SGLangDialect({version})"


def replace_version(dialect: BaseServerDialect, version: SGLangVersion | None, reason: str) -> BaseServerDialect:
    """``dialect`` with ``version`` when it is SGLang's; other dialects are returned as they are."""
    if isinstance(dialect, SGLangDialect):
        return dialect.with_version(version, reason)
    return dialect

