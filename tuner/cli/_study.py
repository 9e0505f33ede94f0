from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from tuner.cli._common import add_study_args, config_from_args, study_location
from tuner.cli._dryrun import add_dry_run_arg, dry_run


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("start", help="run the study until it holds --trials counted trials")
    add_study_args(p)
    p.add_argument("--trials", type=_positive, default=None, help="total trials to reach (default: the config's)")
    p.add_argument("--force-config", action="store_true", help="continue a study even though its search space changed")
    _skip_preflight_arg(p)
    budget = p.add_mutually_exclusive_group()
    budget.add_argument(
        "--hours", type=float, default=None, help="time budget: start no trial expected to end after it"
    )
    budget.add_argument("--until", metavar="HH:MM", default=None, help="deadline (local time), e.g. 07:30")
    p.add_argument(
        "--allow-mixed-targets",
        action="store_true",
        help="join a study whose servers differ from this one (GPUs, driver, model); the report splits by target",
    )
    p.add_argument("--fleet-host", type=int, default=None, help=argparse.SUPPRESS)  # one worker of a fleet
    add_dry_run_arg(p)
    p.set_defaults(func=_start)

    p = sub.add_parser("resume", help="continue a study with the config stored in it")
    p.add_argument("--storage", metavar="URL", help="Optuna storage URL (default: the demo study's)")
    p.add_argument("--study", metavar="NAME", help="study name (needed when the storage holds several)")
    p.add_argument(
        "--trials", type=_positive, default=None, help="total trials to reach (default: the stored config's)"
    )
    _skip_preflight_arg(p)
    p.set_defaults(func=_resume)

    p = sub.add_parser("status", help="every trial: state, params, score, per-scenario tok/s, failure reason")
    add_study_args(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_status)

    p = sub.add_parser("best", help="the best feasible config (the Pareto front for multi-objective studies)")
    add_study_args(p)
    p.add_argument("--json", action="store_true")
    p.add_argument(
        "--confirm",
        action="store_true",
        help="first re-measure the top [search] confirm_top configs (default 3) interleaved on the server",
    )
    p.set_defaults(func=_best)


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of trials, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected at least 1 trial, got {value}")
    return value


def _skip_preflight_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--skip-preflight",
        action="store_true",
        help="start without checking program, port, --port and writable directories first (experts)",
    )


def _start(args: argparse.Namespace) -> int:
    from tuner.study import run_study

    config = config_from_args(args)
    if args.dry_run is not None:
        return dry_run(args, config)
    hosts = config.target.ssh.hosts if config.target.ssh is not None else ()
    if len(hosts) > 1 and args.fleet_host is None:
        from tuner.cli._fleet import run_fleet

        return run_fleet(args, config)
    if args.fleet_host is not None:
        import signal

        # SIGINT is how the launcher stops its workers. A launcher started in the background of a script has
        # SIGINT ignored, and a worker would inherit that and never stop: take it back.
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if hosts:
        from tuner.config import fleet_member

        config = fleet_member(config, args.fleet_host or 0)
    summary = run_study(
        config,
        trials=args.trials,
        storage=args.storage,
        study_name=args.study,
        force_config=args.force_config,
        preflight=not args.skip_preflight,
        deadline=_deadline(args),
        allow_mixed_targets=args.allow_mixed_targets,
    )
    _print_summary(summary)
    return 0


def _resume(args: argparse.Namespace) -> int:
    from tuner.cli._common import DEFAULT_CONFIG
    from tuner.config import load_config
    from tuner.study import config_from_study, run_study, storage_faults

    storage = args.storage or load_config(DEFAULT_CONFIG).study.storage
    with storage_faults(storage):
        config = config_from_study(storage, args.study)
    summary = run_study(
        config,
        trials=args.trials,
        storage=storage,
        study_name=args.study or config.study.name,
        preflight=not args.skip_preflight,
    )
    _print_summary(summary)
    return 0


def _confirm(args: argparse.Namespace) -> None:
    """``tune best --confirm``: the study loop with nothing left to run, so only the confirmation runs."""
    from tuner.study import run_study

    config, storage, name = study_location(args)
    run_study(config, trials=0, storage=storage, study_name=name, confirm=True)


def _deadline(args: argparse.Namespace) -> float | None:
    import time

    from tuner.errors import TuneError
    from tuner.study._budget import parse_until

    if args.hours is not None:
        if args.hours <= 0:
            raise TuneError(f"--hours must be > 0, got {args.hours}")
        return time.time() + args.hours * 3600
    if args.until is not None:
        try:
            return parse_until(args.until)
        except ValueError as exc:
            raise TuneError(str(exc)) from None
    return None


def _print_summary(summary: Any) -> None:
    best = (
        f"best trial #{summary.best_number}: {' / '.join(f'{v:.1f}' for v in summary.best_values or ())}"
        " (`tune best` prints its command)"
        if summary.best_number is not None
        else "no feasible trial"
    )
    from tuner.study._budget import UNTIL_DEADLINE

    of = f"/{summary.target}" if summary.target != UNTIL_DEADLINE else ""
    print(
        f"study {summary.study_name}: {summary.counted}{of} trials ({summary.ran} run now, "
        f"{summary.seconds:.0f} s); {best}"
    )


def _load(args: argparse.Namespace) -> tuple[Any, Any]:
    from tuner.study import load_existing, storage_faults

    config, storage, name = study_location(args)
    with storage_faults(storage):
        return config, load_existing(storage, name)


def trial_row(t: Any, scenarios: list[str]) -> dict[str, Any]:
    from tuner.report._facts import outcome
    from tuner.trials import attrs, client_bound_scenarios

    row: dict[str, Any] = {
        "number": t.number,
        "state": t.state.name,
        "values": t.values,
        "params": t.params,
        "baseline": bool(t.user_attrs.get(attrs.BASELINE)),
        "seed": t.user_attrs.get(attrs.SEED),
        "branch": t.user_attrs.get(attrs.BRANCH),
        "correct": t.user_attrs.get(attrs.CORRECT),
        "gate": t.user_attrs.get(attrs.GATE),
        "feasible": all(v <= 0 for v in t.constraints.values()),
        "tok_s": {s: t.user_attrs.get(attrs.scenario_key(s, "tok_s")) for s in scenarios},
        "scenario_scores": {
            s: {f: t.user_attrs.get(attrs.scenario_key(s, f)) for f in ("score", "point", "half_width", "stopped")}
            for s in scenarios
        },
        "repeats": {s: len(t.user_attrs.get(attrs.scenario_key(s, "repeats")) or ()) for s in scenarios},
        "warmup": {s: t.user_attrs.get(attrs.scenario_key(s, "warmup")) for s in scenarios},
        "accept_length": {s: t.user_attrs.get(attrs.scenario_key(s, "accept_length")) for s in scenarios},
        # Scenarios measured while the load generator was the bottleneck: their figures understate the server.
        "client_bound": client_bound_scenarios(t),
        "failure_phase": t.user_attrs.get(attrs.FAILURE_PHASE),
        "failure_reason": t.user_attrs.get(attrs.FAILURE_REASON),
        "failure_kind": t.user_attrs.get(attrs.FAILURE_KIND),
        "outcome": outcome(t),
        "duplicate_of": t.user_attrs.get(attrs.DUPLICATE_OF),
        "rejected": bool(t.user_attrs.get(attrs.REJECTED)),
        "command": t.user_attrs.get(attrs.COMMAND),
        "env": t.user_attrs.get(attrs.ENV),
        "worker": t.user_attrs.get(attrs.WORKER_NAME),
        "target": t.user_attrs.get(attrs.TARGET_FINGERPRINT),
    }
    return row


def _status(args: argparse.Namespace) -> int:
    from tuner.space import format_value
    from tuner.study import counted_trials, describe_warmups
    from tuner.trials import attrs, study_trials

    config, study = _load(args)
    scenarios = [s.name for s in config.benchmark.scenarios]
    rows = [trial_row(t, scenarios) for t in study_trials(study)]
    if args.json:
        json.dump(rows, sys.stdout, indent=2, default=str)
        print()
        return 0
    saved = study.user_attrs.get("pruning_saved_s")
    saved_text = f"; regression pruning saved {saved:.0f} s of benchmark" if saved else ""
    target = study.user_attrs.get(attrs.TARGET_TRIALS, config.study.trials)
    print(f"study {study.study_name}: {counted_trials(study)}/{target} counted trials{saved_text}")
    # Which worker ran what matters once several share the study (`[target.ssh] hosts`, or `tune start` on each).
    fleet = len({r["worker"] for r in rows if r["worker"]}) > 1
    running = [f"#{r['number']} on {r['worker'] or '?'}" for r in rows if r["state"] == "RUNNING"]
    if running:
        print("running now: " + ", ".join(running))
    print("per scenario: score (point ± half-width) tok/s ×repeats; score = lower bound of the interval")
    warmups = describe_warmups(study, config)
    if warmups:
        print(warmups)
    head = (
        f"{'#':>4} {'state':<8} {'score':>8} {'gate':>5} "
        + " ".join(f"{s[:_COL]:>{_COL}}" for s in scenarios)
        + "  params / reason"
    )
    print(head)
    if any(r["outcome"] == "not gated (only finalists are)" for r in rows):
        print('     (gate "end": [gate] when = "final" gates the finalists only, when the study ends)')
    for r in rows:
        # A PRUNED trial carries its last intermediate value in Optuna: not a score.
        score = "/".join(f"{v:.1f}" for v in r["values"]) if r["values"] and r["state"] == "COMPLETE" else "-"
        toks = " ".join(f"{_scenario_cell(r, s):>{_COL}}" for s in scenarios)
        notes = []
        if r["baseline"]:
            notes.append("baseline")
        if r["seed"] is not None:
            notes.append(f"seed {r['seed']}")
        if r["branch"]:
            notes.append("branch " + " ".join(f"{k}={format_value(v)}" for k, v in r["branch"].items()))
        if r["correct"] is False:
            notes.append(f"INFEASIBLE gate {r['gate']}")
        gate = r["gate"] or "-"
        if r["outcome"] == "not gated (behind the best)":
            notes.append(f"gate {gate}")
            gate = "skip"
        elif r["outcome"] == "not gated (only finalists are)":
            gate = "end"
        elif gate.endswith(_AT_THE_END):
            gate = gate.removesuffix(_AT_THE_END)
            notes.append("gated at the end")
        if r["duplicate_of"] is not None:
            notes.append(f"repeat of #{r['duplicate_of']}")
        if r["client_bound"]:
            notes.append("CLIENT-BOUND " + ",".join(r["client_bound"]))
        if r["failure_reason"]:
            kind = f"{r['failure_kind']}, " if r["failure_kind"] else ""
            notes.append(f"{r['outcome']} [{kind}{r['failure_phase']}] {r['failure_reason']}")
        if fleet and r["worker"]:
            notes.append(f"on {r['worker']}")
        params = " ".join(f"{k}={format_value(v)}" for k, v in r["params"].items())
        print(
            f"{r['number']:>4} {r['state']:<8} {score:>8} {gate:>5} {toks}  {params}"
            + (f"  <{'; '.join(notes)}>" if notes else "")
        )
    return 0


_COL = 22
_AT_THE_END = " at the end"


def _scenario_cell(row: dict[str, Any], scenario: str) -> str:
    """``140.1 (142.6 ± 2.5) ×2`` from a status row; ``-`` when the scenario was not measured."""
    fig = row["scenario_scores"][scenario]
    if not isinstance(fig["score"], int | float):
        tok_s = row["tok_s"][scenario]
        return f"{tok_s:.1f}" if isinstance(tok_s, int | float) else "-"  # a trial from before scores were stored
    point = fig["point"] if isinstance(fig["point"], int | float) else fig["score"]
    hw = f" ± {fig['half_width']:.1f}" if isinstance(fig["half_width"], int | float) else ""
    return f"{fig['score']:.1f} ({point:.1f}{hw}) ×{row['repeats'][scenario]}"


def _best(args: argparse.Namespace) -> int:
    from tuner.search import per_scenario_best
    from tuner.space import format_value, render
    from tuner.study import best_trials
    from tuner.study._confirm import confirmation_text, recommended_trial
    from tuner.target import base_spec
    from tuner.trials import attrs

    if args.confirm:
        _confirm(args)
    config, study = _load(args)
    scenarios = [s.name for s in config.benchmark.scenarios]
    best = best_trials(study)
    recommended = recommended_trial(study)
    if len(best) == 1 and recommended is not None:
        best = [recommended]  # the confirmed winner, when re-measurement overturned the first ranking
    if not best:
        print("no feasible completed trial yet", file=sys.stderr)
        return 1
    out = []
    for t in best:
        row = trial_row(t, scenarios)
        spec = render(config.space, base_spec(config.target), t.params)
        row["launch"] = spec.shell_text()
        out.append(row)
    if args.json:
        json.dump(out if len(out) > 1 else out[0], sys.stdout, indent=2, default=str)
        print()
        return 0
    title = "Pareto front" if len(out) > 1 else "best feasible trial"
    print(f"{title} of study {study.study_name} ({', '.join(study.metric_names or [])}):")
    confirmed = confirmation_text(study)
    if confirmed:
        print(confirmed)
    for r in out:
        print(f"  trial #{r['number']}: values {r['values']}")
        print("    params: " + " ".join(f"{k}={format_value(v)}" for k, v in r["params"].items()))
        print("    tok/s:  " + " ".join(f"{k}={v}" for k, v in r["tok_s"].items()))
        if r["gate"]:
            print(f"    gate:   {r['gate']}")
        print(f"    launch: {r['launch']}")
        if r["client_bound"]:
            print(
                f"    WARNING: measured while the load generator was the bottleneck in {', '.join(r['client_bound'])}: "
                "its figures understate the server; raise [benchmark] client_processes and re-measure"
            )
    # Which config to run for one kind of workload, whatever the overall objective says.
    per_scenario = per_scenario_best(study, scenarios)
    if per_scenario:
        print("best feasible config per scenario:")
        width = max(len(name) for name in per_scenario)
        for name, t in per_scenario.items():
            tok_s = t.user_attrs[attrs.scenario_key(name, "tok_s")]
            params = " ".join(f"{k}={format_value(v)}" for k, v in t.params.items())
            print(f"  {name:<{width}}  {tok_s:>9.1f} tok/s  trial #{t.number}: {params}")
    return 0
