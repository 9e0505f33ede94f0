"""What a study knows about its scenarios' first passes: the evidence ``[benchmark] warmup = "auto"`` decides on.

A first pass after a start is seen in two ways (:mod:`tuner.bench._warmup`): a probe (measured, uncounted) is
stored on its trial as ``<scenario>.first_pass_tok_s`` beside the counted ``<scenario>.repeats``; a run without
a warm-up (``<scenario>.warmup = "none"``) that counted two or more repeats has its first pass as the first of
them. The evidence is re-read from the study's finished trials whenever a trial starts, so it survives a resume
and is the same for every worker of a fleet; nothing else is stored.
"""

from __future__ import annotations

import statistics

import optuna
from optuna.trial import FrozenTrial, TrialState

from tuner.bench import FirstPasses, Slowdown, WarmupLookup, WarmupPlan, WarmupPolicy, first_pass_slowdown
from tuner.config import StudyConfig
from tuner.stats import pooled_noise
from tuner.trials import record_of

__all__ = ["describe_warmups", "first_passes", "first_passes_lookup", "warmup_states"]

_FINISHED = (TrialState.COMPLETE, TrialState.PRUNED)


def first_passes(trials: list[FrozenTrial], scenario: str, *, recheck: bool = False) -> FirstPasses:
    """The first passes of ``scenario`` in ``trials`` (with the repeats after them) and the repeat noise of the
    passes after a first one, pooled."""
    pairs, later = [], []
    for t in trials:
        record = record_of(t)
        probe = record.number_figure(scenario, "first_pass_tok_s")
        repeats = record.repeats(scenario)
        unwarmed = record.figure(scenario, "warmup") == "none"
        if probe is not None and repeats:
            pairs.append((float(probe), tuple(repeats)))
        elif unwarmed and len(repeats) >= 2:
            pairs.append((repeats[0], tuple(repeats[1:])))
        # The noise a first pass is judged against leaves first passes out: a slow one would widen it.
        later.append(repeats[1:] if unwarmed else repeats)
    noise = pooled_noise(later)
    warmups, passes = [], []
    for t in trials:
        record = record_of(t)
        warm, total = record.number_figure(scenario, "warmup_s"), record.number_figure(scenario, "seconds")
        n = len(record.repeats(scenario))
        if warm is not None and record.figure(scenario, "warmup") == "requests":
            warmups.append(warm)
        if warm is not None and total is not None and n:
            passes.append((total - warm) / n)
    return FirstPasses(
        pairs=tuple(pairs),
        noise=noise,
        recheck=recheck,
        warmup_s=statistics.median(warmups) if warmups else None,
        pass_s=statistics.median(passes) if passes else None,
    )


def first_passes_lookup(study: optuna.Study, config: StudyConfig, *, trial_number: int) -> WarmupLookup | None:
    """The evidence for trial ``trial_number``'s scenarios (None when the study always warms up)."""
    if config.benchmark.warmup != "auto":
        return None
    policy = WarmupPolicy.from_section(config.benchmark)
    trials = [t for t in study.get_trials(deepcopy=False, states=_FINISHED) if t.number != trial_number]
    recheck = policy.is_recheck(trial_number)
    cache: dict[str, FirstPasses] = {}

    def lookup(scenario: str) -> FirstPasses:
        if scenario not in cache:
            cache[scenario] = first_passes(trials, scenario, recheck=recheck)
        return cache[scenario]

    return lookup


def warmup_states(study: optuna.Study, config: StudyConfig) -> dict[str, tuple[WarmupPlan, Slowdown | None]]:
    """Per scenario, in run order: what the next (non-re-check) trial runs before it, and the slowdown seen."""
    policy = WarmupPolicy.from_section(config.benchmark)
    trials = list(study.get_trials(deepcopy=False, states=_FINISHED))
    out: dict[str, tuple[WarmupPlan, Slowdown | None]] = {}
    for s in config.benchmark.in_run_order():
        passes = first_passes(trials, s.name)
        out[s.name] = (policy.plan(passes), first_pass_slowdown(passes, policy.confidence))
    return out


def describe_warmups(study: optuna.Study, config: StudyConfig) -> str | None:
    """One line on what ``warmup = "auto"`` has concluded per scenario (None when the study always warms up)."""
    if config.benchmark.warmup != "auto":
        return None
    states = warmup_states(study, config)
    return 'warm-ups (warmup = "auto"): ' + "; ".join(f"{name} {plan.reason}" for name, (plan, _) in states.items())
