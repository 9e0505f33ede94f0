from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tuner.config._reader import Table

PRUNE_AGAINST = ("best", "baseline")
#: Keys a warm start replaced: a study file that still has one gets one line saying what to write instead.
RENAMED = ("import_best_from", "import_top")


@dataclass(frozen=True, kw_only=True)
class SearchSection:
    sampler: str = "tpe"
    n_startup_trials: int = 4
    """Trials (baseline and seeds included) before TPE models the results. A trial costs minutes, so TPE starts
    early: on both of scripts/bench_search.py's spaces 4 reached 98% of the optimum in fewer trials than 8."""
    seed_trials: tuple[dict[str, Any], ...] = field(default_factory=tuple)
    """Expert configurations enqueued right after the baseline."""
    warm_start: str | None = None
    """Another study whose results start this one: its top configs run right after the baseline (``tuner.study``
    maps them onto this space)."""
    warm_start_storage: str | None = None
    """Where that study is (an Optuna storage URL); None: this study's own storage."""
    warm_start_top: int = 3
    """How many of its best configs run right after the baseline (0: only the sampler's prior)."""
    warm_start_prior: bool = False
    """Also show all its counted trials to the sampler as a prior. Off by default: on scripts/bench_search.py's
    warm-start benchmark the prior slowed the search on both the related and the very different server
    (docs/measuring.md, "Warm start")."""
    pruning: bool = True
    """Stop benchmarking a config once a finished scenario is confidently slower than the reference."""
    prune_against: str = "best"
    """The reference trial: the ``best`` feasible trial so far, or the ``baseline`` (trial 0)."""
    prune_margin: float = 0.05
    """Prune only when the config is slower than the reference by more than this fraction."""
    prune_confidence: float = 0.9
    """How sure the one-sided test must be that the config is slower by more than the margin."""
    prune_min_repeats: int = 2
    """Repeats each side needs before a comparison is trusted (one repeat has no noise estimate)."""
    prune_objective_margin: float | None = None
    """Also prune once the objective so far (the weighted geomean of the scenarios measured up to now) is
    confidently slower than the reference's by more than this fraction (None: off; single-objective studies)."""
    max_same_failures: int = 3
    """Consecutive trials failing the same way on different params that stop the run as an environment
    fault (0: never)."""
    confirm_top: int = 3
    """At the end of a study, re-measure this many top configs interleaved (A B C A B C); 0 or 1: off."""
    emulate: bool = True
    """Try a batch cap's values without a restart (:mod:`tuner.study._emulate`): in a study with an SLO, a
    parameter on a flag the dialect declares (:attr:`tuner.dialects.BaseServerDialect.batch_cap_flags`) is not
    sampled; each trial starts the server at its largest value, plays the smaller ones with the client's
    ``max_concurrency`` and records the best; the confirmation re-measures the finalists with the real flag."""
    confirm_baseline: bool = True
    """Re-measure the baseline in every confirmation round too (base A B C base A B C), so the speed-up is
    measured side by side; off for a server whose restart costs more than a side-by-side figure is worth."""


def parse_search(t: Table | None) -> SearchSection:
    if t is None:
        return SearchSection()
    for old in RENAMED:
        if t.has(old):
            raise t.error(old, "`warm_start` (and `warm_start_top`) instead: they replaced `import_best_from`", None)
    seeds = t.raw("seed_trials", [])
    if not isinstance(seeds, list) or not all(isinstance(s, dict) for s in seeds):
        raise t.error("seed_trials", "a list of tables of parameter values", seeds)
    d = SearchSection()
    section = SearchSection(
        sampler=t.choice("sampler", ("tpe", "random"), "tpe"),
        n_startup_trials=t.int("n_startup_trials", d.n_startup_trials, min=0),
        seed_trials=tuple(dict(s) for s in seeds),
        warm_start=t.str("warm_start", None),
        warm_start_storage=t.str("warm_start_storage", None),
        warm_start_top=t.int("warm_start_top", d.warm_start_top, min=0),
        warm_start_prior=t.bool("warm_start_prior", d.warm_start_prior),
        pruning=t.bool("pruning", d.pruning),
        prune_against=t.choice("prune_against", PRUNE_AGAINST, d.prune_against),
        prune_margin=t.float("prune_margin", d.prune_margin, min=0),
        prune_confidence=t.float("prune_confidence", d.prune_confidence, min=0),
        prune_min_repeats=t.int("prune_min_repeats", d.prune_min_repeats, min=2),
        prune_objective_margin=t.float("prune_objective_margin", None, min=0),
        max_same_failures=t.int("max_same_failures", d.max_same_failures, min=0),
        confirm_top=t.int("confirm_top", d.confirm_top, min=0),
        confirm_baseline=t.bool("confirm_baseline", d.confirm_baseline),
        emulate=t.bool("emulate", d.emulate),
    )
    if section.warm_start is not None and section.warm_start_top == 0 and not section.warm_start_prior:
        raise t.error("warm_start_top", ">= 1, or warm_start_prior = true (0 and no prior carry nothing over)", 0)
    # Both are open-ended on one side, which Table's inclusive bounds cannot say.
    if not section.prune_margin < 1.0:
        raise t.error("prune_margin", "a fraction in [0, 1) (0.05 = 5% slower)", section.prune_margin)
    if section.prune_objective_margin is not None and not section.prune_objective_margin < 1.0:
        raise t.error(
            "prune_objective_margin", "a fraction in [0, 1) (0.02 = 2% slower)", section.prune_objective_margin
        )
    if section.warm_start_storage is not None and section.warm_start is None:
        raise t.error("warm_start_storage", "`warm_start = \"STUDY\"` beside it (which study to start from)", None)
    if not 0.0 < section.prune_confidence < 1.0:
        raise t.error("prune_confidence", "a probability in (0, 1), e.g. 0.9", section.prune_confidence)
    t.finish()
    return section
