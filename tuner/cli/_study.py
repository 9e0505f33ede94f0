"""``tune start`` / ``resume`` / ``finish`` (run a study), ``tune status`` and ``tune best`` (read one).

Every output names the recommendation (:func:`tuner.trials.recommended`) with the figures of
:mod:`tuner.report`: the same trial and the same numbers as the report, the exports and the dashboard.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from typing import TYPE_CHECKING, Any

from tuner.cli._common import add_study_args, config_from_args, study_location
from tuner.cli._dryrun import add_dry_run_arg, dry_run
from tuner.cli._exits import NO_ANSWER
from tuner.cli._run import add_detach_args

if TYPE_CHECKING:
    import optuna

    from tuner.config import StudyConfig
    from tuner.trials import StudyRecord


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
    _warm_start_args(p)
    add_dry_run_arg(p)
    add_detach_args(p)
    p.set_defaults(func=_start)

    p = sub.add_parser("resume", help="continue a study with the config stored in it")
    p.add_argument("--storage", metavar="URL", help="Optuna storage URL (default: the demo study's)")
    p.add_argument("--study", metavar="NAME", help="study name (needed when the storage holds several)")
    p.add_argument(
        "--trials", type=_positive, default=None, help="total trials to reach (default: the stored config's)"
    )
    _skip_preflight_arg(p)
    add_detach_args(p)
    p.set_defaults(func=_resume)

    p = sub.add_parser(
        "finish",
        help="what the end of a study does, now: re-measure the top configs and gate the finalists (no new trials)",
    )
    add_study_args(p)
    add_detach_args(p)
    p.set_defaults(func=_finish)

    p = sub.add_parser("status", help="every trial: what became of it, score, per-scenario tok/s, params")
    add_study_args(p)
    p.add_argument("--json", action="store_true", help="every trial's row as JSON")
    p.add_argument("--wide", action="store_true", help="do not fit rows to the terminal's width")
    p.set_defaults(func=_status)

    p = sub.add_parser("best", help="the recommended config (and the Pareto front of a multi-objective study)")
    add_study_args(p)
    p.add_argument("--json", action="store_true", help="the recommendation as JSON")
    p.add_argument(
        "--confirm",
        action="store_true",
        help="first re-measure the top [search] confirm_top configs (default 3) interleaved on the server, "
        "even if they were confirmed already",
    )
    p.set_defaults(func=_best)


def _warm_start_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--warm-start",
        metavar="STUDY",
        default=None,
        help="start a new study from another's results: its top configs first (all of it as the sampler's prior "
        "too with [search] warm_start_prior = true)",
    )
    p.add_argument("--warm-start-storage", metavar="URL", default=None, help="where that study is (default: --storage)")


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
    from tuner.cli._run import detach, recorded

    config = _warm_started(config_from_args(args), args)
    if args.dry_run is not None:
        return dry_run(args, config)
    study, storage = args.study or config.study.name, args.storage or config.study.storage
    args.deadline = _deadline(args)  # a bad --hours or --until is the command line's, before anything starts
    if not args.skip_preflight:
        from tuner.cli._capacity import require_fit

        require_fit(config)  # requests the server cannot hold fail the first trial: say so before it starts
    if args.fleet_host is not None:  # one worker of a fleet: its launcher records the run and notifies
        return _fleet_worker(args, config)
    if args.detach and args.detached_log is None:
        return detach(config, args, study=study, storage=storage)
    with recorded(config, args, study=study, storage=storage) as run:
        hosts = config.target.ssh.hosts if config.target.ssh is not None else ()
        if len(hosts) > 1:
            from tuner.cli._fleet import run_fleet

            run.held()  # its workers hold the servers' locks: the launcher is the study's run from here
            run.under_way()  # each worker runs its own preflight and says why it stops in the log
            run.status = run_fleet(args, config)
            return run.status
        if hosts:
            from tuner.config import fleet_member

            config = fleet_member(config, 0)
        run.ran, answered = _run_to_the_end(config, args, on_locked=run.held, on_open=run.under_way)
        run.status = 0 if answered else NO_ANSWER
    return run.status


def _fleet_worker(args: argparse.Namespace, config: Any) -> int:
    import signal

    from tuner.config import fleet_member

    # SIGINT is how the launcher stops its workers. A launcher started in the background of a script has
    # SIGINT ignored, and a worker would inherit that and never stop: take it back.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    _, answered = _run_to_the_end(fleet_member(config, args.fleet_host), args)
    return 0 if answered else NO_ANSWER


def _run_to_the_end(
    config: Any, args: argparse.Namespace, *, on_locked: Any = None, on_open: Any = None
) -> tuple[int, bool]:
    """``tune start``'s study loop and its last lines; the trials it ran, and whether it has an answer."""
    from tuner.study import run_study

    summary = run_study(
        config,
        trials=args.trials,
        storage=args.storage,
        study_name=args.study,
        force_config=args.force_config,
        preflight=not args.skip_preflight,
        deadline=args.deadline,
        allow_mixed_targets=args.allow_mixed_targets,
        on_locked=on_locked,
        on_open=on_open,
    )
    return summary.ran, _print_end(config, summary)


def _warm_started(config: Any, args: argparse.Namespace) -> Any:
    """The study file's config with ``--warm-start`` / ``--warm-start-storage`` in its ``[search]``."""
    import dataclasses

    from tuner.errors import ConfigError

    search = config.search
    if args.warm_start is None and args.warm_start_storage is None:
        return config
    name = args.warm_start or search.warm_start
    if name is None:
        raise ConfigError(file=None, key="--warm-start-storage", expected="--warm-start STUDY to go with it")
    storage = args.warm_start_storage or search.warm_start_storage
    return dataclasses.replace(
        config, search=dataclasses.replace(search, warm_start=name, warm_start_storage=storage)
    )


def _resume(args: argparse.Namespace) -> int:
    from tuner.cli._common import DEFAULT_CONFIG
    from tuner.cli._run import detach, recorded
    from tuner.config import load_config
    from tuner.study import config_from_study, run_study, storage_faults

    storage = args.storage or load_config(DEFAULT_CONFIG).study.storage
    with storage_faults(storage):
        config = config_from_study(storage, args.study)
    study = args.study or config.study.name
    if args.detach and args.detached_log is None:
        return detach(config, args, study=study, storage=storage)
    with recorded(config, args, study=study, storage=storage) as run:
        with storage_faults(storage):
            trials = args.trials if args.trials is not None else _started_with(storage, study)
        summary = run_study(
            config,
            trials=trials,
            storage=storage,
            study_name=study,
            preflight=not args.skip_preflight,
            on_locked=run.held,
            on_open=run.under_way,
        )
        run.ran = summary.ran
        run.status = 0 if _print_end(config, summary) else NO_ANSWER
    return run.status


def _started_with(storage: str, name: str) -> int | None:
    """The trial target the study was last run to (None: none recorded, or a run to a deadline)."""
    from tuner.study import UNTIL_DEADLINE, load_existing
    from tuner.trials import study_record

    target = study_record(load_existing(storage, name)).target_trials
    return target if target is not None and 0 < target < UNTIL_DEADLINE else None


def _finish(args: argparse.Namespace) -> int:
    """``tune finish``: the study loop with nothing left to run: the confirmation and the gate, if not done."""
    from tuner.cli._run import detach, recorded
    from tuner.study import run_study

    config, storage, name = study_location(args)
    if args.detach and args.detached_log is None:
        return detach(config, args, study=name, storage=storage)
    with recorded(config, args, study=name, storage=storage) as run:
        summary = run_study(
            config, trials=0, storage=storage, study_name=name, on_locked=run.held, on_open=run.under_way
        )
        run.ran = summary.ran
        run.status = 0 if _print_end(config, summary, more=False) else NO_ANSWER
    return run.status


def _confirm(args: argparse.Namespace) -> None:
    """``tune best --confirm``: the study loop with nothing left to run, so only the confirmation runs."""
    from tuner.study import run_study

    config, storage, name = study_location(args)
    run_study(config, trials=0, storage=storage, study_name=name, confirm=True)


def _deadline(args: argparse.Namespace) -> float | None:
    import time

    from tuner.errors import TuneError
    from tuner.study import parse_until

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


def _print_end(config: Any, summary: Any, *, more: bool = True) -> bool:
    """The end of a run in at most seven lines: what ran (and, for a study that was complete already, how to run
    more: ``more``), the recommendation, its launch command, how to deploy. Whether there is a recommendation."""
    from tuner.report import closest_slo_lines, launch_text, recommendation_lines, tune_command
    from tuner.study import UNTIL_DEADLINE, load_existing
    from tuner.trials import recommended, study_record

    study = load_existing(summary.storage, summary.study_name)
    # `tune finish` runs to no new trial (a target of 0): the study's own target is the one to show.
    stored = study_record(study).target_trials
    target = summary.target or (UNTIL_DEADLINE if stored is None else stored)
    of = f"/{target}" if target != UNTIL_DEADLINE else ""
    space = f"; all {summary.space_size} configs of the space were measured" if summary.exhausted else ""
    ran = f"{summary.ran} run now, {summary.seconds:.0f} s"
    print(f"study {summary.study_name}: {summary.counted}{of} trials ({ran}){space}")
    if more and summary.ran == 0 and of and summary.counted >= summary.target and not summary.exhausted:
        print(_complete_text(config, summary))
    rec = recommended(study)
    if rec is None:
        slo = closest_slo_lines(study, config)
        print("\n".join(slo) if slo else "no feasible trial: nothing to recommend (`tune report` groups the "
              "failures by reason)")
        return False
    def command(verb: str) -> str:
        return tune_command(verb, config, storage=summary.storage, study=summary.study_name)

    for line in recommendation_lines(study, config, rec, finish=command("finish")):
        print(line)
    print(f"launch: {launch_text(config, rec.trial)}")
    print(f"deploy: {command('apply --best')}")
    return _kept(study, config, rec)


def _kept(study: Any, config: Any, rec: Any) -> bool:
    """Whether the recommendation keeps the study's promise: not missed on re-measurement (exit 4 otherwise)."""
    from tuner.report import slo_state
    from tuner.slo import MISSED

    return slo_state(rec.trial, config, study) != MISSED


def _complete_text(config: Any, summary: Any) -> str:
    """A study that held its trials before this run: how to run more of it, or a new one beside it."""
    from tuner.report import tune_command
    from tuner.study import resume_command

    more = resume_command(config, summary.storage, summary.counted + 10, study=summary.study_name)
    text = f"the study was complete already (it holds its {summary.counted} trials); more trials: {more}"
    start = tune_command("start", config, storage=summary.storage, study=summary.study_name)
    if start.startswith("tune start --config "):  # a new name beside it needs the study file
        text += f"; a new study: {start} --study {summary.study_name}-2"
    return text


def _load(args: argparse.Namespace) -> tuple[Any, Any, str]:
    from tuner.study import load_existing, storage_faults

    config, storage, name = study_location(args)
    with storage_faults(storage):
        return config, load_existing(storage, name), storage


# -- tune status -------------------------------------------------------------------------------------------

def _short_words() -> dict[str, str]:
    """The status table's verdict column per outcome (a key it lacks would show the trial's state instead)."""
    from tuner.trials import Outcome

    short = {
        Outcome.WRONG: "WRONG", Outcome.MISSES_SLO: "SLO miss", Outcome.SLOWER: "pruned", Outcome.ENVIRONMENT: "env",
    }  # fmt: skip
    ok = (Outcome.FEASIBLE, Outcome.NOT_GATED, Outcome.NOT_GATED_YET, Outcome.NOT_FINALIST)
    return {o: "ok" if o in ok else short.get(o, "FAILED") for o in Outcome}


def _short(row: dict[str, Any]) -> str:
    """The few letters of the status table's verdict column."""
    if row["duplicate_of"] is not None:
        return "repeat"
    if row["rejected"]:
        return "rejected"
    if row["state"] == "FAIL":
        return "env" if row["failure_kind"] == "environment" else "interr."
    return _short_words().get(row["outcome"], row["state"].lower())


def _gate_cell(row: dict[str, Any]) -> str:
    if row["outcome"] == "not gated (behind the best)":
        return "skip"
    if row["outcome"] == "not gated yet (finalists only)":
        return "end"
    if row["outcome"] == "not gated (not a finalist)":
        return "skip"
    return str(row["gate"] or "-").removesuffix(" at the end")


def _notes(row: dict[str, Any], *, fleet: bool) -> list[str]:
    from tuner.space import format_value

    notes = []
    if row["baseline"]:
        notes.append("baseline")
    if row["seed"] is not None:  # an expert seed's index, or a warm start's config (study#n)
        notes.append(f"warm start {row['seed']}" if isinstance(row["seed"], str) else f"seed {row['seed']}")
    if row["branch"]:
        notes.append("branch " + " ".join(f"{k}={format_value(v)}" for k, v in row["branch"].items()))
    if str(row["gate"] or "").endswith(" at the end"):
        notes.append("gated at the end")
    if row["client_bound"]:
        notes.append("CLIENT-BOUND " + ",".join(row["client_bound"]))
    if row["failure_reason"] and row["duplicate_of"] is None:
        notes.append(f"{row['verdict']} [{row['failure_phase']}] {row['failure_reason']}")
    elif row["outcome"] not in ("feasible", "not gated yet (finalists only)") and row["state"] == "COMPLETE":
        notes.append(row["verdict"])
    if fleet and row["worker"]:
        notes.append(f"on {row['worker']}")
    return notes


def _scenario_cell(cell: dict[str, Any]) -> str:
    """``651.6 ± 11.4 ×2``: the scenario's point estimate, half-width and repeats (``-``: not measured)."""
    if not isinstance(cell["tok_s"], int | float):
        return "-"
    hw = f" ± {cell['half_width']:.1f}" if isinstance(cell["half_width"], int | float) else ""
    return f"{cell['tok_s']:.1f}{hw} ×{cell['repeats']}"


def _status(args: argparse.Namespace) -> int:
    from tuner.cli._run import run_lines
    from tuner.report import recommendation_lines, trial_row, tune_command
    from tuner.space import format_value
    from tuner.study import describe_warmups
    from tuner.trials import recommended, study_record, study_trials

    config, study, storage = _load(args)
    rows = [trial_row(t, config) for t in study_trials(study)]
    rec = recommended(study)
    for r in rows:
        r["recommended"] = rec is not None and r["number"] == rec.trial.number
    if args.json:
        json.dump(rows, sys.stdout, indent=2, default=str)
        print()
        return 0
    facts = study_record(study)
    print(_status_head(study, config, facts))
    runs = run_lines(config, study=study.study_name, storage=storage)
    for line in [_time_left(study, config, facts, runs), *runs]:
        if line:
            print(line)
    if rec is not None:
        finish = tune_command("finish", config, storage=storage, study=study.study_name)
        for line in recommendation_lines(study, config, rec, finish=finish):
            print(line)
    # Which worker ran what matters once several share the study (`[target.ssh] hosts`, or `tune start` on each).
    fleet = len({r["worker"] for r in rows if r["worker"]}) > 1
    running = [f"#{r['number']} on {r['worker'] or '?'}" for r in rows if r["state"] == "RUNNING"]
    if running:
        print("running now: " + ", ".join(running))
    if warmups := describe_warmups(study, config):
        print(warmups)
    for line in facts.warm_start.lines() if facts.warm_start is not None else ():
        print(line)
    scenarios = [s.name for s in config.benchmark.scenarios]
    cells = [[_scenario_cell(r["scenarios"][s]) for s in scenarios] for r in rows]
    widths = [max([len(s), *(len(c[i]) for c in cells)]) for i, s in enumerate(scenarios)]
    score_w = max([5, *(len(r["score"]) for r in rows)])
    print("score = lower end of the objective's interval (point ± half-width); scenarios: tok/s ± half-width ×repeats")
    head = f"{'#':>5} {'verdict':<8} {'score':<{score_w}} {'gate':>5} " + " ".join(
        f"{s:<{w}}" for s, w in zip(scenarios, widths, strict=True)
    )
    width = None if args.wide else _terminal_width()
    print(_fit(head + "  params / notes", width))
    cut = False
    for r, c in zip(rows, cells, strict=True):
        mark = "★" if r["recommended"] else " "
        toks = " ".join(f"{x:<{w}}" for x, w in zip(c, widths, strict=True))
        params = " ".join(f"{k}={format_value(v)}" for k, v in r["params"].items())
        notes = _notes(r, fleet=fleet)
        line = (
            f"{mark}{r['number']:>4} {_short(r):<8} {r['score']:<{score_w}} {_gate_cell(r):>5} {toks}  {params}"
            + (f"  <{'; '.join(notes)}>" if notes else "")
        )
        print(_fit(line, width))
        cut = cut or _fit(line, width) != line
    if rec is not None:
        print(f"★ = the recommendation (trial #{rec.trial.number})" + ("; --wide shows whole rows" if cut else ""))
    return 0


def _status_head(study: optuna.Study, config: StudyConfig, facts: StudyRecord) -> str:
    """``study NAME: 12/30 counted trials; pruning slower configs early saved 340 s of benchmark``"""
    from tuner.trials import counted_trials

    saved = facts.pruning_saved_s
    saved_text = f"; pruning slower configs early saved {saved:.0f} s of benchmark" if saved else ""
    target = config.study.trials if facts.target_trials is None else facts.target_trials
    return f"study {study.study_name}: {counted_trials(study)}/{target} counted trials{saved_text}"


def _time_left(study: optuna.Study, config: StudyConfig, facts: StudyRecord, runs: list[str]) -> str:
    """``~52m15s left: 5 trials and 6 confirmation visits, each a restart (...) and ... measuring``: the progress
    line's ETA (:func:`tuner.study.study_eta`), for a study that has trials left or its confirmation to run. Only
    while a run of it is live (``runs``): a stopped study reads as it always did (tests/trials/test_stored_format)."""
    from tuner.study import study_eta
    from tuner.trials import counted_trials

    if not any(line.startswith("run: ") for line in runs):
        return ""

    target = config.study.trials if facts.target_trials is None else facts.target_trials
    eta = study_eta(
        study.get_trials(deepcopy=False),
        config,
        trials_left=target - counted_trials(study),
        confirmed=facts.confirmation is not None,
    )
    return eta.text()


def _terminal_width() -> int | None:
    """The terminal's width (``COLUMNS`` first); None when the output is a file or a pipe: nothing to fit."""
    import os

    if "COLUMNS" not in os.environ and not sys.stdout.isatty():
        return None
    return shutil.get_terminal_size((120, 24)).columns


def _fit(line: str, width: int | None) -> str:
    return line if width is None or len(line) <= width else line[: max(width - 1, 10)] + "…"


# -- tune best ---------------------------------------------------------------------------------------------


def _no_recommendation(args: argparse.Namespace, study: Any, config: Any) -> int:
    """Nothing feasible: when configs missed only the SLO, the closest one, marked as not meeting it."""
    from tuner.report import closest_slo_lines, launch_text, slo_object, trial_row
    from tuner.trials import closest_to_slo

    closest = closest_to_slo(study)
    if closest is None:
        print("no feasible completed trial yet: nothing to recommend (`tune status` says what became of each)",
              file=sys.stderr)
        return NO_ANSWER
    if args.json:
        row = trial_row(closest, config, latency=True)
        row.update(launch=launch_text(config, closest), recommended=False, slo=slo_object(closest, config))
        json.dump(row, sys.stdout, indent=2, default=str)
        print()
        return NO_ANSWER
    print(f"study {study.study_name}:")
    for line in closest_slo_lines(study, config):
        print(line)
    for line in _latency_lines(trial_row(closest, config, latency=True), config):
        print(line)
    print(f"    launch:  {launch_text(config, closest)} (does not meet the SLO)")
    return NO_ANSWER


def _best_row(study: Any, config: Any, rec: Any, t: Any) -> dict[str, Any]:
    """``tune best --json``'s object for one trial: its row, launch line, verdicts, speed-up and ``[slo]``."""
    from tuner.report import launch_text, slo_object, study_speedup, trial_row
    from tuner.trials import record_of

    row = trial_row(t, config, latency=True)
    row["launch"] = launch_text(config, t)
    row["recommended"] = t.number == rec.trial.number
    row["not_verified"] = rec.missing() if t.number == rec.trial.number else None
    speedup = None if record_of(t).is_baseline else study_speedup(study, config, t)
    row["speedup"] = speedup.as_json() if speedup is not None else None
    row["slo"] = slo_object(t, config, study)
    return row


def _with_interval(figures: dict[str, Any]) -> list[str]:
    """The percentiles (``p50``, ``p99``) a measure's figures give an interval slot (recorded or not)."""
    return [p for p in figures if f"{p}_interval" in figures]


def _latency_text(latency: dict[str, Any]) -> str:
    """``TTFT 0.0768 [0.0735, 0.0811] / 0.121 [0.117, none] s; TPOT ...``: each percentile with an interval."""
    from tuner.metrics import LATENCY_MEASURES, interval_text

    parts = []
    for m in LATENCY_MEASURES:
        figures = latency.get(m.limit) or {}
        shown = [interval_text(figures[p], figures[f"{p}_interval"], scale=m.scale) for p in _with_interval(figures)]
        if shown:
            parts.append(f"{m.label} {' / '.join(shown)} {m.unit}")
    return "; ".join(parts)


def _latency_lines(row: dict[str, Any], config: Any) -> list[str]:
    """``tune best``'s latency lines from a row's per-scenario ``latency``, for the scenarios whose latency is a
    promise (open loop, or an SLO): a closed-loop throughput scenario's are in ``--json`` ([] when none)."""
    promised = {s.name for s in config.benchmark.scenarios if s.open_loop or s.slo is not None}
    measured = {
        s: cell["latency"] for s, cell in row["scenarios"].items() if cell.get("latency") and s in promised
    }
    texts = {s: text for s, latency in measured.items() if (text := _latency_text(latency))}
    if not texts:
        return []
    first = measured[next(iter(texts))]
    heads = " / ".join(_with_interval(next(v for k, v in first.items() if k != "confidence")))
    level = f"{first['confidence']:.0%}"
    width = max(len(s) for s in texts)
    # The interval is over these requests as if independent; a queue makes a pass's requests move together
    # (docs/measuring.md measures how far that narrows it), so the line names its basis.
    lines = [f"    latency: {heads} of the requests [{level} interval over these requests]"]
    lines += [f"      {s:<{width}}  {text}" for s, text in texts.items()]
    if any("none" in text for text in texts.values()):
        lines.append(f"      none: too few requests for that bound at {level} confidence")
    return lines


def _member_lines(t: Any, config: Any, scenarios: list[str]) -> list[str]:
    """One recommended config as ``tune best`` prints it: params, tok/s, latency, launch line."""
    from tuner.report import launch_text, scenario_text, trial_row
    from tuner.space import format_value

    return [
        "    params:  " + " ".join(f"{k}={format_value(v)}" for k, v in t.params.items()),
        "    tok/s:   " + ", ".join(f"{s} {scenario_text(t, s)}" for s in scenarios),
        *_latency_lines(trial_row(t, config, latency=True), config),
        f"    launch:  {launch_text(config, t)}",
    ]


def _best(args: argparse.Namespace) -> int:
    from tuner.report import (
        baseline_drift,
        per_scenario_best,
        recommendation_lines,
        scenario_text,
        tune_command,
    )
    from tuner.space import format_value
    from tuner.trials import recommended, study_record

    if args.confirm:
        _confirm(args)
    config, study, storage = _load(args)
    rec = recommended(study)
    if rec is None:
        return _no_recommendation(args, study, config)
    def command(verb: str) -> str:
        return tune_command(verb, config, storage=storage, study=study.study_name)

    members = list(rec.front) or [rec.trial]
    if args.json:
        out = [_best_row(study, config, rec, t) for t in members]
        json.dump(out if len(out) > 1 else out[0], sys.stdout, indent=2, default=str)
        print()
        return 0 if _kept(study, config, rec) else NO_ANSWER
    names = ", ".join(study.metric_names or ["score"])
    print(f"study {study.study_name} ({names}):")
    for line in recommendation_lines(study, config, rec, finish=command("finish")):
        print(line)
    if rec.confirmed and (confirmed := study_record(study).confirmation_text):
        print(confirmed)
    if drift := baseline_drift(study, config):
        print(f"note: {drift}")
    scenarios = [s.name for s in config.benchmark.scenarios]
    for t in members:
        tag = " (recommended)" if len(members) > 1 and t.number == rec.trial.number else ""
        if len(members) > 1:
            print(f"  trial #{t.number}{tag}:")
        print("\n".join(_member_lines(t, config, scenarios)))
    print(f"deploy: {command('apply --best')}")
    # Which config to run for one kind of workload only, where it is not the recommendation.
    others = {s: t for s, t in per_scenario_best(study, scenarios).items() if t.number != rec.trial.number}
    if others:
        print("if you serve one kind of workload only (the recommendation weighs them all):")
        width = max(len(name) for name in others)
        for name, t in others.items():
            print(f"  {name:<{width}}  trial #{t.number} ({scenario_text(t, name)} tok/s): "
                  + " ".join(f"{k}={format_value(v)}" for k, v in t.params.items()))
    return 0 if _kept(study, config, rec) else NO_ANSWER
