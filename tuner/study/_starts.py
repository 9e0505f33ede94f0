"""Where a study starts: the baseline, a warm start's top configs, expert seeds, one trial per unexplored branch.

Everything here is enqueued (``enqueue_trial``) before the sampler is asked, so the first trials of a study are
real measurements chosen by people or by coverage, not by TPE's random start-up.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Mapping

import optuna
from optuna.trial import FrozenTrial, TrialState

from tuner.config import StudyConfig, spec_for
from tuner.space import Value, iter_configs
from tuner.study._policy import ensure_baseline
from tuner.trials import WarmStart, enqueue, is_counted, record_of, write_study

__all__ = [
    "MAX_BRANCH_TRIES",
    "config_key",
    "enqueue_branches",
    "enqueue_starting_points",
    "enqueue_unmeasured",
    "find_duplicate",
    "retry_branch",
    "same_config",
]

MAX_BRANCH_TRIES = 20


def enqueue_starting_points(study: optuna.Study, config: StudyConfig, *, warm: WarmStart | None = None) -> None:
    """Trial 0 is the unmodified base command; then a warm start's top configs; then the study file's expert
    seeds; then one trial per branch none of these enters."""
    ensure_baseline(study, dict(config.baseline))
    if warm is not None:
        write_study(study, warm_start=warm.to_attr())
        for t in warm.top:
            enqueue(study, t.params, seed=f"{warm.study}#{t.number}", skip_if_exists=True)
    for i, seed in enumerate(config.search.seed_trials):
        enqueue(study, seed, seed=i, skip_if_exists=True)
    enqueue_branches(study, config)


def enqueue_branches(study: optuna.Study, config: StudyConfig) -> None:
    """One trial in each branch of a conditional space that no trial, seed or baseline has entered yet.

    TPE models what it has seen: a branch (``algorithm = "DFLASH"``) with no observation gets no good-group
    density, so after a few early successes in the other branch it is practically never sampled. One trial
    fixes the branch choice and lets the sampler pick the rest, so every branch is measured at least once.
    """
    seen = [dict(config.baseline), *config.search.seed_trials]
    seen += [t.system_attrs.get("fixed_params", t.params) for t in study.get_trials(deepcopy=False)]
    for p in config.space.branch_params():
        for choice in p.choices:
            if not any(params.get(p.name) == choice for params in seen):
                enqueue(study, {p.name: choice}, branch={p.name: choice}, skip_if_exists=True)


def find_duplicate(
    study: optuna.Study, config: StudyConfig, params: Mapping[str, Value], number: int, *, ignore: Collection[str] = ()
) -> FrozenTrial | None:
    """A measured (or, with several workers, currently running) trial of the same config (:func:`same_config`),
    the params in ``ignore`` left out of the comparison (a batch cap the trial chooses by measuring)."""

    def mine(p: Mapping[str, Value]) -> dict[str, Value]:
        return {k: v for k, v in p.items() if k not in ignore}

    key = same_config(config, mine(params))
    for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED, TrialState.RUNNING)):
        if t.number == number or same_config(config, mine(t.params)) != key:
            continue
        if t.state == TrialState.RUNNING or is_counted(t):
            return t
    return None


def retry_branch(study: optuna.Study, trial: optuna.Trial) -> None:
    """A branch trial whose sampled values broke a constraint: the branch is still unexplored, so try again."""
    branch = record_of(trial).branch
    if branch is None:
        return
    tries = sum(1 for t in study.get_trials(deepcopy=False) if record_of(t).branch == branch)
    if tries < MAX_BRANCH_TRIES:  # a branch whose every config breaks a constraint is given up, not looped on
        enqueue(study, branch, branch=branch)


def config_key(params: Mapping[str, Value]) -> tuple[tuple[str, Value], ...]:
    """Params comparable across Optuna's float arithmetic and the space's own grid (10 significant digits)."""
    return tuple(sorted((k, float(f"{v:.10g}") if isinstance(v, float) else v) for k, v in params.items()))


def same_config(config: StudyConfig, params: Mapping[str, Value]) -> tuple[tuple[str, Value], ...]:
    """What makes a config itself: its params (:func:`config_key`) but those its server ignores in the launch
    command they render (the dialect's :meth:`~tuner.dialects.BaseServerDialect.inert`: llama-server's draft
    length under ``--spec-type none``, SGLang's DDTree knobs under DFLASH). Two trials with one key are one
    config: it is measured once, and never raced against itself."""
    spec = spec_for(config, params)
    inert = config.dialect.inert(spec.argv, spec.env)
    if not inert:
        return config_key(params)
    names = {p.name: {p.flag, *p.aliases, p.env} for p in config.space.params}
    return config_key({k: v for k, v in params.items() if not names.get(k, set()) & inert})


def enqueue_unmeasured(study: optuna.Study, config: StudyConfig) -> bool:
    """Enqueue one config of a finite space that no trial measured, runs or waits for; False when none is left.

    Near the end of a small space the sampler proposes measured configs again and again (each a duplicate told
    its known value): one unmeasured config, picked at random, ends that.
    """
    done = {
        same_config(config, t.system_attrs.get("fixed_params", t.params))
        for t in study.get_trials(deepcopy=False)
        if is_counted(t) or t.state in (TrialState.RUNNING, TrialState.WAITING)
    }
    left = [params for params in iter_configs(config.space) if same_config(config, params) not in done]
    if not left:
        return False
    study.enqueue_trial(random.Random(len(study.trials)).choice(left), skip_if_exists=True)
    return True
