#!/usr/bin/env python3
"""How a fleet of workers on one study scales: W worker processes, one PostgreSQL study, the in-process model.

Each worker is a separate process running the real loop (:func:`tuner.study.run_study`: claims, slots, ask/tell,
duplicate handling, the TrialRunner story) against its own in-process model server (no sleeps: a trial costs
what the loop and the database cost). All W workers start together on a fresh study and run until it holds N
counted trials. Per W (averaged over seeds):

* trials/min     counted trials per wall-clock minute (the loop's and the database's overhead, not the GPU's:
                 with real servers a trial takes minutes and the fleet scales with the number of servers);
* restarts dup.  server restarts spent on a config another trial had already started (retries of killed
                 trials aside); the goal is 0;
* re-sampled     proposals that matched a trial running elsewhere and were re-drawn before any restart;
* counted        counted trials in the study vs N (must equal N);
* quality        the TRUE (noise-free) value of the config the study reports as best, as a fraction of the
                 true optimum, at equal total trials: parallel TPE (constant liar) loses some efficiency.

PostgreSQL: a private cluster like the tests' (Debian's postgresql binaries); ``--storage sqlite`` uses a file.

Usage::

    .venv/bin/python scripts/bench_workers.py --workers 1,2,4,8,16 --trials 40 --seeds 3
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import inspect
import multiprocessing
import signal
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))


def _truth(name: str) -> Any:
    try:
        import tuner.sim.inprocess as where
    except ImportError:  # before the architecture refactor
        import tuner.search as where  # type: ignore[no-redef]
    return getattr(where, name)


def _model_run_args(config: Any, run_study: Any) -> dict[str, Any]:
    """The in-process model server as run_study takes it, in this checkout or in one from before the fleet work."""
    try:
        from tuner.config import base_spec
    except ImportError:  # before the launch spec moved beside the config
        from tuner.target import base_spec  # type: ignore[attr-defined,no-redef]

    try:
        from tuner.sim.inprocess import ModelService, model_parts, model_target
    except ImportError:  # before the architecture refactor: tuner.search, run_study(service=...)
        from tuner.search import ModelService, model_parts  # type: ignore[attr-defined,no-redef]

        return {"service": ModelService(base=base_spec(config.target)), "model_parts": model_parts}
    service = ModelService(base=base_spec(config.target))
    return {"target": model_target(config, service), "model_parts": model_parts}


def worker(config_path: str, storage: str, study: str, trials: int, seed: int, index: int, barrier: Any) -> None:
    import optuna

    from tuner.config import load_config
    from tuner.study import Console, run_study

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    config = load_config(config_path)
    config = replace(config, study=replace(config.study, seed=seed, on_exit="stop"))
    kwargs: dict[str, Any] = {}
    if "worker_name" in inspect.signature(run_study).parameters:  # absent before the fleet work: the "before" run
        kwargs["worker_name"] = f"bench-{index}"
    with tempfile.TemporaryDirectory(prefix="bench-workers-") as tmp:
        config = replace(config, study=replace(config.study, artifacts_dir=Path(tmp)))
        kwargs.update(_model_run_args(config, run_study))
        model_parts = kwargs.pop("model_parts")
        barrier.wait(timeout=600)
        run_study(
            config,
            trials=trials,
            storage=storage,
            study_name=study,
            parts_factory=functools.partial(model_parts, noise=0.02, seed=seed * 100 + index),
            console=Console(stream=open("/dev/null", "w"), live=False),  # noqa: SIM115 - lives as long as the process
            **kwargs,
        )


def run_fleet(config_path: str, storage: str, study: str, workers: int, trials: int, seed: int) -> float:
    """Seconds from the moment all W workers are ready to the moment the last one stops."""
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(workers + 1)
    procs = [
        ctx.Process(target=worker, args=(config_path, storage, study, trials, seed, i, barrier)) for i in range(workers)
    ]
    for p in procs:
        p.start()
    barrier.wait(timeout=600)
    t0 = time.monotonic()
    for p in procs:
        p.join()
    wall = time.monotonic() - t0
    failed = [p.exitcode for p in procs if p.exitcode != 0]
    if failed:
        raise RuntimeError(f"{len(failed)} of {workers} workers failed (exit codes {failed})")
    return wall


def measure(config: Any, storage: str, study_name: str, optimum: float) -> dict[str, Any]:
    import optuna

    true_objective = _truth("true_objective")
    from tuner.trials import best_trials, is_counted

    # The stored user attrs by name (the study format every checkout writes), not tuner.trials.record_of, which
    # older checkouts do not have.

    study = optuna.load_study(study_name=study_name, storage=storage)
    trials = study.get_trials(deepcopy=False)
    seen: set[str] = set()
    duplicates = 0
    for t in sorted(trials, key=lambda t: t.number):
        if "command" not in t.user_attrs or t.user_attrs.get("retry_of") is not None:
            continue
        key = repr(sorted(t.params.items()))
        duplicates += key in seen
        seen.add(key)
    best = best_trials(study)
    return {
        "counted": sum(1 for t in trials if is_counted(t)),
        "duplicates": duplicates,
        "resampled": sum(
            1 for t in trials if t.state.name == "FAIL" and t.user_attrs.get("duplicate_of") is not None
        ),
        "baselines": sum(1 for t in trials if t.user_attrs.get("baseline") and is_counted(t)),
        "slots": sorted(t.user_attrs.get("slot", -1) for t in trials if is_counted(t)),
        "quality": true_objective(config, best[0].params) / optimum if best else 0.0,
    }


@contextlib.contextmanager
def database(kind: str) -> Iterator[str]:
    if kind == "sqlite":
        with tempfile.TemporaryDirectory(prefix="bench-workers-db-") as tmp:
            yield f"sqlite:///{tmp}/fleet.db"
        return
    from fixtures_postgres import private_postgres

    with private_postgres() as url:
        yield url


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default=str(REPO / "studies" / "demo.toml"))
    parser.add_argument("--workers", default="1,2,4,8,16")
    parser.add_argument("--trials", type=int, default=40)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--storage", choices=("postgresql", "sqlite"), default="postgresql")
    args = parser.parse_args()
    # A SIGTERM unwinds like Ctrl-C, so the private PostgreSQL cluster is stopped and removed.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))

    from tuner.config import load_config

    true_optimum = _truth("true_optimum")

    config = load_config(args.config)
    optimum, _ = true_optimum(config)
    counts = [int(w) for w in args.workers.split(",")]
    print(f"{args.config}: N = {args.trials} trials, {args.seeds} seeds, {args.storage}, true optimum {optimum:.1f}")
    print("| W | trials/min | restarts dup. (sum) | re-sampled (sum) | counted vs N | baselines | quality (mean) |")
    print("|---|---|---|---|---|---|---|")
    with database(args.storage) as storage:
        for w in counts:
            rows, walls = [], []
            for seed in range(args.seeds):
                name = f"fleet-w{w}-s{seed}-{time.time_ns()}"
                walls.append(run_fleet(args.config, storage, name, w, args.trials, seed))
                rows.append(measure(config, storage, name, optimum))
            counted = sorted({r["counted"] for r in rows})
            print(
                f"| {w} | {args.trials * 60 / statistics.mean(walls):.0f} "
                f"| {sum(r['duplicates'] for r in rows)} | {sum(r['resampled'] for r in rows)} "
                f"| {'/'.join(map(str, counted))} vs {args.trials} "
                f"| {'/'.join(str(b) for b in sorted({r['baselines'] for r in rows}))} "
                f"| {statistics.mean(r['quality'] for r in rows):.1%} |",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
