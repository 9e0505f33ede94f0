"""Re-measure the top: the recommendation must not rest on one lucky measurement.

The best of N noisy measurements is biased upwards (the winner's curse): among configs within noise of each
other, the one that drew the luckiest repeats wins. So at the end of a study (and on ``tune best --confirm``)
the top-K feasible configs are measured again, interleaved (A B C A B C: a drift of the machine over time
hits every config alike), each visit a full restart + readiness + benchmark of every scenario. Their
confirmation scores come from these fresh repeats only, scored exactly like a trial
(:func:`tuner.study._objective.score`) with the study's pooled repeat noise. The winner *held* when the trial
that was best by its own measurement is still the best by confirmation.

A visit measures each scenario once when the study knows its noise (two rounds give every config two samples,
each from its own restart: the variance that matters between configs) and twice when it does not (a study
of fixed repeats measures its fixed number).

Recorded as the study's user attr ``confirmation`` (Optuna cannot change a finished trial's attrs):
``{"trials": [...], "values": {n: objective from the fresh repeats, 0 when the config failed}, "ranks":
{n: 1 = best}, "errors": {n: reason}, "winner": n, "best_before": n, "held": bool, "rounds": r}``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import optuna
from optuna.trial import FrozenTrial

from tuner.bench import Noise, ScenarioResult, SequentialPolicy, pooled_noise
from tuner.config import StudyConfig
from tuner.errors import TrialFailure
from tuner.space import render
from tuner.study._objective import BenchmarkOutcome, TrialParts, benchmark_server, score
from tuner.trials import (
    CONFIRMATION,
    attrs,
    confirmation_text,
    is_counted,
    is_feasible,
    recommended_trial,
    scenario_repeats,
)

__all__ = ["CONFIRMATION", "Confirmation", "confirm_top", "recommended_trial"]

ROUNDS = 2


@dataclass(frozen=True, kw_only=True)
class Confirmation:
    trials: tuple[int, ...]
    values: dict[int, float]
    best_before: int
    winner: int
    held: bool


def top_trials(study: optuna.Study, k: int) -> list[FrozenTrial]:
    """The ``k`` best feasible counted trials by their own measurement (single objective), distinct params."""
    done = [t for t in study.get_trials(deepcopy=False) if is_counted(t) and is_feasible(t)]
    done.sort(key=lambda t: t.values[0], reverse=True)
    top: list[FrozenTrial] = []
    for t in done:
        if all(t.params != o.params for o in top):
            top.append(t)
    return top[:k]


def confirm_top(
    study: optuna.Study,
    config: StudyConfig,
    *,
    parts: TrialParts,
    k: int,
    progress: Any = None,
) -> Confirmation | None:
    """Re-measure the top ``k`` configs interleaved over two rounds (see the module docstring).

    Returns None (and measures nothing) for multi-objective studies or fewer than two feasible configs:
    there is no ranking to confirm.
    """
    if len(study.directions) > 1 or k < 2:
        return None
    top = top_trials(study, k)
    if len(top) < 2:
        return None
    say = progress or (lambda text: None)
    say(f"confirming the top {len(top)}: " + " ".join(f"#{t.number}" for t in top) + f" ({ROUNDS} rounds)")
    noise = study_noise(study, config)
    policy = visit_policy(config, noise_known=all(n is not None for n in noise.values()))
    samples: dict[int, dict[str, list[float]]] = {t.number: {} for t in top}
    errors: dict[int, str] = {}
    for r in range(ROUNDS):
        for t in top:
            if t.number in errors:
                continue
            base = parts.target.base
            spec = None if t.user_attrs.get(attrs.BASELINE) else render(config.space, base, t.params)
            try:
                results = _measure(parts, config, spec, policy, label=f"confirm-{t.number:04d}-{r + 1}")
            except TrialFailure as failure:
                errors[t.number] = f"[{failure.phase}] {failure.reason}"[:500]
                say(f"  #{t.number} failed on re-measurement: {errors[t.number]}")
                continue
            for res in results:
                samples[t.number].setdefault(res.name, []).extend(res.repeats_tok_s)
    values = {n: 0.0 if n in errors else _value(config, per, noise) for n, per in samples.items()}
    return _record(study, top, values, errors, say)


def _measure(
    parts: TrialParts, config: StudyConfig, spec: Any, policy: SequentialPolicy, *, label: str
) -> tuple[ScenarioResult, ...]:
    """One visit: apply, restart, wait until the new process serves, benchmark every scenario."""
    target = parts.target
    up = target.bring_up(spec, label=label)
    bench = parts.benchmark(up.ready.endpoint or target.endpoint)
    bench.policy = policy
    try:
        outcome = benchmark_server(
            bench, config.benchmark, service=target.service, restarted=up.restarted, on_result=lambda step, r: None
        )
    finally:
        bench.close()
    return outcome.results


def visit_policy(config: StudyConfig, *, noise_known: bool) -> SequentialPolicy:
    """A fixed number of repeats per visit: the study's fixed ``repeats``; else 1 when the study's pooled noise
    is known for every scenario, 2 when it is not (the fresh repeats must then estimate it themselves).

    Sequential stops need a reference to stop against, and confirming *is* the comparison: every config gets
    the same fresh samples, so the ranking is not decided by who was stopped early.
    """
    b = config.benchmark
    if b.min_repeats == b.max_repeats:
        return SequentialPolicy(min_repeats=b.min_repeats, max_repeats=b.max_repeats)
    n = 1 if noise_known else min(2, b.max_repeats)
    return SequentialPolicy(min_repeats=n, max_repeats=n)


def study_noise(study: optuna.Study, config: StudyConfig) -> dict[str, Noise | None]:
    """Per scenario, the repeat noise pooled over every trial of the study (None: no trial repeated it)."""
    trials = [t for t in study.get_trials(deepcopy=False) if is_counted(t)]
    return {s.name: pooled_noise(scenario_repeats(t, s.name) for t in trials) for s in config.benchmark.scenarios}


def _value(config: StudyConfig, per: dict[str, list[float]], noise: dict[str, Noise | None]) -> float:
    """The objective of the pooled fresh repeats, scored exactly like a trial (with the study's noise)."""
    scenarios = {s.name: s for s in config.benchmark.scenarios}
    results = tuple(
        ScenarioResult.from_repeats(
            scenario=scenarios[name],
            repeats_tok_s=repeats,
            repeats_per_stream_tok_s=(),
            confidence=config.benchmark.confidence,
            noise=noise.get(name),
        )
        for name, repeats in per.items()
    )
    return score(BenchmarkOutcome(results=results, seconds=0.0), config.objective, config.benchmark.scenarios).values[0]


def _record(
    study: optuna.Study, top: list[FrozenTrial], values: dict[int, float], errors: dict[int, str], say: Any
) -> Confirmation:
    ranked = sorted(values, key=lambda n: values[n], reverse=True)
    result = Confirmation(
        trials=tuple(t.number for t in top),
        values=values,
        best_before=top[0].number,
        winner=ranked[0],
        held=ranked[0] == top[0].number,
    )
    study.set_user_attr(
        CONFIRMATION,
        {
            "trials": list(result.trials),
            "values": {str(n): round(v, 3) for n, v in values.items()},
            "ranks": {str(n): rank for rank, n in enumerate(ranked, start=1)},
            "errors": {str(n): e for n, e in errors.items()},
            "best_before": result.best_before,
            "winner": result.winner,
            "held": result.held,
            "rounds": ROUNDS,
        },
    )
    say(confirmation_text(study) or "")
    return result


def maybe_confirm(
    study: optuna.Study,
    config: StudyConfig,
    *,
    parts: TrialParts,
    console: Any,
    force: bool = False,
    claim: Callable[[list[int]], bool] | None = None,
) -> Confirmation | None:
    """The end-of-study call: confirm the top ``[search] confirm_top`` unless that exact top was confirmed.

    ``force`` (``tune best --confirm``) re-measures even an already confirmed top. ``claim`` (a fleet's
    workers) lets one worker confirm a given top; the others leave it to that one.
    """
    k = config.search.confirm_top
    if k < 2 and not force:
        return None
    top = [t.number for t in top_trials(study, max(k, 2))]
    done = study.user_attrs.get(CONFIRMATION)
    if not force and isinstance(done, dict) and done.get("trials") == top:
        return None
    if not force and claim is not None and len(top) >= 2 and not claim(top):
        console.line(f"confirmation of the top {len(top)} is done by another worker")
        return None
    return confirm_top(study, config, parts=parts, k=max(k, 2), progress=console.line)
