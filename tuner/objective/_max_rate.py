"""``kind = "max_rate"``: per trial, the highest offered rate of one open-loop scenario at which its SLO holds
(vLLM's ``auto_tune.sh`` answer, per config), searched on the server the trial already brought up (no restart).

The scenario's own pass (at its rate, measured with the trial's other scenarios) is the search's first probe; the
next is the best trial's highest held rate, then it doubles while the SLO holds and halves while it misses until it
has a bracket, then bisects it (geometrically); at most ``rate_steps`` passes, the first included. Every probe is
recorded on the trial (its rate, verdict and latency p99s: the views draw each). A rate
*holds* unless its verdict is a miss (:attr:`tuner.slo.SloVerdict.holds`: the search's benefit of the doubt). The
answer is the bracket ``[highest held, lowest missed]``. With pruning, a miss at or below the best trial's highest
rate ends the search: the trial is then confidently behind the best, and its remaining passes could not change that.

The confirmation runs the search again on each finalist's fresh restart, every config from the same rate (one
grid); a config's value is the lowest of its visits' highest held rates, and the speed-up the ratio of two rates
with its interval from the two brackets.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from tuner.bench import BaseBenchmark, ScenarioResult
from tuner.config import Scenario
from tuner.errors import RegressionPruned
from tuner.metrics import probe_figures
from tuner.objective._base import BaseObjective, RateBrackets, Score, ServerRun, Visit, register
from tuner.objective._confirmed import confirmed_pair
from tuner.objective._figures import Figure, Speedup
from tuner.stats import Noise
from tuner.trials import record_of

__all__ = ["MaxRateObjective", "RateBracket", "rate_speedup", "search_rate"]


@dataclass(frozen=True, kw_only=True)
class RateBracket:
    met: float | None
    """The highest rate tried at which the SLO held (None: it held at none)."""
    missed: float | None
    """The lowest rate tried at which it missed (None: it held at every rate tried)."""
    passes: tuple[ScenarioResult, ...] = ()
    """Every pass, in the order run (each knows its rate and its verdict)."""
    below: float | None = None
    """The ``floor`` the search stopped at: the SLO missed at or below it (None: the search ran its course)."""

    @classmethod
    def of(cls, passes: Sequence[ScenarioResult], below: float | None = None) -> RateBracket:
        held = [r.rate for r in passes if r.rate is not None and _holds(r)]
        missed = [r.rate for r in passes if r.rate is not None and not _holds(r)]
        return cls(met=max(held, default=None), missed=min(missed, default=None), passes=tuple(passes), below=below)

    def describe(self) -> str:
        met = f"{self.met:.3g}" if self.met is not None else "none"
        missed = f"{self.missed:.3g}" if self.missed is not None else "not reached"
        return f"max rate [{met}, {missed}] req/s in {len(self.passes)} steps"


def _holds(result: ScenarioResult) -> bool:
    return (verdict := result.verdict) is not None and verdict.holds


def _next_rate(met: float | None, missed: float | None, last: float) -> float:
    if missed is None:
        return last * 2
    if met is None:
        return last / 2
    return math.sqrt(met * missed)


def search_rate(
    bench: BaseBenchmark,
    scenario: Scenario,
    *,
    start: float,
    steps: int,
    floor: float | None = None,
    on_step: Callable[[ScenarioResult, bool], None] | None = None,
    first: ScenarioResult | None = None,
) -> RateBracket:
    """The bracket of ``scenario``'s highest rate that keeps its SLO, from ``start``, in at most ``steps`` passes
    (fewer when it misses at or below ``floor``: module docstring). ``first``: a pass already measured (the
    scenario's own), counted as the first step: the search goes on from ``start``, or from where that pass points
    when it was at ``start`` already."""
    passes: list[ScenarioResult] = [first] if first is not None else []
    rate = start
    if first is not None:
        bracket = RateBracket.of(passes)
        if bracket.missed is not None and floor is not None and bracket.missed <= floor:
            return RateBracket.of(passes, below=floor)
        if first.rate == start:
            rate = _next_rate(bracket.met, bracket.missed, start)
    for _ in range(steps - len(passes)):
        # The scenario's own name: its arrivals come from the same draws at every rate (common random numbers).
        result = bench.run_scenario(dataclasses.replace(scenario, rate=rate))
        passes.append(result)
        if on_step:
            on_step(result, _holds(result))
        bracket = RateBracket.of(passes)
        if floor is not None and bracket.missed is not None and bracket.missed <= floor:
            return RateBracket.of(passes, below=floor)
        rate = _next_rate(bracket.met, bracket.missed, rate)
    return RateBracket.of(passes)


def rate_speedup(best: Sequence[float | None] | None, baseline: Sequence[float | None] | None) -> Speedup | None:
    """The ratio of two highest met rates, its interval from the two brackets ``[highest met, lowest missed]``
    (the true rates lie in them): from the best's met over the baseline's missed to the best's missed over the
    baseline's met. None when either met no rate, or a bracket is missing."""
    if not best or not baseline or len(best) != 2 or len(baseline) != 2:
        return None
    (met, missed), (base_met, base_missed) = best, baseline
    if not met or not base_met:
        return None
    return Speedup(
        ratio=met / base_met,
        low=met / base_missed if base_missed else None,
        high=missed / base_met if missed else None,
    )


def _lowest(brackets: Sequence[RateBracket]) -> tuple[float | None, float | None]:
    """A config's bracket over its visits: the lowest highest-met rate (None if one visit met none) and the lowest
    missed rate (None: no visit missed)."""
    mets = [b.met for b in brackets]
    missed = [b.missed for b in brackets if b.missed is not None]
    return (None if None in mets else min(m for m in mets if m is not None)), (min(missed) if missed else None)


@register
class MaxRateObjective(BaseObjective):
    kind = "max_rate"
    measures = True

    @property
    def scenario(self) -> Scenario:
        return next(s for s in self.config.benchmark.scenarios if s.name == self.section.scenario)

    def metric_names(self) -> list[str]:
        return [f"max rate req/s ({self.section.scenario})"]

    def score(self, results: Sequence[ScenarioResult]) -> Score:
        """A visit's highest held rate (the trial's own comes from :meth:`measure`)."""
        met = RateBracket.of([r for r in results if r.name == self.scenario.name]).met or 0.0
        return Score(values=(met,), per_scenario={self.scenario.name: met})

    def _start(self, best: FrozenTrial | None) -> float:
        rate = record_of(best).max_rate_rps if best is not None else None
        return rate if rate else self.scenario.rate or 1.0

    def measure(self, run: ServerRun, results: Sequence[ScenarioResult]) -> Score | None:
        """The rate search on the running server; its highest held rate so far is the trial's intermediate
        value (a lower bound on its objective)."""
        held: list[float] = []

        def step(result: ScenarioResult, ok: bool) -> None:
            rate = result.rate or 0.0
            held.append(max([rate, *held]) if ok else max(held, default=0.0))
            run.report(held[-1])
            run.say(f"at {rate:.3g} req/s: {run.describe(result)}: {'meets' if ok else 'misses'} the SLO")

        best = run.best
        floor = record_of(best).max_rate_rps or None if run.prune and best is not None else None
        steps = self.section.rate_steps
        own = next((r for r in results if r.name == self.scenario.name and r.verdict is not None), None)
        if own is not None:
            step(own, _holds(own))
        bracket = search_rate(
            run.bench, self.scenario, start=self._start(best), steps=steps, floor=floor, on_step=step, first=own
        )
        run.record(
            max_rate_rps=bracket.met or 0.0,
            max_rate_bracket=[bracket.met, bracket.missed],
            probes=[probe_figures(r) for r in bracket.passes],
        )
        run.say(bracket.describe())
        if bracket.below is not None:
            assert best is not None
            pruned = RegressionPruned(
                f"misses the SLO in {self.scenario.name} at {bracket.missed:.3g} req/s, a rate the best "
                f"#{best.number} holds ({bracket.below:.3g} req/s)"
            )
            pruned.skipped = (self.scenario.name,) * (steps - len(bracket.passes))
            raise pruned
        return Score(values=(bracket.met or 0.0,), per_scenario={self.scenario.name: bracket.met or 0.0})

    # -- the confirmation ----------------------------------------------------------------------------------------

    def visit(self, bench: BaseBenchmark, scenarios: Callable[[], Visit], *, leader: FrozenTrial) -> Visit:
        """The rate search again, from the leader's rate: every config on one grid."""
        return search_rate(bench, self.scenario, start=self._start(leader), steps=self.section.rate_steps).passes

    def confirmed_value(self, visits: Sequence[Visit], noise: Mapping[str, Noise | None]) -> float:
        """The lowest of the visits' highest held rates: the rate the config held after every restart."""
        return _lowest([RateBracket.of(v) for v in visits])[0] or 0.0

    def confirmed_figures(self, visits: Sequence[Visit], noise: Mapping[str, Noise | None]) -> dict[str, Any]:
        return {"max_rate_bracket": list(_lowest([RateBracket.of(v) for v in visits]))}

    # -- the views -----------------------------------------------------------------------------------------------

    def format(self, value: float) -> str:
        return f"{value:.3g} req/s"

    def facts(self, t: FrozenTrial) -> dict[str, Any]:
        """The highest rate that kept the SLO and the lowest that missed it (None: none missed), req/s."""
        bracket = record_of(t).max_rate_bracket
        met, missed = bracket if bracket is not None else (None, None)
        return {"max_rate_rps": met, "misses_at_rps": missed}

    def figure(self, t: FrozenTrial) -> Figure | None:
        if t.state != TrialState.COMPLETE or not t.values or len(t.values) != 1 or not math.isfinite(t.values[0]):
            return None
        bracket = record_of(t).max_rate_bracket
        return Figure(score=t.values[0], missed=bracket[1] if bracket else None, unit="req/s")

    def brackets(self, study: optuna.Study, best: FrozenTrial, baseline: FrozenTrial | None) -> RateBrackets | None:
        """The brackets every view compares: the confirmation's side by side when it measured both, else the two
        trials' own (None without a baseline)."""
        if baseline is None:
            return None
        pair = confirmed_pair(study, best.number, baseline.number)
        mine, theirs = record_of(best).max_rate_bracket, record_of(baseline).max_rate_bracket
        visits = None
        if pair is not None:
            (a, b, visits) = pair
            mine, theirs = (a or {}).get("max_rate_bracket"), (b or {}).get("max_rate_bracket")
        speedup = rate_speedup(mine, theirs)
        if speedup is not None and visits is not None:
            speedup = dataclasses.replace(speedup, side_by_side=True, baseline_visits=visits)
        return RateBrackets(scenario=self.scenario.name, best=mine, baseline=theirs, speedup=speedup, visits=visits)

    def speedup(self, study: optuna.Study, best: FrozenTrial, baseline: FrozenTrial) -> Speedup | None:
        """The ratio of the two highest held rates, its interval from the brackets."""
        found = self.brackets(study, best, baseline)
        return found.speedup if found is not None else None

    def describe(self, repeats: str) -> str:
        s = self.scenario
        return (
            f"Maximise the highest offered rate of `{s.name}` (req/s) at which its SLO holds, searched in up to "
            f"{self.section.rate_steps} passes on each trial's running server."
        )
