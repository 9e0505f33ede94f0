#!/usr/bin/env python3
"""Compare search strategies on a study file against the simulator's ground truth.

Every strategy runs the real tuning loop (:func:`tuner.study.run_study`: ask/tell, baseline first, duplicate
and constraint handling, the TrialRunner story) against the in-process model (:mod:`tuner.sim.inprocess`), with 2%
benchmark noise, over several seeds. A strategy is judged by the TRUE (noise-free) value of the config it
would report as best (best by *measured* score) after 10, 20 and 30 trials, as a fraction of the true optimum
found by enumerating the whole space.

Strategies:
  tune    TPE (multivariate, grouped) + baseline trial 0 + branch coverage + regression pruning (`tune`'s defaults)
  random  random search + baseline trial 0 + branch coverage, no pruning
  grid    the seed session's sweep: baseline + b8t4/none, b16t4/2048, b4t4/2048, b12t6/2048 (= the baseline)

Restarts are the unit of cost: each restart's modelled time is a weight load of ``--load-time`` seconds (default 6
minutes, a big model's) plus the model's CUDA-graph capture and warm-up, apart from the benchmark's modelled time. A
second table gives, per strategy, the restarts and modelled hours until the study's best is a config that truly
keeps every promise (any SLO, the gate) and until it is worth 98% of the optimum, and how many seeds found such a
config within ``--within`` (6) restarts.

``tune`` takes another sampler as ``tune:NAME`` (``--list-samplers`` lists them: ``tpe-plain`` is tune's TPE without
the random draws while no trial is feasible (:class:`tuner.search.FeasibleFirstSampler`), others TPE with other
settings, Optuna's GPSampler and CmaEsSampler where their packages are installed), and structured starting points
from what is known about speculative decoding as ``tune+structured`` or ``tune:NAME+structured``
(:func:`structured_seeds`); ``+slo`` adds the batch cap the SLO's rate needs by Little's law (:func:`slo_seeds`).

``--warm-start related,different`` is the warm-start benchmark instead: for every seed, a study on the model (the
source) and then, on each named variant of the model's server (:data:`tuner.sim.inprocess.VARIANTS`), the same
study cold, warm-started from the source, and warm-started with the source's results as the sampler's prior; the
table gives trials to 98% of the variant's optimum each way.

Two study files make two different tests: studies/demo.toml (the default) is easy, a tenth of random samples are
within 2% of its optimum; studies/coding-agent.toml is the hard case, about 1% of its space is.

``--repeats fixed,sequential`` compares repeat modes with the same seeds: ``fixed`` runs ``--fixed-repeats`` (2)
repeats per scenario with no early stop and ``--fixed-warmup-requests`` (1) warm-up requests before each scenario
(what study files did before sequential repeats and ``warmup = "auto"``), ``sequential`` the study file's
``min_repeats``..``max_repeats`` policy (``tuner.bench.SequentialPolicy``) and its warm-up setting,
``sequential-always`` the same with the fixed mode's warm-ups. The benchmark time column leaves out the
end-of-study confirmation, which has its own column (and "confirmed best" its own quality), and gives each mode's
share of the first mode's time. ``--cold-start 0.2`` makes the model a server whose first pass at each batch size
is 20% slower (one that needs its warm-ups).

Usage::

    .venv/bin/python scripts/bench_search.py --seeds 20 --trials 30
    .venv/bin/python scripts/bench_search.py --config studies/coding-agent.toml
    .venv/bin/python scripts/bench_search.py --strategies tune --repeats fixed,sequential-always,sequential --seeds 10
    .venv/bin/python scripts/bench_search.py --config studies/coding-agent.toml --strategies tune,tune:tpe-ei64
    .venv/bin/python scripts/bench_search.py --config studies/coding-agent.toml --warm-start related,different
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import multiprocessing
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


STRATEGIES = ("tune", "random", "grid")
CHECKPOINTS = (10, 20, 30)
TARGET = 0.98
#: A restart's weight load in modelled seconds (``--load-time``): about 6 minutes for a big model (Kimi K2.6 on
#: 8 GPUs, /work/shared/REFERENCE.md); the model adds CUDA-graph capture and the warm-up on top.
LOAD_TIME_S = 360.0
#: The seed session's 4-point sweep (budget, top-k, draft window); everything else stays at the base command.
GRID = ((8, 4, "none"), (16, 4, 2048), (4, 4, 2048), (12, 6, 2048))


def repeats_config(config: Any, mode: str, fixed: int, warmup_requests: int = 1) -> Any:
    """``fixed``: ``fixed`` repeats per scenario, no early stop, ``warmup_requests`` warm-up requests before
    every scenario (main before sequential repeats); ``sequential``: the study file's min_repeats..max_repeats
    policy (defaults 2..6, +-2%) and its warm-up; ``sequential:0.03``: the same with another ``precision``;
    ``sequential-always``: sequential repeats with the fixed mode's warm-ups."""
    always = dataclasses.replace(config.benchmark, warmup="always", warmup_requests=warmup_requests)
    if mode == "fixed":
        return dataclasses.replace(config, benchmark=dataclasses.replace(always, repeats=fixed))
    name, _, precision = mode.partition(":")
    if name == "sequential-always":
        name, config = "sequential", dataclasses.replace(config, benchmark=always)
    if name == "sequential":
        bench = config.benchmark
        if bench.min_repeats == bench.max_repeats:
            bench = dataclasses.replace(bench, repeats=None, min_repeats=2, max_repeats=6)
        if precision:
            bench = dataclasses.replace(bench, precision=float(precision))
        return dataclasses.replace(config, benchmark=bench)
    raise ValueError(f"unknown repeats mode {mode!r}")


def strategy_config(config: Any, strategy: str, seed: int, **search: Any) -> tuple[Any, int | None]:
    """The study config a strategy runs with, and its fixed trial count (None: the requested budget).

    ``tune+structured`` (or ``+slo``, combinable) adds those starting points (:data:`STARTS`) to the study file's
    seeds; ``+noemulate`` (on ``tune`` or
    ``random``) samples the batch cap like any parameter instead of playing it with the client (``[search]
    emulate = false``); ``tune:NAME`` only changes the sampler (:func:`sampler_factory`)."""
    study = dataclasses.replace(config.study, seed=seed)
    name, _, rest = strategy.partition("+")
    name, options = name.partition(":")[0], set(rest.split("+"))
    emulate = {"emulate": False} if "noemulate" in options else {}
    if name == "tune":
        s = dataclasses.replace(config.search, sampler="tpe", pruning=True, **search, **emulate)
        for option in [o for o in rest.split("+") if o and o != "noemulate"]:  # in the order given
            if option not in STARTS:
                raise SystemExit(f"unknown starting points {option!r}: one of {', '.join(STARTS)}")
            s = dataclasses.replace(s, seed_trials=(*s.seed_trials, *STARTS[option](config)))
        return dataclasses.replace(config, study=study, search=s), None
    if name == "random":
        s = dataclasses.replace(config.search, sampler="random", pruning=False, **emulate)
        return dataclasses.replace(config, study=study, search=s), None
    seeds = []
    for budget, topk, window in GRID:
        params = {**config.baseline, "budget": budget, "topk": topk, "draft_window": window}
        if "algorithm" in params:  # a space that also offers DFLASH: the sweep was DDTREE's
            params["algorithm"] = "DDTREE"
        if params != config.baseline and params not in seeds:
            seeds.append(params)
    s = dataclasses.replace(config.search, seed_trials=tuple(seeds), pruning=False)
    return dataclasses.replace(config, study=study, search=s), 1 + len(seeds)


# -- samplers and starting points ---------------------------------------------------------------------------------

#: TPE settings to compare with tune's own (tuner.search.TPE_SETTINGS), by name.
TPE_VARIANTS: dict[str, dict[str, Any]] = {
    "tpe-plain": {},  # without tune's random draws while no trial is feasible (FeasibleFirstSampler)
    "tpe-startup2": {"n_startup_trials": 2},
    "tpe-startup8": {"n_startup_trials": 8},
    "tpe-startup12": {"n_startup_trials": 12},
    "tpe-ei8": {"n_ei_candidates": 8},
    "tpe-ei64": {"n_ei_candidates": 64},
    "tpe-ei128": {"n_ei_candidates": 128},
    "tpe-prior0.3": {"prior_weight": 0.3},
    "tpe-prior3": {"prior_weight": 3.0},
    "tpe-independent": {"multivariate": False, "group": False},
    "tpe-nogroup": {"group": False},
    "tpe-noliar": {"constant_liar": False},
    "tpe-endpoints": {"consider_endpoints": True},
    "tpe-nomagic": {"consider_magic_clip": False},
}
OTHER_SAMPLERS = {
    "gp": "Optuna's GPSampler (needs torch): a GP per constraint beside the objective's, from the constraints the "
    "trials record (the SLO's margin, the gate's; Optuna 5's constraints_func is that); pruned trials ignored",
    "cmaes": "Optuna's CmaEsSampler with margin (needs cmaes); categoricals at random, pruned trials ignored",
    "qmc": "Optuna's QMCSampler (Sobol, scrambled): space-filling, no model",
}


def sampler_factory(name: str) -> Any:
    """``tune:NAME``'s sampler as a :data:`tuner.search.SamplerFactory`."""
    import optuna

    from tuner.search import SAMPLERS, tpe_sampler

    if name == "tpe":
        return SAMPLERS["tpe"]
    if name in TPE_VARIANTS:
        return lambda config, seed: tpe_sampler(config, seed, **TPE_VARIANTS[name])
    if name == "gp":
        return lambda config, seed: optuna.samplers.GPSampler(
            seed=seed, n_startup_trials=config.search.n_startup_trials
        )
    if name == "cmaes":
        return lambda config, seed: optuna.samplers.CmaEsSampler(
            seed=seed,
            n_startup_trials=config.search.n_startup_trials,
            with_margin=True,
            warn_independent_sampling=False,
        )
    if name == "qmc":
        return lambda config, seed: optuna.samplers.QMCSampler(seed=seed, warn_independent_sampling=False)
    raise SystemExit(f"unknown sampler {name!r}: one of tpe, {', '.join([*TPE_VARIANTS, *OTHER_SAMPLERS])}")


def _param_by_flag(config: Any, *flags: str, env: str | None = None) -> Any:
    for p in config.space.params:
        if p.flag in flags or any(a in flags for a in p.aliases) or (env is not None and p.env == env):
            return p
    return None


def structured_seeds(config: Any) -> list[dict[str, Any]]:
    """Starting points from how DFlash/DDTree trade acceptance for step time, on the parameters found by their
    flags (SGLang's): with B the baseline's block size (the drafter's trained one in a deployment that works),

    * a plain chain: budget B - 1 (DDTree without a tree; unset it is the same);
    * the smallest real tree: budget 2 (B - 1), where the fan-out ``budget // (B - 1) + 1`` is 3 and top-k caps
      at or above 3 start to matter (SGLang's DDTree rule), cap 3;
    * the chain of the next block size up, 2B - 1 budget (more drafted positions, if the space has the block);
    * DFLASH at block B, when the space offers it.

    Each keeps the baseline's other values; seeds outside the space or equal to the baseline are dropped.
    """
    block = _param_by_flag(config, "--speculative-dflash-block-size", "--speculative-num-draft-tokens")
    budget = _param_by_flag(config, "--speculative-ddtree-budget")
    topk = _param_by_flag(config, env="SGLANG_DDTREE_MAX_TOPK")
    algorithm = _param_by_flag(config, "--speculative-algorithm")
    if block is None or budget is None:
        return []
    b = int(config.baseline.get(block.name, 8))
    ddtree = {algorithm.name: "DDTREE"} if algorithm is not None else {}
    picks = [
        {**ddtree, block.name: b, budget.name: b - 1},
        {**ddtree, block.name: b, budget.name: 2 * (b - 1), **({topk.name: 3} if topk is not None else {})},
        {**ddtree, block.name: 2 * b, budget.name: 2 * b - 1},
    ]
    if algorithm is not None and "DFLASH" in algorithm.choices:
        picks.append({algorithm.name: "DFLASH", block.name: b})
    out: list[dict[str, Any]] = []
    for pick in picks:
        params: dict[str, Any] = {}
        for p in config.space.params:  # in file order, so a condition sees the values it depends on
            if p.active(params):
                params[p.name] = pick.get(p.name, config.baseline.get(p.name))
        inside = all(v is not None and config.space.by_name(k).contains(v) for k, v in params.items())
        if inside and not config.space.violations(params) and params != config.baseline and params not in out:
            out.append(params)
    return out


#: The batch-cap flags of the dialects (SGLang, vLLM, llama-server), for :func:`slo_seeds`.
BATCH_CAP_FLAGS = ("--max-running-requests", "--max-num-seqs", "-np", "--parallel")


def slo_seeds(config: Any) -> list[dict[str, Any]]:
    """A starting point from the SLO itself (Little's law): requests arriving at ``rate`` that each decode
    ``output_tokens`` at the promised TPOT keep ``rate * output_tokens * tpot`` of them in flight. A batch cap
    below that queues arrivals (TTFT grows without bound); well above it, bursts fill the batch and every step
    slows (TPOT misses). The seed is the baseline with the smallest cap of the space at or above the largest such
    concurrency over the SLO's open-loop scenarios; [] without an SLO, a rate, a TPOT limit or a batch-cap
    parameter, or when that is the baseline's cap."""
    cap = _param_by_flag(config, *BATCH_CAP_FLAGS)
    need = [
        s.rate * s.output_tokens * s.slo.tpot_s
        for s in config.benchmark.scenarios
        if s.slo is not None and s.slo.tpot_s is not None and s.rate is not None
    ]
    if cap is None or not need or cap.choices is None:
        return []
    fits = sorted(c for c in cap.choices if c >= max(need))
    if not fits or fits[0] == config.baseline.get(cap.name):
        return []
    return [{**config.baseline, cap.name: fits[0]}]


#: Starting points ``tune+NAME`` adds to the study file's seeds (several: ``tune+slo+structured``).
STARTS = {"structured": structured_seeds, "slo": slo_seeds}


# -- one study ----------------------------------------------------------------------------------------------------


def run_one(task: tuple[str, str, str, int, int, float, float, dict[str, Any]]) -> dict[str, Any]:
    """One strategy x repeats mode x seed: the true fraction of the optimum reached after each counted trial."""
    with tempfile.TemporaryDirectory(prefix="bench-search-", dir=_fast_tmp()) as tmp:
        return run_arm(*task, storage=f"sqlite:///{tmp}/study.db")


def run_arm(
    config_path: str,
    strategy: str,
    mode: str,
    seed: int,
    trials: int,
    optimum: float,
    noise: float,
    search: dict[str, Any],
    *,
    storage: str,
    study_name: str | None = None,
    variant: str | None = None,
    warm_start: str | None = None,
) -> dict[str, Any]:
    """One study in ``storage`` (on a ``variant`` of the model's server, warm-started from another study in the
    same storage if asked), judged against ``optimum``."""
    import optuna

    from tuner.config import load_config
    from tuner.errors import TuneError
    from tuner.search import SAMPLERS, pruning_savings
    from tuner.sim.inprocess import VARIANTS, VirtualClock, run_inprocess, true_objective
    from tuner.trials import is_counted, record_of

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)  # TPE's group=True
    warnings.filterwarnings("ignore", category=FutureWarning)  # TPE settings Optuna 6 drops (prior_weight...)
    search = dict(search)
    fixed_repeats, fixed_warmup = search.pop("fixed_repeats", 2), search.pop("fixed_warmup_requests", 1)
    base = repeats_config(load_config(config_path), mode, fixed_repeats, fixed_warmup)
    cold_start = search.pop("cold_start", 0.0)
    load_time = search.pop("load_time", LOAD_TIME_S)
    config, fixed = strategy_config(base, strategy, seed, **search, warm_start=warm_start)
    if sampler := strategy.partition("+")[0].partition(":")[2]:  # tune:NAME
        SAMPLERS.setdefault(sampler, sampler_factory(sampler))
        config = dataclasses.replace(config, search=dataclasses.replace(config.search, sampler=sampler))
    model = VARIANTS[variant] if variant else None
    n = fixed or trials
    t0 = time.monotonic()
    name = study_name or config.study.name
    clock, stopped = VirtualClock(), None
    try:
        clock = run_inprocess(
            config,
            storage=storage,
            study_name=name,
            trials=n,
            noise=noise,
            seed=seed,
            cold_start=cold_start,
            variant=model,
            load_time_s=load_time,
        ).clock
    except TuneError as exc:  # the study stopped itself (a sampler stuck on measured configs): judge what it has
        stopped = str(exc)
    wall = time.monotonic() - t0
    study = optuna.load_study(study_name=name, storage=storage)
    counted = [t for t in study.get_trials(deepcopy=False) if is_counted(t)]
    fractions: list[float] = []
    best_value, best_true = -math.inf, 0.0
    cache: dict[tuple[Any, ...], float] = {}

    def truth(params: dict[str, Any]) -> float:
        key = tuple(sorted(params.items()))
        if key not in cache:
            cache[key] = true_objective(config, params, model)
        return cache[key]

    for t in counted:
        if record_of(t).feasible and t.values[0] > best_value:
            best_value, best_true = t.values[0], truth(t.params)
        fractions.append(best_true / optimum)
    restarts, hours = search_costs(clock, [t.number for t in counted])
    trials_labels = list(clock.trials)
    repeats = [
        len(t.user_attrs.get(f"{sc.name}.repeats", []))
        for t in counted
        for sc in config.benchmark.scenarios
        if f"{sc.name}.repeats" in t.user_attrs
    ]
    return {
        "strategy": f"{strategy} ({mode})",
        "seed": seed,
        "repeats": statistics.fmean(repeats) if repeats else 0.0,
        "fractions": fractions,
        "restarts": restarts,
        "hours": hours,
        "pruned": sum(1 for t in counted if t.user_attrs.get("pruning_saved_s") is not None),
        "failed": sum(1 for t in counted if t.state.name == "PRUNED" and t.user_attrs.get("pruning_saved_s") is None),
        "saved_s": pruning_savings(study),
        "startup_s": sum(clock.seconds(lab, what="startup") for lab in trials_labels if lab.startswith("trial-")),
        "search_s": sum(clock.seconds(lab) for lab in trials_labels if lab.startswith("trial-")),
        "bench_s": sum(clock.seconds(lab, what="benchmark") for lab in trials_labels if not _confirm(lab)),
        "confirm_s": sum(clock.seconds(lab, what="benchmark") for lab in trials_labels if _confirm(lab)),
        "confirmed": _confirmed_fraction(study, truth, optimum),
        "finalists_best": _finalists_best_fraction(study, truth, optimum),
        "total_s": clock.seconds(),
        "wall_s": wall,
        "stopped": stopped,
    }


def search_costs(clock: Any, numbers: list[int]) -> tuple[list[int], list[float]]:
    """Restarts and modelled hours (restarts, benchmarks and gates) spent up to and including each trial of
    ``numbers``, counting every trial the study ran before it (a failed start is a restart too; a duplicate or a
    rejected sample costs nothing). The confirmation's restarts come after the search and are not counted."""
    spent: dict[int, tuple[int, float]] = {}
    for label, what in clock.trials.items():
        kind, _, number = label.partition("-")
        if kind == "trial" and number.isdigit():
            spent[int(number)] = ("startup" in what, sum(what.values()))
    restarts, hours = [], []
    for n in numbers:
        before = [cost for k, cost in spent.items() if k <= n]
        restarts.append(sum(r for r, _ in before))
        hours.append(sum(s for _, s in before) / 3600)
    return restarts, hours


def _confirm(label: str) -> bool:
    return label.startswith("confirm-")


def _confirmed_fraction(study: Any, truth: Any, optimum: float) -> float:
    """True value of the config the study recommends after its end-of-study confirmation."""
    from tuner.trials import recommended

    rec = recommended(study)
    return 0.0 if rec is None else truth(rec.trial.params) / optimum


def _finalists_best_fraction(study: Any, truth: Any, optimum: float) -> float | None:
    """True value of the best config the confirmation re-measured (what a perfect confirmation would pick);
    None without a confirmation."""
    from tuner.trials import study_record, study_trials

    c = study_record(study).confirmation
    if not isinstance(c, dict) or not c.get("trials"):
        return None
    trials = study_trials(study)
    return max(truth(trials[number].params) for number in c["trials"]) / optimum


def _regression_pruned(t: Any) -> bool:
    return t.user_attrs.get("pruned_skipped_scenarios") is not None


def _fast_tmp() -> str | None:
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() else None


def at(fractions: list[float], k: int) -> float:
    if not fractions:
        return 0.0
    return fractions[min(k, len(fractions)) - 1]


def first_reaching(fractions: list[float], target: float) -> float:
    return next((i + 1 for i, f in enumerate(fractions) if f >= target), math.inf)


def cost_reaching(row: dict[str, Any], target: float) -> tuple[float, float]:
    """Restarts and modelled hours until the study's best (by its measurements) is truly worth ``target`` of the
    optimum (a target just above 0: a config that truly keeps every promise); inf when it never is."""
    i = first_reaching(row["fractions"], target)
    if not math.isfinite(i):
        return math.inf, math.inf
    return row["restarts"][int(i) - 1], row["hours"][int(i) - 1]


def _median_text(values: list[float], fmt: str = "{:.1f}") -> str:
    m = statistics.median(values)
    return fmt.format(m) if math.isfinite(m) else "never"


def print_costs(strategies: list[str], results: list[dict[str, Any]], *, within: int, load_time: float) -> None:
    """Restarts as the unit of cost: restarts and modelled hours to a feasible config and to TARGET of the optimum."""
    print(
        f"\nrestarts: weight load {load_time / 60:.1f} min (modelled, plus CUDA-graph capture and warm-up); hours: "
        "restarts + benchmarks + gates, modelled, from trial 0; 'never': not reached in the budget\n"
    )
    head = (
        f"| strategy | restarts to a feasible config: median / worst | seeds with one within {within} restarts "
        f"| restarts to {TARGET:.0%}: median / seeds reaching | hours to a feasible config (median) "
        f"| hours to {TARGET:.0%} (median) | mean restart (min) | mean trial (min) |"
    )
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    for s in strategies:
        rows = [r for r in results if r["strategy"] == s]
        feasible = [cost_reaching(r, 1e-9) for r in rows]
        best = [cost_reaching(r, TARGET) for r in rows]
        worst = max(c for c, _ in feasible)
        restarts = sum(r["restarts"][-1] for r in rows if r["restarts"])
        startup = sum(r["startup_s"] for r in rows)
        trials = sum(len(r["fractions"]) for r in rows)
        print(
            f"| {s} | {_median_text([c for c, _ in feasible])} / {worst if math.isfinite(worst) else 'never'} "
            f"| {sum(1 for c, _ in feasible if c <= within)}/{len(rows)} "
            f"| {_median_text([c for c, _ in best])} / {sum(1 for c, _ in best if math.isfinite(c))} "
            f"| {_median_text([h for _, h in feasible], '{:.2f}')} | {_median_text([h for _, h in best], '{:.2f}')} "
            f"| {startup / max(restarts, 1) / 60:.1f} | {sum(r['search_s'] for r in rows) / max(trials, 1) / 60:.1f} |"
        )


#: The parts of tuner/ the true optimum reads (the model, its parsing of a launch, the latency figures, scoring).
MODEL_SOURCES = ("sim", "bench", "config", "space", "dialects", "objective", "stats", "metrics.py", "slo.py", "spec.py")


def cached_optimum(path: str, config: Any) -> tuple[float, dict[str, Any]]:
    """:func:`tuner.sim.inprocess.true_optimum` (minutes of enumeration on a big space), kept in the temporary
    directory under a hash of the study file and the simulator's source, so a change of either enumerates again."""
    import hashlib
    import json

    from tuner.sim.inprocess import true_optimum

    digest = hashlib.sha256(Path(path).read_bytes())
    for part in MODEL_SOURCES:  # what can move the model's figures
        for source in sorted((REPO / "tuner" / part).rglob("*.py")) if "." not in part else [REPO / "tuner" / part]:
            digest.update(source.read_bytes())
    cache = Path(tempfile.gettempdir()) / f"bench-search-optimum-{digest.hexdigest()[:16]}.json"
    if cache.is_file():
        known = json.loads(cache.read_text())
        return known["optimum"], known["params"]
    optimum, params = true_optimum(config)
    cache.write_text(json.dumps({"optimum": optimum, "params": params}))
    return optimum, params


def run_warm(task: tuple[str, str, int, int, float, dict[str, Any], float, list[tuple[str, float]]]) -> dict[str, Any]:
    """One seed of the warm-start benchmark: a study on the model, then per variant a study in each of ARMS."""
    config_path, strategy, seed, trials, noise, search, source_optimum, targets = task
    out: dict[str, Any] = {"seed": seed}
    with tempfile.TemporaryDirectory(prefix="bench-warm-", dir=_fast_tmp()) as tmp:
        storage = f"sqlite:///{tmp}/studies.db"
        # The source study measures other noise than the targets, which share theirs (a paired comparison).
        source = run_arm(
            config_path, strategy, "sequential", seed + 1000, trials, source_optimum, noise, search,
            storage=storage, study_name="source",
        )  # fmt: skip
        out["source"] = source["fractions"]
        for name, optimum in targets:
            for arm in ARMS:
                r = run_arm(
                    config_path, strategy, "sequential", seed, trials, optimum, noise,
                    {**search, "warm_start_prior": arm == "warm+prior"},
                    storage=storage, study_name=f"{arm}-{name}", variant=name,
                    warm_start=None if arm == "cold" else "source",
                )  # fmt: skip
                out[f"{name}/{arm}"] = r["fractions"]
    return out


#: The warm-start benchmark's arms: no warm start; the warm start (the source's top configs run first); and
#: the warm start with the source's results as the sampler's prior (``[search] warm_start_prior``).
ARMS = ("cold", "warm", "warm+prior")


def warm_start_benchmark(args: argparse.Namespace, config: Any) -> int:
    """``--warm-start``: trials to 98% of each variant's optimum, cold and warm-started from a study on the model."""
    from tuner.sim.inprocess import VARIANTS, true_objective, true_optimum

    names = [n for n in args.warm_start.split(",") if n]
    unknown = [n for n in names if n not in VARIANTS]
    if unknown:
        raise SystemExit(f"unknown variant(s) {unknown}: one of {', '.join(VARIANTS)}")
    source_optimum, source_best = true_optimum(config)
    print(f"model: optimum {source_optimum:.1f} at {source_best}")
    targets = []
    for name in names:
        optimum, best = true_optimum(config, VARIANTS[name])
        old = true_objective(config, source_best, VARIANTS[name]) / optimum
        print(f"{name} ({VARIANTS[name]}): optimum {optimum:.1f} at {best}; the model's best config is {old:.1%} here")
        targets.append((name, optimum))
    strategy = args.strategies.split(",")[0]
    tasks = [
        (args.config, strategy, seed, args.trials, args.noise, {}, source_optimum, targets)
        for seed in range(args.seeds)
    ]
    t1 = time.monotonic()
    with multiprocessing.get_context("fork").Pool(args.jobs) as pool:
        results = pool.map(run_warm, tasks, chunksize=1)
    print(f"{len(tasks)} seeds in {time.monotonic() - t1:.0f} s on {args.jobs} processes ({strategy})\n")
    capped = args.trials + 1
    print(
        f"| variant | start | median trials to {TARGET:.0%} | seeds reaching it | median @10 | median @{args.trials} "
        f"| worst @{args.trials} | minus cold's trials to {TARGET:.0%}: median / worst seed |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for name, _ in targets:
        reach = {arm: [first_reaching(r[f"{name}/{arm}"], TARGET) for r in results] for arm in ARMS}
        for arm in ARMS:
            fr = [r[f"{name}/{arm}"] for r in results]
            med = statistics.median(reach[arm])
            diffs = [min(w, capped) - min(c, capped) for w, c in zip(reach[arm], reach["cold"], strict=True)]
            diff = f"{statistics.median(diffs):+.1f} / {max(diffs):+d}" if arm != "cold" else ""
            print(
                f"| {name} | {arm} | {med if math.isfinite(med) else '>' + str(args.trials)} "
                f"| {sum(1 for x in reach[arm] if math.isfinite(x))}/{len(fr)} "
                f"| {statistics.median(at(f, 10) for f in fr):.1%} "
                f"| {statistics.median(at(f, args.trials) for f in fr):.1%} "
                f"| {min(at(f, args.trials) for f in fr):.1%} | {diff} |"
            )
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default=str(REPO / "studies" / "demo.toml"))
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument("--noise", type=float, default=0.02)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--strategies", default=",".join(STRATEGIES))
    parser.add_argument("--n-startup-trials", type=int, default=None, help="override [search] for 'tune'")
    parser.add_argument("--prune-against", choices=("best", "baseline"), default=None)
    parser.add_argument(
        "--repeats",
        default="sequential",
        help="comma-separated repeat modes to compare: fixed (--fixed-repeats, no early stop), sequential "
        "(the study file's policy), sequential:P (the same with precision P, e.g. sequential:0.03)",
    )
    parser.add_argument("--fixed-repeats", type=int, default=2, help="repeats per scenario of the fixed mode")
    parser.add_argument(
        "--fixed-warmup-requests",
        type=int,
        default=1,
        help="warm-up requests before every scenario in the fixed and sequential-always modes (the study "
        "files had 1 before warmup = \"auto\")",
    )
    parser.add_argument(
        "--cold-start",
        type=float,
        default=0.0,
        help="the model server's first pass at each batch size is this fraction slower (0: warm once ready)",
    )
    parser.add_argument(
        "--warm-start",
        metavar="VARIANTS",
        default=None,
        help="the warm-start benchmark on these variants of the model's server (comma-separated names of "
        "tuner.sim.inprocess.VARIANTS), with the first of --strategies",
    )
    parser.add_argument(
        "--load-time",
        type=float,
        default=LOAD_TIME_S,
        help="a restart's weight load in modelled seconds (default: %(default)s, a big model's; the model adds its "
        "CUDA-graph capture and warm-up)",
    )
    parser.add_argument(
        "--within", type=int, default=6, help="the restarts in which a config meeting the SLO should be found"
    )
    parser.add_argument("--list-samplers", action="store_true", help="list the samplers tune:NAME can name")
    args = parser.parse_args()
    if args.list_samplers:
        print("tpe: tune's own (tuner.search.TPE_SETTINGS, random draws while no trial is feasible)")
        for name, settings in TPE_VARIANTS.items():
            print(f"{name}: TPE with {settings}")
        for name, text in OTHER_SAMPLERS.items():
            print(f"{name}: {text}")
        return 0

    from tuner.config import load_config

    t0 = time.monotonic()
    config = load_config(args.config)
    if args.warm_start:
        return warm_start_benchmark(args, config)
    optimum, best_params = cached_optimum(args.config, config)
    print(f"true optimum {optimum:.1f} tok/s (weighted geomean) at {best_params}  [{time.monotonic() - t0:.0f} s]")
    from tuner.sim.inprocess import true_objective

    print(f"baseline: {true_objective(config, config.baseline) / optimum:.1%} of the optimum")
    search: dict[str, Any] = {}
    if args.n_startup_trials is not None:
        search["n_startup_trials"] = args.n_startup_trials
    if args.prune_against is not None:
        search["prune_against"] = args.prune_against
    search["fixed_repeats"] = args.fixed_repeats
    search["fixed_warmup_requests"] = args.fixed_warmup_requests
    search["cold_start"] = args.cold_start
    search["load_time"] = args.load_time
    modes = [m for m in args.repeats.split(",") if m]
    strategies = [f"{s} ({m})" for s in args.strategies.split(",") if s for m in modes]
    tasks = [
        (args.config, s, m, seed, args.trials, optimum, args.noise, dict(search))
        for s in args.strategies.split(",")
        if s
        for m in modes
        for seed in range(args.seeds)
    ]
    t1 = time.monotonic()
    with multiprocessing.get_context("fork").Pool(args.jobs) as pool:
        results = pool.map(run_one, tasks, chunksize=1)
    print(f"{len(tasks)} studies in {time.monotonic() - t1:.0f} s on {args.jobs} processes\n")

    checkpoints = [k for k in CHECKPOINTS if k <= args.trials]
    header = (
        "| strategy | "
        + " | ".join(f"median @{k}" for k in checkpoints)
        + f" | worst @{args.trials} | median trials to {TARGET:.0%} | seeds reaching {TARGET:.0%} "
        + "| failed/pruned trials (median) | benchmark time saved by pruning (modelled) "
        + f"| benchmark time (modelled, all seeds; share of {modes[0]}) | repeats per scenario (mean) "
        + f"| confirmed best @{args.trials}: median / worst | confirmation time (modelled) |"
    )
    print(header)
    print("|" + "---|" * (header.count("|") - 1))
    first_mode_bench: dict[str, float] = {}
    for s in strategies:
        rows = [r for r in results if r["strategy"] == s]
        strategy = s.partition(" (")[0]
        fr = [r["fractions"] for r in rows]
        reach = [first_reaching(f, TARGET) for f in fr]
        med_reach = statistics.median(reach)
        reached = sum(1 for x in reach if math.isfinite(x))
        saved = sum(r["saved_s"] for r in rows)
        bench = sum(r["bench_s"] for r in rows)
        first = first_mode_bench.setdefault(strategy, bench)
        # The share of what the benchmark would have cost without pruning (spent + saved), so it stays <= 100%.
        share = f"{saved:.0f} s ({saved / (bench + saved):.0%})" if bench + saved else "-"
        cells = [f"{statistics.median(at(f, k) for f in fr):.1%}" for k in checkpoints]
        print(
            f"| {s} | "
            + " | ".join(cells)
            + f" | {min(at(f, args.trials) for f in fr):.1%}"
            + f" | {med_reach if math.isfinite(med_reach) else '>' + str(args.trials)}"
            + f" | {reached}/{len(rows)}"
            + f" | {statistics.median(r['failed'] for r in rows):.0f}"
            + f"/{statistics.median(r['pruned'] for r in rows):.0f}"
            + f" | {share}"
            + f" | {bench / 3600:.3f} h ({bench / first:.0%}) | {statistics.fmean(r['repeats'] for r in rows):.2f}"
            + f" | {statistics.median(r['confirmed'] for r in rows):.1%} / {min(r['confirmed'] for r in rows):.1%}"
            + f" | {sum(r['confirm_s'] for r in rows) / 3600:.2f} h |"
        )
    print_costs(strategies, results, within=args.within, load_time=args.load_time)
    print("\ngrid has only its 4 distinct configs: its later columns repeat its final value.")
    for r in results:
        if r["stopped"]:  # judged on the trials it had (its benchmark time is not counted)
            print(f"{r['strategy']} seed {r['seed']} stopped after {len(r['fractions'])} trials: {r['stopped']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
