"""A batch cap tried without a restart (``[search] emulate``).

On a real box a trial costs a restart (minutes of weight loading), and the batch cap (SGLang's
``--max-running-requests``, vLLM's ``--max-num-seqs``, llama-server's ``-np``) is the knob that decides whether a
config keeps an SLO. A server started at the largest cap runs whatever the client sends, up to that cap; a client
that never has more than ``c`` requests in flight (the open-loop client's ``max_concurrency``: a due request waits
for a slot, and the wait counts in its TTFT) sees about what a server capped at ``c`` would give it: the
server's own queue moves to the client. So one start plays every cap.

A trial of a study with an SLO therefore does not sample the cap parameter (:func:`emulation_for`): it starts the
server at the largest value of the space, runs its scenarios there, and when an SLO misses, plays smaller caps at
the SLO scenarios' rates for the largest that keeps every SLO (the most throughput within the promise): by
bisection, the miss's own figures saying which way (:func:`_too_big`). When none does, the one closest to keeping
it (the smallest Optuna constraint) is the trial's. The scenarios without an SLO are then measured at that cap
too, and the trial records the cap it chose as its param (with the distribution every trial of the study gives
it: the sampler learns the cap each region wants), the command at that cap, and every cap it played (``emulated``). The
confirmation re-measures the finalists with the real flag after a restart (:mod:`tuner.study._confirm`).

Not emulated: the baseline and any trial whose cap was given (an enqueued seed, warm start or retry: a config
asked for by name runs as written); a study without an SLO (the cap then trades throughput for nothing the
client sees); a cap with a condition, in a constraint, or that gates another parameter; an objective that
measures on the server itself (``max_rate``) or has several directions. docs/measuring.md ("Batch caps without a
restart") says where the emulation differs from the real flag.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import optuna

from tuner.bench import BaseBenchmark, ScenarioResult
from tuner.config import Scenario, StudyConfig, spec_for
from tuner.metrics import probe_figures
from tuner.objective import objective_of
from tuner.space import Param, Value, suggest_param
from tuner.spec import LaunchSpec
from tuner.trials import record_of
from tuner.trials.adapter import fix_param, fixed_params

__all__ = ["MAX_CAPS", "CapPass", "Emulation", "Played", "emulated_param", "emulation_for", "play_caps", "settle"]

MAX_CAPS = 6
"""Caps an int range is played at, at most (its high end, halved down to its low end)."""


@dataclass(frozen=True, kw_only=True)
class Emulation:
    """The cap a trial plays with the client instead of sampling it."""

    param: Param
    caps: tuple[int, ...]
    """The values played, largest first; the first is the server's."""

    @property
    def server(self) -> int:
        return self.caps[0]

    @property
    def names(self) -> tuple[str, ...]:
        return (self.param.name,)

    def spec(self, config: StudyConfig, params: Mapping[str, Value], *, cap: int | None = None) -> LaunchSpec:
        """The trial's launch spec with the cap at ``cap`` (default: the server's value)."""
        return spec_for(config, {**params, self.param.name: self.server if cap is None else cap})

    def describe(self) -> str:
        return f"{self.param.name} played by the client ({', '.join(map(str, self.caps))}) on a server at {self.server}"


def emulated_param(config: StudyConfig) -> Param | None:
    """The parameter this study plays with the client (module docstring), or None."""
    objective = objective_of(config)
    if (
        not config.search.emulate
        or not any(s.slo is not None for s in config.benchmark.scenarios)
        or objective.measures
        or len(objective.directions()) != 1
    ):
        return None
    space = config.space
    gating = {c.param for p in space.params for c in p.when}
    constrained = {n for c in space.constraints for n in (c.left, c.right) if isinstance(n, str)}
    for p in space.params:
        if (
            config.dialect.emulates(p)
            and not p.when
            and p.name not in gating | constrained
            and p.env is None
            and p.json_flag is None
            and len(candidate_caps(p)) > 1
        ):
            return p
    return None


def candidate_caps(p: Param) -> tuple[int, ...]:
    """The caps ``p`` is played at, largest first: its integer choices, or an int range's high end halved down to
    its low end (on its step grid, at most :data:`MAX_CAPS`)."""
    if p.kind == "categorical":
        ints = [c for c in p.choices if isinstance(c, int) and not isinstance(c, bool) and c > 0]
        return tuple(sorted(set(ints), reverse=True)) if len(ints) == len(p.choices) else ()
    if p.kind != "int" or p.low is None or p.high is None or p.log:
        return ()
    low, high, step = int(p.low), int(p.high), int(p.step or 1)
    caps: list[int] = []
    value = float(high)
    while value > low and len(caps) < MAX_CAPS - 1:
        snapped = low + step * round((value - low) / step)
        if snapped not in caps and low <= snapped <= high:
            caps.append(snapped)
        value /= 2
    return tuple(sorted({*caps, low}, reverse=True))[:MAX_CAPS] if low > 0 else ()


def emulation_for(config: StudyConfig, trial: optuna.Trial) -> Emulation | None:
    """The cap trial ``trial`` plays with the client (None: it samples, or is given, every parameter)."""
    p = emulated_param(config)
    if p is None or record_of(trial).is_baseline or p.name in fixed_params(trial):
        return None
    return Emulation(param=p, caps=candidate_caps(p))


def settle(trial: optuna.Trial, emulation: Emulation, value: int) -> None:
    """Give the trial its cap as a param (the value it chose, or the server's when it ended before choosing)."""
    if emulation.param.name not in trial.params:
        fix_param(trial, emulation.param.name, value)
        suggest_param(trial, emulation.param)


def capped(scenario: Scenario, cap: int) -> Scenario:
    """``scenario`` with at most ``cap`` requests in flight from the client."""
    limit = min(scenario.max_concurrency or cap, cap) if scenario.open_loop else scenario.concurrency
    # An open loop's cap is its concurrency too (what the load generator holds in flight, as its parser sets it).
    return dataclasses.replace(
        scenario,
        max_concurrency=limit if scenario.open_loop else None,
        concurrency=min(limit, cap, scenario.concurrency),
    )


@dataclass(kw_only=True)
class CapPass:
    """The SLO scenarios at one cap (a pass stops at its first scenario that misses)."""

    cap: int
    results: dict[str, ScenarioResult] = field(default_factory=dict)
    complete: bool = False

    @property
    def holds(self) -> bool:
        return self.complete and all(v.holds for r in self.results.values() if (v := r.verdict) is not None)

    @property
    def constraint(self) -> float:
        values = [v.constraint for r in self.results.values() if (v := r.verdict) is not None]
        return max(values) if values else math.inf

    def record(self) -> dict[str, Any]:
        constraint = self.constraint
        return {
            "cap": self.cap,
            "holds": self.holds,
            "constraint": round(constraint, 6) if math.isfinite(constraint) else None,
            "passes": [probe_figures(r) for r in self.results.values()],
        }


@dataclass(frozen=True, kw_only=True)
class Played:
    chosen: int
    results: tuple[ScenarioResult, ...]
    """Every scenario at the chosen cap, in the order the first pass ran them."""
    passes: tuple[CapPass, ...]

    def record(self, emulation: Emulation) -> dict[str, Any]:
        return {
            "param": emulation.param.name,
            "flag": emulation.param.flag,
            "server": emulation.server,
            "chosen": self.chosen,
            "caps": [p.record() for p in self.passes],
        }


def play_caps(
    bench: BaseBenchmark,
    config: StudyConfig,
    emulation: Emulation,
    first: Sequence[ScenarioResult],
    *,
    say: Callable[[str], None],
) -> Played:
    """The caps played on the running server after its first pass ``first`` (at the server's cap), and every
    scenario at the chosen one (module docstring)."""
    slo = [s for s in config.benchmark.in_run_order() if s.slo is not None]
    measured = {r.name: r for r in first}
    passes = [CapPass(cap=emulation.server, results={s.name: measured[s.name] for s in slo}, complete=True)]

    def play(cap: int) -> CapPass:
        passes.append(_play(bench, slo, cap))
        say(_pass_line(emulation, passes[-1]))
        return passes[-1]

    if not passes[0].holds:
        way = _too_big(passes[0], slo)
        if way is None:  # no TTFT or TPOT limit to tell which way: every cap, largest first
            _descend(emulation.caps[1:], passes, play)
        elif way:  # its batch is too big: the largest cap below it that is not
            _bisect(sorted(emulation.caps), slo, play)
        # else it queues at the largest cap already: a smaller cap only queues more
    held = [p for p in passes if p.holds]
    chosen = max(held, key=lambda p: p.cap) if held else min(passes, key=lambda p: p.constraint)
    if chosen.cap == emulation.server:
        return Played(chosen=chosen.cap, results=tuple(first), passes=tuple(passes))
    by_name = {s.name: s for s in config.benchmark.scenarios}
    results = []
    for r in first:
        if r.name in chosen.results:
            results.append(chosen.results[r.name])
        elif r.name in {s.name for s in slo} or _limited(by_name[r.name], chosen.cap):
            results.append(bench.run_scenario(capped(by_name[r.name], chosen.cap)))
        else:  # never more than the cap in flight: the server's cap changed nothing it measured
            results.append(r)
    return Played(chosen=chosen.cap, results=tuple(results), passes=tuple(passes))


def _play(bench: BaseBenchmark, scenarios: Sequence[Scenario], cap: int) -> CapPass:
    played = CapPass(cap=cap)
    for s in scenarios:
        result = bench.run_scenario(capped(s, cap))
        played.results[s.name] = result
        if (v := result.verdict) is not None and not v.holds:
            return played  # this cap misses: its other scenarios cannot make it keep the promise
    played.complete = True
    return played


def _descend(caps: Sequence[int], passes: list[CapPass], play: Callable[[int], CapPass]) -> None:
    """Play ``caps`` in turn until one keeps the promise, or two in a row each move further from it than the cap
    before (the queue now costs more than the smaller batch saves: smaller caps only queue more)."""
    for cap in caps:
        if len(passes) >= 3 and passes[-3].constraint < passes[-2].constraint < passes[-1].constraint:
            return
        if play(cap).holds:
            return


def _bisect(ascending: Sequence[int], slo: Sequence[Scenario], play: Callable[[int], CapPass]) -> None:
    """The largest cap whose batch is not too big, by bisection: below the largest cap (its batch too big) every
    cap's TPOT is shorter and its queue longer, so the caps that keep the promise, if any, lie between those that
    queue too long and those whose batch is too big. The largest of them is the one with the most throughput."""
    lo, hi = 0, len(ascending) - 1  # ascending[hi] (the server's) is too big; ascending[lo] is assumed not
    played: dict[int, CapPass] = {}
    while hi - lo > 1:
        mid = (lo + hi) // 2
        played[mid] = play(ascending[mid])
        if not played[mid].holds and _too_big(played[mid], slo):
            hi = mid
        else:
            lo = mid
    if lo not in played:
        play(ascending[lo])


def _too_big(played: CapPass, slo: Sequence[Scenario]) -> bool | None:
    """Which way a pass that misses points: True when its batch is too big (its TPOT p99 further over its limit
    than its TTFT p99), False when it queues too long, None when it cannot tell (no TTFT or TPOT limit)."""
    for s in slo:
        r = played.results.get(s.name)
        if s.slo is None or r is None or (v := r.verdict) is None or v.holds:
            continue
        ttft = r.ttft_p99_s / s.slo.ttft_s if s.slo.ttft_s and r.ttft_p99_s is not None else None
        tpot = r.tpot_p99_s / s.slo.tpot_s if s.slo.tpot_s and r.tpot_p99_s is not None else None
        if ttft is None and tpot is None:
            return None
        return (tpot or 0.0) > (ttft or 0.0)
    return None


def _limited(scenario: Scenario, cap: int) -> bool:
    """Whether the cap can change what ``scenario`` measures (it may hold more than ``cap`` requests in flight)."""
    if scenario.open_loop:
        return scenario.max_concurrency is None or scenario.max_concurrency > cap
    return scenario.concurrency > cap


def _pass_line(emulation: Emulation, played: CapPass) -> str:
    words = "keeps the SLO" if played.holds else "misses the SLO"
    margins = [v.margin for r in played.results.values() if (v := r.verdict) is not None and v.margin is not None]
    # The margin as the verdict's text says it: the share of the limits the required share of requests stayed in.
    within = f"; within {math.exp(max(margins)):.0%} of the limits" if margins else ""
    return f"  {emulation.param.name} {played.cap}, played by the client: {words}{within}"
