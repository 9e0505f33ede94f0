"""Sequential repeats: measure a scenario until the answer is clear, not a fixed number of times.

After each measured repeat the benchmark asks :meth:`SequentialPolicy.decide` whether to run another one.
It stops as soon as one of these holds:

* ``worse``: the repeats so far are confidently slower than the reference trial's repeats of the same scenario
  by more than the regression pruner's margin (its test, :func:`tuner.bench.is_slower`, at its confidence). The
  pruner then stops the trial.
* ``better`` / ``behind``: at least ``min_repeats`` repeats, confidently faster / slower than the reference (no
  margin). Polishing a config's third decimal pays only while it could be the best: a winner is re-measured
  by the end-of-study confirmation anyway, and a config that is surely behind stays in the study (its score
  still informs the sampler) without more repeats.
* ``precise``: at least ``min_repeats`` repeats and the score's interval is narrower than ``precision``
  (relative half-width, see :func:`tuner.bench.estimate`).
* ``max_repeats``: the cap.

The noise these tests need is the study's (:class:`tuner.bench.Noise`, pooled over every other config's
repeats of the scenario and carried by the :class:`Reference`), so one repeat can settle a config once a few
configs were measured twice. Before that (the baseline, or a study without a reference) a scenario is repeated
until its own repeats estimate the noise: one repeat alone never stops as ``precise``.

``min_repeats == max_repeats`` is the fixed-repeats mode (the ``repeats`` key of old study files): exactly that
many repeats, no early stop of any kind, as before sequential repeats existed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tuner.bench._stats import Noise, estimate, is_slower
from tuner.config import BenchmarkSection

__all__ = ["VERDICTS", "Reference", "ReferenceLookup", "RepeatDecision", "SequentialPolicy"]

#: Why a scenario stopped: ``more`` is the only verdict that asks for another repeat.
VERDICTS = ("more", "precise", "worse", "behind", "better", "max_repeats")


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
    """The study's repeat-to-repeat noise, pooled over configs other than the candidate and the reference."""

    @property
    def comparable(self) -> bool:
        """Enough reference repeats for a test: one when the noise is known from the pool, else two."""
        return len(self.samples) >= (1 if self.noise is not None else 2)


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
        )

    @property
    def fixed(self) -> bool:
        return self.min_repeats == self.max_repeats

    def decide(self, samples: Sequence[float], reference: Reference | None = None) -> RepeatDecision:
        """Stop (and why) or ``more``, given the repeats so far and the reference's repeats of the scenario."""
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
        h = estimate(samples, self.confidence, noise).relative_half_width
        if h is None:
            return RepeatDecision(verdict="more", reason="one repeat and no noise estimate yet")
        if h <= self.precision:
            return RepeatDecision(verdict="precise", reason=f"+-{h:.1%} after {n} repeats")
        return RepeatDecision(verdict="more", reason=f"+-{h:.1%} after {n} repeats, want +-{self.precision:.1%}")
