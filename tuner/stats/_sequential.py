"""Sequential repeats: measure a scenario until the answer is clear, not a fixed number of times.

After each measured repeat the benchmark asks :meth:`SequentialPolicy.decide` whether to run another one.
It stops as soon as one of these holds:

* ``worse``: the repeats so far are confidently slower than the reference trial's repeats of the same scenario
  by more than the regression pruner's margin (its test, :func:`tuner.stats.is_slower`, at its confidence). The
  pruner then stops the trial.
* ``better`` / ``behind``: at least ``min_repeats`` repeats, confidently faster / slower than the reference (no
  margin). Polishing a config's third decimal pays only while it could be the best: a winner is re-measured
  by the end-of-study confirmation anyway, and a config that is surely behind stays in the study (its score
  still informs the sampler) without more repeats.
* ``precise``: at least ``min_repeats`` repeats and the score's interval is narrower than ``precision``
  (relative half-width, see :func:`tuner.stats.estimate`).
* ``max_repeats``: the cap.

The noise these tests need is the study's (:class:`tuner.stats.Noise`, pooled over every other config's
repeats of the scenario and carried by the :class:`Reference`, the reference's own repeats joining it in every
test), so one repeat can settle a config once the reference or a few configs were measured twice. Before that
(the baseline, or a study without a reference) a scenario is repeated until its own repeats estimate the noise:
one repeat alone never stops as ``precise``.

**On the objective** (:func:`decide_objective`): what a single-objective study ranks is the weighted geomean of the
scenarios, not any one of them. When every scenario has a reference with the study's noise, the benchmark
measures each scenario ``min_repeats`` times (stopping early only for ``worse``: verdict ``objective``), and the
rest is decided on the whole objective: stop when it is confidently behind or ahead of the reference's
objective, or precise to the objective's ``precision``; otherwise repeat the scenario whose next repeat narrows
the objective's interval most per second. A config that is clearly not the best then costs one repeat of each
scenario, however close it is on one of them, and the repeats of a contender go where they buy the most
precision (a cheap, heavily weighted scenario before an expensive one).

``min_repeats == max_repeats`` is the fixed-repeats mode (the ``repeats`` key of old study files): exactly that
many repeats, no early stop of any kind, as before sequential repeats existed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from tuner.config import BenchmarkSection
from tuner.stats._estimate import Noise, estimate, is_slower, student_t

__all__ = [
    "VERDICTS",
    "ObjectiveDecision",
    "Reference",
    "ReferenceLookup",
    "RepeatDecision",
    "SequentialPolicy",
    "decide_objective",
    "objective_slower",
]

#: Why a scenario stopped: ``more`` is the only verdict that asks for another repeat; ``objective`` hands the
#: decision to :func:`decide_objective`.
VERDICTS = ("more", "precise", "worse", "behind", "better", "max_repeats", "objective")


@dataclass(frozen=True, kw_only=True)
class Reference:
    """The reference trial's repeats of one scenario, and the test that compares a candidate with them."""

    samples: tuple[float, ...]
    margin: float = 0.05
    """``worse`` means slower than the reference by more than this fraction."""
    confidence: float = 0.9
    """One-sided confidence the ``worse`` / ``better`` tests need."""
    trial: int | None = None
    noise: Noise | None = None
    """The study's repeat-to-repeat noise, pooled over configs other than the candidate and the reference
    (:data:`tuner.stats.EMPTY_POOL` when none of them repeated the scenario: the reference's own repeats, which
    every test adds to the pool, are then the study's whole noise estimate)."""

    @property
    def comparable(self) -> bool:
        """Enough reference repeats for a test: one when the pool knows the noise, else two."""
        return len(self.samples) >= (1 if self.noise is not None and self.noise.df > 0 else 2)

    @property
    def study_noise(self) -> Noise | None:
        """The study's noise for a candidate's own interval (its score): the pool with the reference's repeats in
        it, which every config but the candidate's are (None: no degrees of freedom yet). Without them a config
        measured once right after the baseline would have no interval, and its point would outrank the lower
        bounds of configs measured more."""
        if self.noise is None:
            return None
        logs = np.log([x for x in self.samples if math.isfinite(x) and x > 0])
        pool = self.noise.with_samples(np.asarray(logs, dtype=float))
        return pool if pool.df > 0 else None


ReferenceLookup = Callable[[str], Reference | None]
"""Scenario name -> the reference's repeats of it (None: no reference for that scenario)."""


@dataclass(frozen=True, kw_only=True)
class RepeatDecision:
    verdict: str
    reason: str

    @property
    def stop(self) -> bool:
        return self.verdict != "more"


@dataclass(frozen=True, kw_only=True)
class SequentialPolicy:
    """When to stop repeating a scenario (see the module docstring).

    ``precision`` is the largest relative half-width of the score's interval (0.02 = +-2%) at ``confidence``
    (two-sided; the score is the interval's lower end).
    """

    min_repeats: int = 1
    max_repeats: int = 6
    precision: float = 0.02
    confidence: float = 0.8
    objective_precision: float | None = None
    """The objective's own ``precision`` (None: every scenario is decided on its own, as in a multi-objective
    study). ``precision`` is then each scenario's share, used while the study's noise is still unknown."""

    def __post_init__(self) -> None:
        if self.min_repeats < 1:
            raise ValueError(f"min_repeats must be >= 1, got {self.min_repeats}")
        if self.max_repeats < self.min_repeats:
            raise ValueError(f"max_repeats ({self.max_repeats}) must be >= min_repeats ({self.min_repeats})")
        if self.precision <= 0:
            raise ValueError(f"precision must be > 0 (a relative half-width, 0.02 = +-2%), got {self.precision}")
        if not 0.0 < self.confidence < 1.0:
            raise ValueError(f"confidence must be within (0, 1), got {self.confidence}")

    @classmethod
    def from_section(cls, section: BenchmarkSection) -> SequentialPolicy:
        """The policy a ``[benchmark]`` section asks for: each scenario to its share of the objective's
        precision (``scenario_precision``, set with the objective)."""
        return cls(
            min_repeats=section.min_repeats,
            max_repeats=section.max_repeats,
            precision=section.scenario_precision,
            confidence=section.confidence,
            objective_precision=section.precision,
        )

    @property
    def fixed(self) -> bool:
        return self.min_repeats == self.max_repeats

    def on_objective(self, reference: Reference | None) -> bool:
        """Whether a scenario with this reference leaves its repeats to :func:`decide_objective`."""
        return (
            self.objective_precision is not None
            and not self.fixed
            and reference is not None
            and reference.noise is not None
            and reference.comparable
        )

    def decide(
        self, samples: Sequence[float], reference: Reference | None = None, *, objective: bool = False
    ) -> RepeatDecision:
        """Stop (and why) or ``more``, given the repeats so far and the reference's repeats of the scenario.

        ``objective``: the trial's objective decides the repeats beyond ``min_repeats``
        (:meth:`on_objective` held for every scenario); only ``worse`` is tested here.
        """
        n = len(samples)
        if n >= self.max_repeats:
            return RepeatDecision(verdict="max_repeats", reason=f"{n} repeats (the maximum)")
        if self.fixed or n == 0:
            return RepeatDecision(verdict="more", reason=f"{n} of {self.max_repeats} repeats")
        noise = reference.noise if reference is not None else None
        if reference is not None and reference.comparable:
            ref = reference.samples
            if is_slower(samples, ref, margin=reference.margin, confidence=reference.confidence, noise=noise):
                return RepeatDecision(
                    verdict="worse",
                    reason=f"confidently more than {reference.margin:.0%} slower than the reference "
                    f"after {n} repeat(s)",
                )
            if objective:
                if n >= self.min_repeats:
                    return RepeatDecision(verdict="objective", reason=f"{n} repeat(s); the objective decides more")
                return RepeatDecision(verdict="more", reason=f"{n} of at least {self.min_repeats} repeats")
            if n >= self.min_repeats and is_slower(
                ref, samples, margin=0.0, confidence=reference.confidence, noise=noise
            ):
                return RepeatDecision(verdict="better", reason=f"confidently faster than the reference after {n}")
            if n >= self.min_repeats and is_slower(
                samples, ref, margin=0.0, confidence=reference.confidence, noise=noise
            ):
                return RepeatDecision(verdict="behind", reason=f"confidently slower than the reference after {n}")
        if n < self.min_repeats:
            return RepeatDecision(verdict="more", reason=f"{n} of at least {self.min_repeats} repeats")
        h = estimate(samples, self.confidence, reference.study_noise if reference else None).relative_half_width
        if h is None:
            return RepeatDecision(verdict="more", reason="one repeat and no noise estimate yet")
        if h <= self.precision:
            return RepeatDecision(verdict="precise", reason=f"+-{h:.1%} after {n} repeats")
        return RepeatDecision(verdict="more", reason=f"+-{h:.1%} after {n} repeats, want +-{self.precision:.1%}")


@dataclass(frozen=True, kw_only=True)
class ObjectiveDecision:
    """What :func:`decide_objective` says: stop (``verdict`` is not ``more``) or repeat ``repeat`` once more."""

    verdict: str
    reason: str
    repeat: str | None = None
    """The scenario to repeat next (only with ``more``)."""

    @property
    def stop(self) -> bool:
        return self.verdict != "more"


def decide_objective(
    samples: Mapping[str, Sequence[float]],
    *,
    references: Mapping[str, Reference],
    weights: Mapping[str, float],
    costs: Mapping[str, float],
    policy: SequentialPolicy,
) -> ObjectiveDecision:
    """Stop or repeat one scenario, judged on the weighted geomean of ``samples`` (see the module docstring).

    ``samples``: each scenario's repeats (tok/s); ``references``: the reference trial's repeats and the study's
    pooled noise per scenario; ``weights``: the objective's weights (normalised here over ``samples``);
    ``costs``: seconds one more repeat of each scenario takes.

    On logs the objective is ``L = sum(w_i * mean(log x_i))``, so with the pooled variance ``v_i`` of one
    repeat (own and reference repeats included) the candidate's ``L`` has variance ``sum(w_i**2 * v_i / n_i)``,
    and the difference to the reference's ``L`` adds ``sum(w_i**2 * v_i / k_i)``. ``behind`` / ``better``: the
    difference is below / above 0 at the reference's one-sided confidence (a t test, Welch-Satterthwaite
    degrees of freedom over the scenarios' pools); ``precise``: the candidate's interval at the policy's
    confidence is within ``objective_precision``. Otherwise: repeat the scenario with the largest drop of
    variance per second of a repeat.
    """
    if policy.objective_precision is None:
        raise ValueError("decide_objective needs a policy with objective_precision")
    names = [name for name in samples if samples[name]]
    if not names:
        return ObjectiveDecision(verdict="precise", reason="nothing measured")
    d = _difference(samples, references, weights)
    n_total = sum(len(samples[name]) for name in names)
    verdict = _confident_verdict(d, references[names[0]], n_total)
    if verdict is not None:
        return verdict
    half = student_t(0.5 + policy.confidence / 2.0, _welch_df(d.own, d.df)) * math.sqrt(sum(d.own.values()))
    if half <= policy.objective_precision:
        return ObjectiveDecision(verdict="precise", reason=f"+-{half:.1%} after {n_total} repeats")
    open_ = [name for name in names if len(samples[name]) < policy.max_repeats]
    if not open_:
        return ObjectiveDecision(verdict="max_repeats", reason=f"every scenario at {policy.max_repeats} repeats")

    def gain(name: str) -> float:
        # The degrees of freedom a repeat adds are left out: the pools have many once a study runs.
        n = len(samples[name])
        return d.var[name] * (1.0 / n - 1.0 / (n + 1)) / max(costs.get(name, 1.0), 1e-6)

    return ObjectiveDecision(
        verdict="more",
        reason=f"+-{half:.1%} after {n_total} repeats, want +-{policy.objective_precision:.1%}",
        repeat=max(open_, key=gain),
    )


def _confident_verdict(d: _Difference, first: Reference, n_total: int) -> ObjectiveDecision | None:
    """``behind`` / ``better`` when the difference to the reference's objective is confidently below / above 0
    at the reference's one-sided confidence (every scenario's reference carries the pruner's); else None."""
    se = math.sqrt(sum(d.both.values()))
    if se <= 0:
        return None
    z = d.diff / se
    t_one = student_t(first.confidence, _welch_df(d.both, d.df))
    if abs(z) <= t_one:
        return None
    against = f"#{first.trial}" if first.trial is not None else "the reference"
    return ObjectiveDecision(
        verdict="behind" if z < 0 else "better",
        reason=f"{d.diff:+.1%} against {against}, confidently, after {n_total} repeats",
    )


def objective_slower(
    samples: Mapping[str, Sequence[float]],
    *,
    references: Mapping[str, Reference],
    weights: Mapping[str, float],
    margin: float,
) -> bool:
    """Is the weighted geomean of ``samples`` confidently slower than the references' by more than ``margin``?

    The regression pruner's test on the objective so far (the scenarios measured up to now, their weights
    normalised over them): the same difference of log objectives and variance as :func:`decide_objective`, a
    one-sided t test at the references' confidence that the difference is below ``log(1 - margin)``. Needs
    every scenario's reference with the study's noise; answers ``False`` without them. A negative ``margin``
    asks whether ``samples`` are confidently *not* more than ``-margin`` faster (the confirmation's race).
    """
    names = [name for name in samples if samples[name]]
    if not names or any(references[name].noise is None or not references[name].comparable for name in names):
        return False
    d = _difference(samples, references, weights)
    se = math.sqrt(sum(d.both.values()))
    if se <= 0:
        return d.diff < math.log1p(-margin)
    t_one = student_t(references[names[0]].confidence, _welch_df(d.both, d.df))
    return (d.diff - math.log1p(-margin)) / se < -t_one


@dataclass(frozen=True)
class _Difference:
    diff: float
    """The candidate's log objective minus the reference's."""
    var: dict[str, float]
    """Per scenario: w**2 * the pooled variance of one repeat's log throughput."""
    df: dict[str, int]
    own: dict[str, float]
    """Per scenario: its share of the variance of the candidate's log objective."""
    both: dict[str, float]
    """... of the difference's."""


def _difference(
    samples: Mapping[str, Sequence[float]], references: Mapping[str, Reference], weights: Mapping[str, float]
) -> _Difference:
    """The log objective of ``samples`` against the references' (weights normalised over the measured scenarios)."""
    names = [name for name in samples if samples[name]]
    total = sum(weights.get(name, 0.0) for name in names)
    w = {name: weights.get(name, 0.0) / total if total > 0 else 1.0 / len(names) for name in names}
    var: dict[str, float] = {}
    df: dict[str, int] = {}
    own: dict[str, float] = {}
    both: dict[str, float] = {}
    diff = 0.0
    for name in names:
        ref = references[name]
        if ref.noise is None:
            raise ValueError(f"the objective's difference needs the study's noise for scenario {name}")
        logs = np.log(np.maximum(np.asarray(samples[name], dtype=float), 1e-9))
        ref_logs = np.log(np.maximum(np.asarray(ref.samples, dtype=float), 1e-9))
        pool = ref.noise.with_samples(logs).with_samples(ref_logs)
        var[name], df[name] = w[name] ** 2 * pool.var, pool.df
        own[name] = var[name] / logs.size
        both[name] = own[name] + var[name] / ref_logs.size
        diff += w[name] * float(logs.mean() - ref_logs.mean())
    return _Difference(diff=diff, var=var, df=df, own=own, both=both)


def _welch_df(parts: Mapping[str, float], df: Mapping[str, int]) -> float:
    """Welch-Satterthwaite degrees of freedom of a sum of independent variance estimates ``parts``."""
    total = sum(parts.values())
    denominator = sum(v * v / df[name] for name, v in parts.items() if df[name] > 0)
    return total * total / denominator if denominator > 0 else float(min(df.values(), default=1))
