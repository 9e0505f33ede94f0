"""The tuning loop: ask -> run the trial's story -> tell, until the study holds N counted trials.

It uses Optuna's ask-and-tell interface rather than ``study.optimize`` so that every ending is ours to
choose: a failed config ends PRUNED (TPE ignores FAIL trials and would suggest them again), an interrupted
trial ends FAIL and is re-enqueued once, and constraint violations or repeats of an already-measured config
never cost a server restart.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import optuna
from optuna.trial import TrialState

from tuner.bench import import_statistics
from tuner.config import StudyConfig
from tuner.errors import HostError, RegressionPruned, TrialFailure, TuneError
from tuner.search import make_pruner, make_sampler, pruning_savings
from tuner.space import Value, count_configs, render, suggest
from tuner.study import _fleet
from tuner.study._budget import UNTIL_DEADLINE, DeadlineReached, TimeBudget
from tuner.study._confirm import maybe_confirm
from tuner.study._console import Console, describe_params, fmt_duration, fmt_values
from tuner.study._faults import RUN_AFTERMATH, storage_faults
from tuner.study._objective import Evidence, TrialParts, TrialRunner
from tuner.study._partial import measured_text
from tuner.study._policy import ENVIRONMENT, FailurePolicy, ask_next, ensure_baseline
from tuner.study._recovery import Heartbeat, recover_stale_trials, requeue
from tuner.study._signals import stop_signals
from tuner.study._starts import enqueue_starting_points, enqueue_unmeasured, find_duplicate, retry_branch
from tuner.study._storage import open_study
from tuner.study._warmups import describe_warmups
from tuner.target import Target, open_target
from tuner.trials import (
    attrs,
    best_trials,
    counted_trials,
    current_trial,
    failure_outcome,
    is_counted,
    outcome_words,
    recommended,
    set_trial_attr,
)

Progress = Callable[[str], None]
PartsFactory = Callable[[StudyConfig, Target], TrialParts]

MAX_UNCOUNTED_IN_A_ROW = 200
MAX_HOST_ERRORS_IN_A_ROW = 3
SPACE_COUNT_LIMIT = 10_000
"""A space with at most this many configs is counted at start: a study never asks for more trials than it holds."""
UNMEASURED_AFTER = 10
"""Samples in a row that repeat measured configs before one of a small space's unmeasured configs is enqueued."""


class Interrupted(TuneError):
    """Ctrl-C or SIGTERM: the running trial was marked FAIL and the server put back per ``on_exit``."""


@dataclass(frozen=True, kw_only=True)
class RunSummary:
    study_name: str
    storage: str
    target: int
    counted: int
    ran: int
    best_number: int | None
    """The recommended trial (:func:`tuner.trials.recommended`)."""
    seconds: float
    space_size: int | None = None
    """How many configs the search space holds (None: more than :data:`SPACE_COUNT_LIMIT`)."""

    @property
    def exhausted(self) -> bool:
        """Every config of the space was measured: the normal end of a study over a small space."""
        return self.space_size is not None and self.counted >= self.space_size


def run_study(
    config: StudyConfig,
    *,
    trials: int | None = None,
    storage: str | None = None,
    study_name: str | None = None,
    force_config: bool = False,
    parts_factory: PartsFactory | None = None,
    target: Target | None = None,
    console: Console | None = None,
    confirm: bool = False,
    deadline: float | None = None,
    worker_name: str | None = None,
    allow_mixed_targets: bool = False,
    preflight: bool = True,
) -> RunSummary:
    """Run trials until the study holds ``trials`` counted trials in total (a resume continues to N).

    ``target`` replaces the one the config describes (the in-process model brings its own); it is closed at
    the end either way. Then the top configs are re-measured (``[search] confirm_top``; ``confirm=True``
    forces it, for ``tune best --confirm``). ``deadline`` (Unix time, ``--hours``/``--until``): no trial starts
    that the cost model says would end after it; without ``trials`` the study then runs until the deadline.
    ``worker_name`` names this worker in a fleet sharing the study (default: the server's
    host and port); a worker whose server differs from the study's is refused unless ``allow_mixed_targets``.
    With the config's own target, the preflight runs and the lock is taken before the study is created: a
    broken environment or a busy server is refused with nothing created or changed.
    """
    from tuner.target import require_preflight

    from_file = config  # what the study file says: a hint addresses the study by the file only if it names it
    if study_name and study_name != config.study.name:
        # The lock record, the notes and the resume hint must name the study that runs, not the file's default.
        config = dataclasses.replace(config, study=dataclasses.replace(config.study, name=study_name))
    console = console or Console()
    goal = trials if trials is not None else (UNTIL_DEADLINE if deadline else config.study.trials)
    space_size = count_configs(config.space, limit=SPACE_COUNT_LIMIT)
    if space_size is not None and goal > space_size:
        if goal != UNTIL_DEADLINE:
            console.line(f"the search space holds {space_size} configs: the study ends once all are measured")
        goal = space_size
    worker = _fleet.WorkerId.for_target(config, name=worker_name)
    check = target is None and preflight
    if parts_factory is None:  # a real server: say once which dialect it speaks and what it lacks
        for line in config.dialect.describe():
            console.line(line)
    target = target or open_target(config)
    start = time.monotonic()
    progress = _Progress()
    url = storage or config.study.storage
    with storage_faults(url, aftermath=RUN_AFTERMATH), target, target.locked():
        if check:
            # Under the lock: when another tune holds the server, its lock names it; the preflight would only
            # see "a port held by a process this study did not start".
            require_preflight(config, storage=storage)
        study, fleet = _prepare_study(
            config, storage=storage, study_name=study_name, force_config=force_config, console=console, worker=worker
        )
        if goal > 0:  # `tune finish` / `best --confirm` run no trial: the study's own target stands
            study.set_user_attr(attrs.TARGET_TRIALS, goal)
        study.set_user_attr(attrs.CONFIRM_TOP, config.search.confirm_top)
        fleet.target = _fleet.target_fingerprint(config, target.host)
        _fleet.check_target(fleet.claims, fleet.target, allow_mixed=allow_mixed_targets)
        _run_locked(study, config, target, _Run(fleet=fleet, parts_factory=parts_factory, confirm=confirm,
                                                deadline=deadline, space_size=space_size), console, goal, progress)
    with storage_faults(url):
        summary = _summarise(
            study, config, goal=goal, ran=progress.ran, seconds=time.monotonic() - start, storage=url,
            space_size=space_size,
        )
    if progress.interrupted:
        hint = _resume_hint(from_file, url, goal, study=config.study.name)
        raise Interrupted(f"stopped at {summary.counted}/{goal} trials. Resume with: {hint}")
    return summary


def _resume_hint(config: StudyConfig, storage: str, goal: int, *, study: str | None = None) -> str:
    """A command that continues study ``study`` (default: the config's) to ``goal`` trials, as it can be pasted."""
    from tuner.report import tune_command

    name = study or config.study.name
    command = tune_command("start", config, storage=storage, study=name)
    if command.startswith("tune start --config"):
        return command.replace("tune start", f"tune start --trials {goal}", 1)
    return tune_command("resume", config, storage=storage, study=name) + f" --trials {goal}"


@dataclass(frozen=True, kw_only=True)
class _Run:
    """What a locked run needs beyond the study and the target."""

    fleet: _fleet.Fleet
    parts_factory: PartsFactory | None
    confirm: bool
    deadline: float | None
    space_size: int | None = None


def _run_locked(
    study: optuna.Study,
    config: StudyConfig,
    target: Target,
    run: _Run,
    console: Console,
    goal: int,
    progress: _Progress,
) -> None:
    from tuner.study._parts import http_parts

    parts = (run.parts_factory or http_parts)(config, target)
    evidence = Evidence(artifacts_dir=config.study.artifacts_dir)
    runner = TrialRunner(config=config, parts=parts, evidence=evidence, progress=console.status)
    budget = TimeBudget(deadline=run.deadline, config=config)
    policy = FailurePolicy(study=study, max_same_failures=config.search.max_same_failures)
    import_statistics()  # before the signals are armed (see import_statistics)
    try:
        with stop_signals():  # also while putting the server back: a second signal must not kill tune mid-restore
            try:
                _drive(study, config, runner, target.base, console, goal, progress, (run.fleet, policy, budget))
                if run.space_size is not None and counted_trials(study) >= run.space_size:
                    console.line(f"all {run.space_size} configs of the space were measured")
                if budget.remaining_s() > 0:
                    policy.release()
                    maybe_confirm(
                        study, config, parts=parts, console=console, force=run.confirm,
                        claim=run.fleet.claim_confirmation, until=run.deadline,
                    )
            except KeyboardInterrupt:
                progress.interrupted = True
                console.line("interrupted: the running trial is marked FAIL and will be retried on resume")
            finally:
                with contextlib.suppress(Exception):  # a storage fault must not hide the run's own error
                    policy.release()
                _put_back(config, study, target, console, progress)
    except KeyboardInterrupt:  # held back by the run's last storage write until the run had ended
        progress.interrupted = True
        console.line("interrupted as the run ended: every trial kept its verdict")


def _put_back(config: StudyConfig, study: optuna.Study, target: Target, console: Console, progress: _Progress) -> None:
    """Only while we hold the lock: the server is ours to put back."""
    try:
        _on_exit(config, study, target, console)
    except KeyboardInterrupt:
        progress.interrupted = True
        console.line(f"interrupted again: on_exit = {config.study.on_exit!r} was not finished (`tune restore` does it)")
    except Exception as exc:  # whatever went wrong, the run's own error is the one to report
        console.line(f"WARNING: could not put the server back ({config.study.on_exit}): {exc}")


def _prepare_study(
    config: StudyConfig,
    *,
    storage: str | None,
    study_name: str | None,
    force_config: bool,
    console: Console,
    worker: _fleet.WorkerId,
) -> tuple[optuna.Study, _fleet.Fleet]:
    """Open (or create) the study, give it its sampler and pruner, recover dead trials, enqueue the starts."""
    from tuner.gate import check_problems
    from tuner.report import write_study_note

    check_problems(config.gate, file=config.source)
    study = open_study(config, storage=storage, study_name=study_name, force_config=force_config)
    fleet = _fleet.Fleet(
        study, worker, stale_after_s=config.study.stale_after_s, poll_s=min(config.study.heartbeat_s, 2.0)
    )
    # The sampler's seed is offset by what the study already holds (see make_sampler) and by the worker.
    ordinal = _fleet.worker_ordinal(fleet.claims, worker)
    seed = _fleet.worker_seed(config.study.seed, ordinal=ordinal, offset=len(study.trials))
    seeded = dataclasses.replace(config, study=dataclasses.replace(config.study, seed=seed))
    study.sampler = make_sampler(seeded, offset=0)
    study.pruner = make_pruner(config)
    write_study_note(study, config)
    stale = recover_stale_trials(study, stale_after_s=config.study.stale_after_s)
    if stale:
        console.line(f"marked interrupted trials FAIL and re-enqueued them: {stale}")
    # One worker enqueues the starting points: the baseline is measured exactly once however many start together.
    has_baseline = any(attrs.BASELINE in t.user_attrs for t in study.get_trials(deepcopy=False))
    if _fleet.claim_starting_points(
        fleet.claims, worker, has_baseline=has_baseline, stale_after_s=config.study.stale_after_s
    ):
        enqueue_starting_points(study, config)
    else:
        _retry_failed_baseline(study, config, fleet)
    return study, fleet


def _retry_failed_baseline(study: optuna.Study, config: StudyConfig, fleet: _fleet.Fleet) -> None:
    """A baseline that failed (the environment was broken) runs again: one worker enqueues it, per failure."""
    failed = [
        t
        for t in study.get_trials(deepcopy=False)
        if t.user_attrs.get(attrs.BASELINE) and t.state in (TrialState.FAIL, TrialState.PRUNED)
    ]
    key = f"tune:baseline-retry:{len(failed)}"
    if failed and fleet.claims.claim(key, {"worker": fleet.worker.process}) is not None:
        ensure_baseline(study, dict(config.baseline))


def _summarise(
    study: optuna.Study,
    config: StudyConfig,
    *,
    goal: int,
    ran: int,
    seconds: float,
    storage: str,
    space_size: int | None,
) -> RunSummary:
    # The study-level figure of what regression pruning saved (each trial records its own share).
    study.set_user_attr(attrs.PRUNING_SAVED_S, round(pruning_savings(study), 3))
    if warmups := describe_warmups(study, config):
        study.set_user_attr(attrs.WARMUPS, warmups)  # for the report, which does not do statistics
    rec = recommended(study)
    return RunSummary(
        study_name=study.study_name,
        storage=storage,
        target=goal,
        counted=counted_trials(study),
        ran=ran,
        best_number=rec.trial.number if rec is not None else None,
        seconds=round(seconds, 1),
        space_size=space_size,
    )


@dataclass
class _Progress:
    ran: int = 0
    interrupted: bool = False


def _drive(
    study: optuna.Study,
    config: StudyConfig,
    runner: TrialRunner,
    base: Any,
    console: Console,
    target: int,
    progress: _Progress,
    rules: tuple[_fleet.Fleet, FailurePolicy, TimeBudget],
) -> None:
    fleet, policy, budget = rules
    uncounted_in_a_row = 0
    host_errors_in_a_row = 0

    def recover() -> None:
        held = set(policy.held_numbers)  # this worker's own held failures are alive, not stale
        stale = recover_stale_trials(study, stale_after_s=config.study.stale_after_s, keep=held)
        if stale:
            console.line(f"trials of a dead worker marked FAIL and re-enqueued: {stale}")

    # A slot first, then a trial: several workers sharing a study end with exactly `target` counted trials. While
    # no slot is free, held failures get their verdicts (they may be the last trials of the run).
    while (
        claimed := fleet.acquire(
            target, is_counted=is_counted, recover=recover, status=console.status, idle=policy.release
        )
    ) is not None:
        slot, done = claimed
        if uncounted_in_a_row >= UNMEASURED_AFTER and _listable(config):
            uncounted_in_a_row = 0 if enqueue_unmeasured(study, config) else uncounted_in_a_row
        if uncounted_in_a_row >= MAX_UNCOUNTED_IN_A_ROW:
            fleet.slots.release(slot)
            raise TuneError(
                f"the sampler proposed {uncounted_in_a_row} configs in a row that violate constraints or "
                "repeat measured ones: the search space looks exhausted or over-constrained"
            )
        trial = ask_next(study)
        counted = False
        try:
            slot = _bind(study, trial, fleet, slot)
            t0 = time.monotonic()
            shown = done + policy.holding  # held failures will most likely count
            counted = _run_one(study, trial, config, runner, base, console, shown, target, (budget, policy))
        except DeadlineReached as stop:
            console.line(str(stop))
            return
        except KeyboardInterrupt:
            stored = current_trial(trial)
            if stored.state.is_finished():  # the stop came just after the verdict was stored: the verdict stands
                counted = is_counted(stored)
            else:
                set_trial_attr(study, trial, attrs.INTERRUPTED, "Ctrl-C or SIGTERM")
                study.tell(trial, state=TrialState.FAIL)
                requeue(study, study.trials[trial.number])
            raise
        except (_LostSlot, _TakenElsewhere):
            continue
        except (ValueError, optuna.exceptions.UpdateFinishedTrialError) as exc:
            _declared_dead(study, trial, console, exc)
        except HostError as exc:
            host_errors_in_a_row += 1
            _host_error(study, trial, console, exc, in_a_row=host_errors_in_a_row)
            continue
        finally:
            if not counted:
                fleet.slots.release(slot)  # an uncounted ending hands the slot back to the fleet
        host_errors_in_a_row = 0
        if counted:
            progress.ran += 1
            uncounted_in_a_row = 0
            budget.record(trial.params, time.monotonic() - t0)
        else:
            uncounted_in_a_row += 1


def _listable(config: StudyConfig) -> bool:
    """A space small enough to list its configs (and so to enqueue one the sampler keeps missing)."""
    return count_configs(config.space, limit=SPACE_COUNT_LIMIT) is not None


def _declared_dead(study: optuna.Study, trial: optuna.Trial, console: Console, exc: Exception) -> None:
    """A trial another worker failed meanwhile (its heartbeat looked older than stale_after_s): drop the result."""
    if not study.trials[trial.number].state.is_finished():
        raise exc
    console.line(f"  trial #{trial.number} was declared dead by another worker meanwhile: result dropped")


def _host_error(study: optuna.Study, trial: optuna.Trial, console: Console, exc: HostError, *, in_a_row: int) -> None:
    """The host, not the config, failed (SSH dropped, a command timed out): FAIL keeps the sampler from learning
    anything from it, and the params are retried once the host is back."""
    set_trial_attr(study, trial, attrs.FAILURE_PHASE, "host")
    set_trial_attr(study, trial, attrs.FAILURE_KIND, ENVIRONMENT)
    set_trial_attr(study, trial, attrs.FAILURE_REASON, str(exc)[:1000])
    study.tell(trial, state=TrialState.FAIL)
    requeue(study, study.trials[trial.number])
    console.line(f"  host error (trial will be retried): {exc}")
    if in_a_row >= MAX_HOST_ERRORS_IN_A_ROW:
        raise HostError(f"{in_a_row} host errors in a row, giving up; last: {exc}") from exc
    time.sleep(min(30.0, 2.0**in_a_row))


class _LostSlot(Exception):
    """The slot was reaped between claim and ask (a worker silent for longer than ``stale_after_s``)."""


class _TakenElsewhere(Exception):
    """Another worker's ``ask`` popped the same WAITING trial (possible on SQLite): it is theirs, untouched."""


def _bind(study: optuna.Study, trial: optuna.Trial, fleet: _fleet.Fleet, slot: _fleet.Slot) -> _fleet.Slot:
    # Optuna pops a WAITING trial with SELECT ... FOR UPDATE, which SQLite ignores: two workers can be handed the
    # same enqueued trial. A claim on its number decides whose it is before either writes anything to it.
    if not fleet.claim_trial(trial.number):
        raise _TakenElsewhere
    bound = fleet.slots.bind(slot, trial.number)
    if bound is None:
        trial.set_user_attr(attrs.FAILURE_REASON, "this worker's trial slot was reaped before the trial started")
        study.tell(trial, state=TrialState.FAIL)
        requeue(study, study.trials[trial.number])
        raise _LostSlot
    trial.set_user_attr(attrs.WORKER, fleet.worker.process)
    trial.set_user_attr(attrs.WORKER_NAME, fleet.worker.name)
    trial.set_user_attr(attrs.SLOT, slot.index)
    trial.set_user_attr(attrs.TARGET_FINGERPRINT, _fleet.describe_fingerprint(fleet.target))
    return bound


def _run_one(
    study: optuna.Study,
    trial: optuna.Trial,
    config: StudyConfig,
    runner: TrialRunner,
    base: Any,
    console: Console,
    done: int,
    target: int,
    rules: tuple[TimeBudget, FailurePolicy],
) -> bool:
    """Run one asked trial to its end; True when it counts towards the target."""
    from tuner.report import mark_feasibility

    budget, policy = rules
    params = suggest(trial, config.space)
    if _rejected(study, trial, config, params) or _repeat(study, trial):
        return False
    is_baseline = bool(trial.user_attrs.get(attrs.BASELINE))
    spec = base if is_baseline else render(config.space, base, params)
    budget.check(study, trial, params)
    eta = ""
    mean = budget.expected()
    if mean is not None and target != UNTIL_DEADLINE:
        eta = f", ETA {fmt_duration(mean * (target - done))}"
    label = "baseline" if is_baseline else "trial"
    of = f"/{target}" if target != UNTIL_DEADLINE else ""
    line = f"[{done + 1}{of}{eta}{budget.describe()}] trial #{trial.number} ({label}): {describe_params(params)}"
    console.line(line)
    # The held failures are alive too: they still wait for their verdicts.
    with Heartbeat(study, trial, interval_s=config.study.heartbeat_s, also=policy.held_ids):
        try:
            result = runner.run(trial, spec, label=f"trial-{trial.number:04d}")
        except TrialFailure as failure:
            console.line(f"  {_failure_words(failure)}{measured_text(trial, config)}")
            policy.failed(trial, failure, baseline=is_baseline)
            return True
    policy.success()
    mark_feasibility(trial)
    study.tell(trial, list(result.values))
    best = best_trials(study)
    best_text = f"; best #{best[0].number} {fmt_values(best[0].values)}" if best else ""
    console.line(f"  score {fmt_values(result.values)}{measured_text(trial, config)}{best_text}")
    return True


def _failure_words(failure: TrialFailure) -> str:
    """``pruned: slower than the best (...)`` or ``failed: did not start [ready] ...``: the console's verdict."""
    if isinstance(failure, RegressionPruned):
        return f"pruned: slower than the best ({failure.reason})"
    kind = failure_outcome(str(failure.phase), environment=failure.kind == ENVIRONMENT)
    return f"{outcome_words(kind)} {failure}"


def _rejected(study: optuna.Study, trial: optuna.Trial, config: StudyConfig, params: dict[str, Value]) -> bool:
    """A sample that breaks a declared constraint ends PRUNED without a restart (TPE learns to avoid it)."""
    violations = config.space.violations(params)
    if not violations:
        return False
    trial.set_user_attr(attrs.REJECTED, True)
    trial.set_user_attr(attrs.FAILURE_PHASE, "sample")
    trial.set_user_attr(attrs.FAILURE_REASON, "violates " + ", ".join(str(c) for c in violations))
    study.tell(trial, state=TrialState.PRUNED)
    retry_branch(study, trial)
    return True


def _repeat(study: optuna.Study, trial: optuna.Trial) -> bool:
    """A config already measured (or being measured elsewhere) is told its known outcome, never run again."""
    from tuner.report import mark_feasibility

    duplicate = find_duplicate(study, dict(trial.params), trial.number)
    if duplicate is not None and trial.user_attrs.get(attrs.BASELINE) and duplicate.state == TrialState.PRUNED:
        duplicate = None  # a baseline PRUNED by an older tune is run again, never taken as its verdict
    if duplicate is None:
        return False
    trial.set_user_attr(attrs.DUPLICATE_OF, duplicate.number)
    if duplicate.state == TrialState.COMPLETE:
        for key, value in duplicate.constraints.items():
            trial.set_constraint(key, value)
        mark_feasibility(trial)
        study.tell(trial, duplicate.values)
    elif duplicate.state == TrialState.RUNNING:
        # Another worker measures this config right now: no restart; the slot goes back and the next ask
        # re-samples. FAIL, not PRUNED: this trial says nothing about the config, and TPE ignores FAIL trials.
        trial.set_user_attr(
            attrs.FAILURE_REASON, f"re-sampled: same config as trial #{duplicate.number}, running elsewhere"
        )
        study.tell(trial, state=TrialState.FAIL)
    else:
        trial.set_user_attr(attrs.FAILURE_PHASE, duplicate.user_attrs.get(attrs.FAILURE_PHASE, "sample"))
        trial.set_user_attr(attrs.FAILURE_REASON, f"same config as trial #{duplicate.number}, which failed")
        study.tell(trial, state=TrialState.PRUNED)
    return True


def _on_exit(config: StudyConfig, study: optuna.Study, target: Target, console: Console) -> None:
    """Leave the server in a known configuration, as the study file asks."""
    action = config.study.on_exit
    if action == "leave":
        return
    if action == "stop":
        target.service.stop()
        return
    spec = None  # the baseline
    if action == "best":
        rec = recommended(study)
        if rec is not None and not rec.gated:
            console.line(f"trial #{rec.trial.number} is not gated yet: restoring the baseline instead")
        elif rec is not None:
            t = rec.trial
            spec = None if t.user_attrs.get(attrs.BASELINE) else render(config.space, target.base, t.params)
            console.line(f"restarting with the recommended config (trial #{rec.trial.number})")
        else:
            console.line("no feasible best trial: restoring the baseline instead")
    if spec is None:
        console.line("restoring the baseline configuration")
    try:
        target.bring_up(spec, label="on-exit", progress=console.status)
    except TrialFailure as failure:
        console.line(f"WARNING: the server did not come back after {action}: {failure.reason}")

