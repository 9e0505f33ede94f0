"""``tune check`` (preflight), ``tune apply`` (a stored trial's config) and ``tune restore`` (the base unit)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from tuner.cli._common import add_study_args, config_from_args, study_location
from tuner.config import StudyConfig
from tuner.endpoint import Endpoint
from tuner.errors import NoAnswer, TuneError
from tuner.secrets import masked_url
from tuner.spec import LaunchSpec
from tuner.target import Target

OK, BAD, WARN = "✓", "✗", "!"
_MARKS = {True: OK, None: WARN, False: BAD}


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    check = subparsers.add_parser("check", help="preflight: verify the target can be tuned (changes nothing)")
    add_study_args(check)
    check.add_argument("--cycle", action="store_true", help="also run one apply -> restart -> ready -> restore cycle")
    check.set_defaults(func=cmd_check)

    apply = subparsers.add_parser("apply", help="apply a stored trial's configuration and wait until ready")
    add_study_args(apply)
    which = apply.add_mutually_exclusive_group(required=True)
    which.add_argument("--trial", type=int, metavar="N", help="trial number")
    which.add_argument("--best", action="store_true", help="the recommended trial (what `tune best` names)")
    apply.add_argument(
        "--unverified",
        action="store_true",
        help="apply the recommendation even though its correctness gate has not run yet",
    )
    apply.add_argument(
        "--slo-undecided",
        action="store_true",
        help="apply the recommendation even though it is not shown to meet the study's SLO (only not to miss it)",
    )
    apply.set_defaults(func=cmd_apply)

    restore = subparsers.add_parser("restore", help="drop tune's changes, restart the base config, wait ready")
    add_study_args(restore)
    restore.set_defaults(func=cmd_restore)

    stop = subparsers.add_parser("stop", help="stop the server tune recorded for this target (nothing else)")
    add_study_args(stop)
    stop.set_defaults(func=cmd_stop)


def _config(args: argparse.Namespace) -> StudyConfig:
    """The study file's config, or (``--storage`` without ``--config``) the one stored in the study."""
    if getattr(args, "storage", None) is None:
        return config_from_args(args)
    return study_location(args)[0]


def run_check(config: StudyConfig, *, storage: str | None = None, out: Callable[[str], None] = print) -> int:
    """The preflight checklist (with the storage ``tune start`` would use: ``storage``, else the config's);
    returns the number of failed items."""
    from tuner.study import storage_problem
    from tuner.target import preflight

    url = storage or config.study.storage
    out(f"tune check: {config.source}")
    failed = 0
    for finding in preflight(config, storage=url):
        failed += finding.ok is False
        out(f" {_MARKS[finding.ok]} {config.secrets.text(finding.text)}")  # a finding may quote argv or env
    problem = storage_problem(url)
    failed += problem is not None
    if problem is not None or not url.startswith("sqlite:///"):
        out(f" {_MARKS[problem is None]} {problem or f'storage {masked_url(url)} answers'}")
    return failed


def cmd_check(args: argparse.Namespace) -> int:
    from tuner.cli._capacity import require_fit

    config = _config(args)
    fits = require_fit(config)  # a study whose requests the server cannot hold: one line, exit 2
    failed = run_check(config, storage=getattr(args, "storage", None))
    if fits is not None:
        print(f" {OK} {fits}")
    if failed:
        print(f"{failed} check(s) failed", file=sys.stderr)
        return 1
    if args.cycle:
        print("cycle: baseline config -> restart -> ready -> tiny benchmark -> restore")
        problem = _cycle(config)
        if problem:
            print(f" {BAD} the cycle failed: {problem}")
            return 1
        print(f" {OK} one full apply/restart/ready/benchmark/restore cycle worked")
    return 0


def _with_target(config: StudyConfig, action: Callable[[Target], None]) -> None:
    from tuner.target import open_target

    with open_target(config) as target, target.locked():
        action(target)


def _bring_up(target: Target, spec: LaunchSpec | None, label: str, *, config: StudyConfig | None = None) -> None:
    """The trial's own bring-up (apply -> restart -> ready -> verify); with ``config``, a tiny benchmark too."""
    up = target.bring_up(spec, label=label, progress=lambda m: print(f"   {m}", file=sys.stderr))
    print(f" {OK} {label}: ready after {up.ready.seconds:.1f} s ({up.restarted.new})")
    if config is not None:
        _tiny_benchmark(config, up.ready.endpoint or target.endpoint)


def _tiny_benchmark(config: StudyConfig, endpoint: Endpoint) -> None:
    """One short streamed request through the real benchmark engine: proves the measuring path end to end."""
    from dataclasses import replace

    from tuner.bench import HttpBenchmark
    from tuner.config import Scenario

    section = replace(config.benchmark, warmup="always", warmup_requests=0, repeats=1)
    bench = HttpBenchmark(endpoint=endpoint, config=section, dialect=config.dialect)
    try:
        result = bench.run_scenario(
            Scenario(name="check", concurrency=1, prompt_tokens=32, output_tokens=16, requests=1)
        )
    finally:
        bench.close()
    accept = f", acceptance {result.accept_length:.2f}" if result.accept_length else ""
    print(f" {OK} tiny benchmark: {result.output_tok_s:.1f} tok/s{accept}")


def _cycle(config: StudyConfig) -> str | None:
    """One apply -> restart -> ready -> benchmark -> restore; the failure, if any, to print last."""
    from tuner.config import spec_for

    problems: list[str] = []

    def act(target: Target) -> None:
        spec = spec_for(config, config.baseline)
        was_running = target.service.state().running
        try:
            _bring_up(target, spec, "check-cycle", config=config)
        except TuneError as exc:
            problems.append(str(exc))
        finally:
            if was_running:
                _bring_up(target, None, "check-restore")
            else:  # nothing ran before the check: nothing runs after it
                target.service.revert()
                target.service.stop()
                print(f" {OK} server stopped again (it was not running before the check)")

    _with_target(config, act)
    return problems[0] if problems else None


def cmd_apply(args: argparse.Namespace) -> int:
    from tuner.config import launch_spec
    from tuner.report import launch_text
    from tuner.study import load_existing
    from tuner.trials import Outcome

    config, storage, name = study_location(args)
    study = load_existing(storage, name)  # never creates an empty study to apply nothing from
    if args.best:
        trial = _recommendation(args, study, config, storage)
    else:
        matches = [t for t in study.trials if t.number == args.trial]
        if not matches:
            raise TuneError(f"study {study.study_name!r} has no trial {args.trial}")
        trial = matches[0]
        print(f"trial #{trial.number}: {Outcome.text(trial)}")
    spec = launch_spec(config, trial)  # the real values: the server needs them
    print(f"applying trial #{trial.number}: {launch_text(config, trial)}")
    _with_target(config, lambda target: _bring_up(target, spec, f"apply-trial-{trial.number}"))
    return 0


def _recommendation(args: argparse.Namespace, study: Any, config: StudyConfig, storage: str) -> Any:
    """The trial ``apply --best`` deploys: the recommendation, once its gate passed and its SLO is shown to be met
    (each waivable by its flag); one line saying why not, otherwise."""
    from tuner.report import recommendation_lines, slo_state, tune_command
    from tuner.slo import MET
    from tuner.trials import closest_to_slo, recommended, record_of

    rec = recommended(study)
    if rec is None and (closest := closest_to_slo(study)) is not None:
        raise NoAnswer(
            f"study {study.study_name!r}: no config met the SLO (the closest, trial #{closest.number}, "
            f"{record_of(closest).slo_missed or 'misses it'}): nothing to apply; apply it anyway "
            f"with --trial {closest.number}"
        )
    if rec is None:
        raise NoAnswer(f"study {study.study_name!r} has no feasible completed trial yet: nothing to apply")
    finish = tune_command("finish", config, storage=storage, study=study.study_name)
    for line in recommendation_lines(study, config, rec, finish=finish):
        print(line)
    if not rec.gated and not args.unverified:
        raise TuneError(
            f"trial #{rec.trial.number} has not passed the correctness gate yet (only finalists are gated, at "
            f"the end of the study): run `{finish}` first, or apply it anyway with --unverified"
        )
    state = slo_state(rec.trial, config, study)
    if state not in (None, MET) and not args.slo_undecided:
        raise NoAnswer(
            f"trial #{rec.trial.number} is not shown to meet the SLO ({state}: `tune best` says how far and how "
            "many requests would decide it): apply it anyway with --slo-undecided"
        )
    return rec.trial


def cmd_restore(args: argparse.Namespace) -> int:
    config = _config(args)
    _with_target(config, lambda target: _bring_up(target, None, "restore"))
    return 0


def cmd_stop(args: argparse.Namespace) -> int:
    from tuner.cli._run import running_run_hint
    from tuner.errors import LockHeld

    config = _config(args)

    def act(target: Target) -> None:
        state = target.service.state()
        target.service.stop()  # also an interrupted launch's leftover, found by its record
        what = f"stopped {state.identity}" if state.running else f"nothing tune started is running ({state.detail})"
        print(f" {OK} {what}")

    try:
        _with_target(config, act)
    except LockHeld as exc:  # a run of this study holds the server: `tune interrupt` is what stops a run
        study = getattr(args, "study", None) or config.study.name
        hint = running_run_hint(config, study=study, storage=getattr(args, "storage", None) or config.study.storage)
        if hint is None:
            raise
        raise LockHeld(f"{exc}. {hint}") from None
    return 0


__all__ = ["register", "run_check"]
