"""Warm-ups that earn their keep: ``[benchmark] warmup = "always"`` or ``"auto"``.

``always`` runs ``warmup_requests`` unmeasured requests before every scenario, as benchmarks traditionally do.
They cost real time: for a concurrency-1 scenario of one request a warm-up is as long as a repeat, so with one
repeat a scenario it is half the benchmark. Whether a server needs it is a fact about the server, and a study
can measure it instead of assuming it:

``auto`` times the ``warmup_requests`` warm-up once (the study's first trial), then makes it a *probe* wherever
a pass costs at most :attr:`WarmupPolicy.max_probe_cost` warm-ups: one pass of the scenario itself (same shape
as a repeat), measured but not counted. (Where a pass costs more, e.g. one request before 32 long prompts, the
warm-up is a sliver of the scenario and stays as it is.) Each probe is a paired observation of how much slower
a first pass after a start is than the repeats after it (``1 - probe / geomean(repeats)``, on logs). Pooled
over the study's probes of that scenario, with the study's repeat noise (:func:`tuner.bench.pooled_noise`), the
slowdown gets a confidence interval. Once at least :attr:`WarmupPolicy.min_probes` probes bound it below the
sequential policy's ``precision`` (a first pass at most that much slower cannot move a score by more than the
precision asked for), the scenario runs without a warm-up and every pass counts; every ``recheck_every``-th
trial probes again, so a server that starts to need a warm-up is noticed. While the slowdown is not bounded
(too few probes, or a first pass that is really slower) the probe stays: it is then the warm-up, sized like the
scenario itself rather than ``warmup_requests``, which can be too small to warm a concurrent scenario's batch
shapes.

A probe is never counted as a repeat, whatever it measured: keeping only the fast ones would bias the score.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from tuner.bench._stats import Noise, _scipy_stats
from tuner.config import WARMUPS, BenchmarkSection

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
    """What the study has seen of one scenario's first pass after a start: its probes and its noise."""

    probes: tuple[tuple[float, tuple[float, ...]], ...] = ()
    """Per probe: its aggregate tok/s and the counted repeats (tok/s) of the same trial after it."""
    noise: Noise | None = None
    """The study's repeat-to-repeat noise for the scenario (None: not known yet)."""
    recheck: bool = False
    """This trial is a scheduled re-check: probe even if the study has settled that no warm-up is needed."""
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
    probes: int


def first_pass_slowdown(passes: FirstPasses, confidence: float) -> Slowdown | None:
    """The pooled slowdown of ``passes.probes`` with a two-sided ``confidence`` interval (None: no probe).

    Each probe gives ``d = log(geomean(repeats)) - log(probe)`` with variance ``s2 * (1 + 1/m)`` for ``m``
    repeats; the estimate is their inverse-variance weighted mean. ``s2`` is the study's pooled repeat variance
    when it is known, else the probes' own scatter (which needs two probes).
    """
    ds: list[float] = []
    ws: list[float] = []
    for probe, repeats in passes.probes:
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
        return Slowdown(point=_fraction(mean), upper=math.inf, lower=-math.inf, probes=1)
    h = float(_scipy_stats().t.ppf(0.5 + confidence / 2.0, df)) * math.sqrt(var / w.sum())
    return Slowdown(point=_fraction(mean), upper=_fraction(mean + h), lower=_fraction(mean - h), probes=int(d.size))


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
    ``precision``); ``confidence`` the two-sided level of the slowdown's interval (its upper end must be
    below ``tolerance``, so 0.8 is a one-sided 90% bound).
    """

    mode: str = "always"
    warmup_requests: int = 2
    tolerance: float = 0.02
    confidence: float = 0.8
    min_probes: int = 3
    recheck_every: int = 10
    max_probe_cost: float = 4.0
    """A scenario is probed only while a pass costs at most this many warm-ups: learning takes a few probes
    (each a pass instead of a warm-up) and re-checks, and skipping a warm-up that is a sliver of a pass (one
    request before 32 long prompts) can never pay them back."""

    def __post_init__(self) -> None:
        if self.mode not in WARMUPS:
            raise ValueError(f"mode must be one of {WARMUPS}, got {self.mode!r}")
        if self.tolerance <= 0:
            raise ValueError(f"tolerance must be > 0, got {self.tolerance}")
        if self.min_probes < 1 or self.recheck_every < 1:
            raise ValueError("min_probes and recheck_every must be >= 1")

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
        requests = WarmupPlan(kind="requests", reason=f"{self.warmup_requests} warm-up request(s)")
        if passes.warmup_s is None:
            return dataclasses.replace(requests, reason=requests.reason + " (timing the warm-up once)")
        if passes.pass_s is not None and passes.pass_s > self.max_probe_cost * passes.warmup_s:
            ratio = passes.pass_s / max(passes.warmup_s, 1e-9)
            return dataclasses.replace(
                requests, reason=requests.reason + f": a probe would cost {ratio:.0f}x the warm-up it could save"
            )
        slow = first_pass_slowdown(passes, self.confidence)
        if slow is None or slow.probes < self.min_probes:
            n = slow.probes if slow is not None else 0
            reason = f"probe {n + 1} of at least {self.min_probes}: is a first pass slower?"
            return WarmupPlan(kind="probe", reason=reason)
        seen = f"first passes {slow.point:+.1%} slower (up to {slow.upper:+.1%}, {slow.probes} probes)"
        if slow.upper > self.tolerance:
            return WarmupPlan(kind="probe", reason=f"warm-up kept (a probe): {seen}, more than {self.tolerance:.1%}")
        if passes.recheck:
            return WarmupPlan(kind="probe", reason=f"re-check: {seen}")
        return WarmupPlan(kind="none", reason=f"no warm-up: {seen}")

    def is_recheck(self, trial_number: int) -> bool:
        """Whether trial ``trial_number`` is one of the periodic re-checks (never the first trials)."""
        return trial_number > 0 and trial_number % self.recheck_every == 0
