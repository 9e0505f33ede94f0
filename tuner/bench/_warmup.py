"""Warm-ups that earn their keep: ``[benchmark] warmup = "always"`` or ``"auto"``.

``always`` runs ``warmup_requests`` unmeasured requests before every scenario, as benchmarks traditionally do.
They cost real time: for a concurrency-1 scenario of one request a warm-up is as long as a repeat, so with one
repeat a scenario it is half the benchmark. Whether a server needs it is a fact about the server, and a study
can measure it instead of assuming it, for free:

``auto`` runs a scenario with no warm-up (its first pass counts) until the study shows that a first pass after a
start is slower than the passes after it. The evidence costs nothing extra: every run of a scenario without a
warm-up that counted two or more repeats (the study's first trial always does; so does every config whose
objective asked for more) is a paired observation, its first repeat against the later ones (``1 - first /
geomean(later)``, on logs). Pooled over the study's pairs with its repeat noise (:func:`tuner.stats.pooled_noise`),
the slowdown gets a confidence interval. Once the interval is above zero and its point above the sequential
policy's ``precision`` (a first pass slower by more than the precision asked for moves a score by more than
that), the scenario gets a warm-up: a *probe*, one pass of the scenario itself, measured but not counted (sized
like the scenario, where ``warmup_requests`` can be too small to warm a concurrent scenario's batch shapes), and
each probe is one more pair. Where a pass costs more than :attr:`WarmupPolicy.max_probe_cost` warm-ups (one
request before 32 long prompts), the warm-up is ``warmup_requests`` requests instead (timed the first time),
and every ``recheck_every``-th trial probes, so the study sees when the server stops needing it. While pairs show
no such slowdown, and once probes stop showing it, the scenario runs without a warm-up.

A probe is never counted as a repeat, whatever it measured: keeping only the fast ones would bias the score.
A run without a warm-up keeps its first pass whatever it measured, for the same reason. On a server whose first
passes are slower, the runs before the study has seen it (the baseline's, which also show it) carry that
slowdown once in their mean: a few trials, all measured alike.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from tuner.config import WARMUPS, BenchmarkSection
from tuner.stats import Noise, student_t

__all__ = [
    "WARMUP_KINDS",
    "FirstPasses",
    "Slowdown",
    "WarmupLookup",
    "WarmupPlan",
    "WarmupPolicy",
    "first_pass_slowdown",
]

#: What ran before a scenario's counted repeats (the ``<scenario>.warmup`` user attr).
WARMUP_KINDS = ("requests", "probe", "none")


@dataclass(frozen=True, kw_only=True)
class FirstPasses:
    """What the study has seen of one scenario's first passes after a start, and its noise."""

    pairs: tuple[tuple[float, tuple[float, ...]], ...] = ()
    """Per first pass after a start: its aggregate tok/s and the counted repeats (tok/s) of the same run after it
    (a probe and the run's repeats, or the first counted repeat of a run without a warm-up and the later ones)."""
    noise: Noise | None = None
    """The study's repeat-to-repeat noise for the scenario, of the passes after a first one (None: not known yet)."""
    recheck: bool = False
    """This trial is a scheduled re-check: probe where the warm-up is requests (which show nothing)."""
    warmup_s: float | None = None
    """Typical seconds of the scenario's ``warmup_requests`` warm-up (None: never timed yet)."""
    pass_s: float | None = None
    """Typical seconds of one pass of the scenario (what a probe costs)."""


WarmupLookup = Callable[[str], FirstPasses | None]
"""Scenario name -> the study's evidence about its first passes (None: no study, e.g. ``tune bench``)."""


@dataclass(frozen=True, kw_only=True)
class Slowdown:
    """How much slower a first pass is than the repeats after it (fractions; positive = slower)."""

    point: float
    upper: float
    lower: float
    pairs: int

    def describe(self) -> str:
        """E.g. ``first passes +2.0% slower (-1.0% .. +4.8%, 3 pairs)``."""
        pairs = f"{self.pairs} pair{'s' if self.pairs != 1 else ''}"
        if math.isfinite(self.lower) and math.isfinite(self.upper):
            bounds = f"{self.lower:+.1%} .. {self.upper:+.1%}, {pairs}"
        else:
            bounds = f"{pairs}, no noise estimate to bound it yet"
        speed = f"{self.point:+.1%} slower" if self.point >= 0 else f"{-self.point:.1%} faster"
        return f"first passes {speed} ({bounds})"


def first_pass_slowdown(passes: FirstPasses, confidence: float) -> Slowdown | None:
    """The pooled slowdown of ``passes.pairs`` with a two-sided ``confidence`` interval (None: no pair).

    Each pair gives ``d = log(geomean(repeats)) - log(probe)`` with variance ``s2 * (1 + 1/m)`` for ``m``
    repeats; the estimate is their inverse-variance weighted mean. ``s2`` is the study's pooled repeat variance
    when it is known, else the pairs' own scatter (which needs two pairs).
    """
    ds: list[float] = []
    ws: list[float] = []
    for probe, repeats in passes.pairs:
        reps = np.asarray([x for x in repeats if x > 0 and math.isfinite(x)], dtype=float)
        if probe <= 0 or not math.isfinite(probe) or reps.size == 0:
            continue
        ds.append(float(np.log(reps).mean()) - math.log(probe))
        ws.append(1.0 / (1.0 + 1.0 / reps.size))
    if not ds:
        return None
    d, w = np.asarray(ds), np.asarray(ws)
    mean = float((w * d).sum() / w.sum())
    if passes.noise is not None:
        var, df = passes.noise.var, passes.noise.df
    elif d.size >= 2:
        var, df = float((w * (d - mean) ** 2).sum() / (d.size - 1)), int(d.size) - 1
    else:
        return Slowdown(point=_fraction(mean), upper=math.inf, lower=-math.inf, pairs=1)
    h = student_t(0.5 + confidence / 2.0, df) * math.sqrt(var / w.sum())
    return Slowdown(point=_fraction(mean), upper=_fraction(mean + h), lower=_fraction(mean - h), pairs=int(d.size))


def _fraction(log_ratio: float) -> float:
    """A log slowdown as a fraction of the later passes' throughput (0.1 = the first pass is 10% slower)."""
    return 1.0 - math.exp(-log_ratio)


@dataclass(frozen=True, kw_only=True)
class WarmupPlan:
    """What runs before a scenario's counted repeats, and why."""

    kind: str
    """``requests``: ``warmup_requests`` unmeasured requests; ``probe``: one measured, uncounted pass of the
    scenario; ``none``: nothing, the first pass counts."""
    reason: str


@dataclass(frozen=True, kw_only=True)
class WarmupPolicy:
    """Whether a scenario gets a warm-up (see the module docstring).

    ``tolerance`` is the largest first-pass slowdown that may go unwarmed (the sequential policy's
    ``precision``); ``confidence`` the two-sided level of the slowdown's interval (a warm-up is needed once its
    lower end is above zero, so 0.8 is a one-sided 90% test, and its point above ``tolerance``).
    """

    mode: str = "always"
    warmup_requests: int = 2
    tolerance: float = 0.02
    confidence: float = 0.8
    recheck_every: int = 10
    max_probe_cost: float = 4.0
    """A needed warm-up is a probe only while a pass costs at most this many ``warmup_requests`` warm-ups: a pass
    instead of a sliver of one (one request before 32 long prompts) costs more than the evidence is worth."""

    def __post_init__(self) -> None:
        if self.mode not in WARMUPS:
            raise ValueError(f"mode must be one of {WARMUPS}, got {self.mode!r}")
        if self.tolerance <= 0:
            raise ValueError(f"tolerance must be > 0, got {self.tolerance}")
        if self.recheck_every < 1:
            raise ValueError(f"recheck_every must be >= 1, got {self.recheck_every}")

    @classmethod
    def from_section(cls, section: BenchmarkSection) -> WarmupPolicy:
        """The policy a ``[benchmark]`` section asks for (the tolerance is a scenario's precision)."""
        return cls(
            mode=section.warmup,
            warmup_requests=section.warmup_requests,
            tolerance=section.scenario_precision,
            confidence=section.confidence,
        )

    def plan(self, passes: FirstPasses | None) -> WarmupPlan:
        if self.mode == "always":
            if self.warmup_requests == 0:
                return WarmupPlan(kind="none", reason="no warm-up (warmup_requests = 0)")
            return WarmupPlan(kind="requests", reason=f"{self.warmup_requests} warm-up request(s)")
        if passes is None:  # no study (`tune bench`): a probe is the warm-up, and says what it saw
            return WarmupPlan(kind="probe", reason="probe: no study to say whether a warm-up is needed")
        slow = first_pass_slowdown(passes, self.confidence)
        if slow is None:
            return WarmupPlan(kind="none", reason="no warm-up: no first pass seen yet")
        seen = slow.describe()
        if not self.needs_warmup(slow):
            return WarmupPlan(kind="none", reason=f"no warm-up: {seen}")
        kept = f"{seen}, more than {self.tolerance:.1%}"
        requests = WarmupPlan(kind="requests", reason=f"{self.warmup_requests} warm-up request(s): {kept}")
        if passes.warmup_s is None:
            return dataclasses.replace(requests, reason=requests.reason + " (timing the warm-up once)")
        if passes.pass_s is not None and passes.pass_s > self.max_probe_cost * passes.warmup_s:
            if passes.recheck:
                return WarmupPlan(kind="probe", reason=f"re-check (a probe): {kept}")
            ratio = passes.pass_s / max(passes.warmup_s, 1e-9)
            return dataclasses.replace(requests, reason=requests.reason + f"; a probe would cost {ratio:.0f}x it")
        return WarmupPlan(kind="probe", reason=f"warm-up (a probe): {kept}")

    def needs_warmup(self, slow: Slowdown) -> bool:
        """Whether a first pass is confidently slower, and by more than the tolerance."""
        return slow.lower > 0.0 and slow.point > self.tolerance

    def is_recheck(self, trial_number: int) -> bool:
        """Whether trial ``trial_number`` is one of the periodic re-checks (never the first trials)."""
        return trial_number > 0 and trial_number % self.recheck_every == 0
