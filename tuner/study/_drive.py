"""The trial loop of one locked run: a slot, a trial, its story, its verdict; until the study holds its goal.

A slot first, then a trial: several workers sharing a study end with exactly ``goal`` counted trials. Every
ending is ours to choose (Optuna's ask-and-tell, not ``study.optimize``): a failed config ends PRUNED (TPE ignores
FAIL trials and would suggest them again), an interrupted or host-failed trial ends FAIL and is re-enqueued, and
constraint violations or repeats of an already-measured config never cost a server restart.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import optuna
from optuna.trial import TrialState

from tuner.config import StudyConfig, launch_spec
from tuner.errors import HostError, RegressionPruned, TrialFailure, TuneError
from tuner.space import Value, count_configs, suggest
from tuner.study import _fleet
from tuner.study._budget import UNTIL_DEADLINE, DeadlineReached, TimeBudget, study_eta
from tuner.study._console import Console, describe_params, fmt_duration, fmt_values
from tuner.study._emulate import Emulation, emulation_for, settle
from tuner.study._measured import measured_text
from tuner.study._objective import TrialRunner
from tuner.study._policy import ENVIRONMENT, FailurePolicy, ask_next
from tuner.study._recovery import Heartbeat, recover_stale_trials, requeue
from tuner.study._scoring import references_for
from tuner.study._starts import enqueue_unmeasured, find_duplicate, retry_branch
from tuner.trials import Outcome, best_trials, is_counted, record_of, write, write_stored
from tuner.trials.adapter import current_trial

__all__ = [
    "MAX_HOST_ERRORS_IN_A_ROW",
    "MAX_UNCOUNTED_IN_A_ROW",
    "SPACE_COUNT_LIMIT",
    "UNMEASURED_AFTER",
    "Loop",
    "drive",
]

MAX_UNCOUNTED_IN_A_ROW = 200
MAX_HOST_ERRORS_IN_A_ROW = 3
SPACE_COUNT_LIMIT = 10_000
"""A space with at most this many configs is counted at start: a study never asks for more trials than it holds."""
UNMEASURED_AFTER = 10
"""Samples in a row that repeat measured configs before one of a small space's unmeasured configs is enqueued."""


@dataclass(kw_only=True)
class Loop:
    """What every step of one run's trial loop reads: the run context."""

    study: optuna.Study
    config: StudyConfig
    runner: TrialRunner
    console: Console
    goal: int
    fleet: _fleet.Fleet
    policy: FailurePolicy
    budget: TimeBudget
    ran: int = 0
    """Counted trials this run measured."""


@dataclass
class _Streak:
    uncounted: int = 0
    """Samples in a row that ended without counting (rejected, repeats): a sampler stuck in a measured corner."""
    host_errors: int = 0


def drive(loop: Loop) -> None:
    """Run trials until the study holds ``loop.goal`` counted trials, or the deadline leaves no room for one."""
    streak = _Streak()
    # While no slot is free, held failures get their verdicts (they may be the last trials of the run).
    while (
        claimed := loop.fleet.acquire(
            loop.goal,
            is_counted=is_counted,
            recover=lambda: _recover(loop),
            status=loop.console.status,
            idle=loop.policy.release,
        )
    ) is not None:
        slot, done = claimed
        _unstick(loop, streak, slot)
        try:
            _attempt(loop, streak, slot, done)
        except DeadlineReached as stop:
            loop.console.line(str(stop))
            return


def _recover(loop: Loop) -> None:
    held = set(loop.policy.held_numbers)  # this worker's own held failures are alive, not stale
    stale = recover_stale_trials(loop.study, stale_after_s=loop.config.study.stale_after_s, keep=held)
    if stale:
        loop.console.line(f"trials of a dead worker marked FAIL and re-enqueued: {stale}")


def _unstick(loop: Loop, streak: _Streak, slot: _fleet.Slot) -> None:
    """A sampler that keeps proposing measured or forbidden configs: enqueue an unmeasured one of a small space,
    or stop with one line when the space looks exhausted or over-constrained."""
    if streak.uncounted >= UNMEASURED_AFTER and _listable(loop.config) and enqueue_unmeasured(loop.study, loop.config):
        streak.uncounted = 0
    if streak.uncounted >= MAX_UNCOUNTED_IN_A_ROW:
        loop.fleet.slots.release(slot)
        raise TuneError(
            f"the sampler proposed {streak.uncounted} configs in a row that violate constraints or "
            "repeat measured ones: the search space looks exhausted or over-constrained"
        )


def _listable(config: StudyConfig) -> bool:
    return count_configs(config.space, limit=SPACE_COUNT_LIMIT) is not None


def _attempt(loop: Loop, streak: _Streak, slot: _fleet.Slot, done: int) -> None:
    """Ask one trial and run it in ``slot``; the streaks record how it ended."""
    trial = ask_next(loop.study)
    counted = False
    try:
        slot = _bind(loop, trial, slot)
        t0 = time.monotonic()
        counted = _run_one(loop, trial, done + loop.policy.holding)  # held failures will most likely count
        if counted:
            loop.ran += 1
            loop.budget.record(trial.params, time.monotonic() - t0)
    except KeyboardInterrupt:
        counted = _interrupted(loop, trial)
        raise
    except (_LostSlot, _TakenElsewhere):
        return
    except (ValueError, optuna.exceptions.UpdateFinishedTrialError) as exc:
        _declared_dead(loop, trial, exc)
    except HostError as exc:
        streak.host_errors += 1
        _host_error(loop, trial, exc, in_a_row=streak.host_errors)
        return
    finally:
        if not counted:
            loop.fleet.slots.release(slot)  # an uncounted ending hands the slot back to the fleet
    streak.host_errors = 0
    streak.uncounted = 0 if counted else streak.uncounted + 1


def _interrupted(loop: Loop, trial: optuna.Trial) -> bool:
    """Ctrl-C or SIGTERM during a trial: FAIL it and re-enqueue its params (True: its verdict was stored first)."""
    stored = current_trial(trial)
    if stored.state.is_finished():  # the stop came just after the verdict was stored: the verdict stands
        return is_counted(stored)
    write_stored(loop.study, trial, interrupted="Ctrl-C or SIGTERM")
    loop.study.tell(trial, state=TrialState.FAIL)
    requeue(loop.study, loop.study.trials[trial.number])
    return False


def _declared_dead(loop: Loop, trial: optuna.Trial, exc: Exception) -> None:
    """A trial another worker failed meanwhile (its heartbeat looked older than stale_after_s): drop the result."""
    if not loop.study.trials[trial.number].state.is_finished():
        raise exc
    loop.console.line(f"  trial #{trial.number} was declared dead by another worker meanwhile: result dropped")


def _host_error(loop: Loop, trial: optuna.Trial, exc: HostError, *, in_a_row: int) -> None:
    """The host, not the config, failed (SSH dropped, a command timed out): FAIL keeps the sampler from learning
    anything from it, and the params are retried once the host is back."""
    study = loop.study
    write_stored(study, trial, failure_phase="host")
    write_stored(study, trial, failure_kind=ENVIRONMENT)
    write_stored(study, trial, failure_reason=str(exc)[:1000])
    study.tell(trial, state=TrialState.FAIL)
    requeue(study, study.trials[trial.number])
    loop.console.line(f"  host error (trial will be retried): {exc}")
    if in_a_row >= MAX_HOST_ERRORS_IN_A_ROW:
        raise HostError(f"{in_a_row} host errors in a row, giving up; last: {exc}") from exc
    time.sleep(min(30.0, 2.0**in_a_row))


class _LostSlot(Exception):
    """The slot was reaped between claim and ask (a worker silent for longer than ``stale_after_s``)."""


class _TakenElsewhere(Exception):
    """Another worker's ``ask`` popped the same WAITING trial (possible on SQLite): it is theirs, untouched."""


def _bind(loop: Loop, trial: optuna.Trial, slot: _fleet.Slot) -> _fleet.Slot:
    # Optuna pops a WAITING trial with SELECT ... FOR UPDATE, which SQLite ignores: two workers can be handed the
    # same enqueued trial. A claim on its number decides whose it is before either writes anything to it.
    fleet = loop.fleet
    if not fleet.claim_trial(trial.number):
        raise _TakenElsewhere
    bound = fleet.slots.bind(slot, trial.number)
    if bound is None:
        write(trial, failure_reason="this worker's trial slot was reaped before the trial started")
        loop.study.tell(trial, state=TrialState.FAIL)
        requeue(loop.study, loop.study.trials[trial.number])
        raise _LostSlot
    write(trial, worker=fleet.worker.process)
    write(trial, worker_name=fleet.worker.name)
    write(trial, slot=slot.index)
    write(trial, target_fingerprint=_fleet.describe_fingerprint(fleet.target))
    return bound


def _run_one(loop: Loop, trial: optuna.Trial, done: int) -> bool:
    """Run one asked trial to its end; True when it counts towards the goal."""
    from tuner.report import mark_feasibility

    study, config, console, policy = loop.study, loop.config, loop.console, loop.policy
    emulation = emulation_for(config, trial)  # a batch cap the client plays on one start: chosen, not sampled
    params = suggest(trial, config.space, skip=emulation.names if emulation else ())
    if _rejected(loop, trial, params) or _repeat(study, config, trial, emulation):
        return False
    is_baseline = bool(record_of(trial).is_baseline)
    spec = launch_spec(config, trial) if emulation is None else emulation.spec(config, params)
    loop.budget.check(study, trial, params)
    console.line(_announcement(loop, trial, params, done, baseline=is_baseline))
    if emulation is not None:
        console.line(f"  {emulation.describe()}")
    references = references_for(study, config, trial_number=trial.number)
    # The held failures are alive too: they still wait for their verdicts.
    with Heartbeat(study, trial, interval_s=config.study.heartbeat_s, also=policy.held_ids):
        try:
            result = loop.runner.run(
                trial, spec, label=f"trial-{trial.number:04d}", references=references, emulation=emulation
            )
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


def _announcement(loop: Loop, trial: optuna.Trial, params: dict[str, Value], done: int, *, baseline: bool) -> str:
    """``[3/30, ETA 4m10s] trial #2 (trial): algorithm=DFLASH ...``"""
    goal = loop.goal
    left = study_eta(loop.study.get_trials(deepcopy=False), loop.config, trials_left=goal - done).seconds
    eta = f", ETA {fmt_duration(left)}" if left is not None and goal != UNTIL_DEADLINE else ""
    of = f"/{goal}" if goal != UNTIL_DEADLINE else ""
    seed = record_of(trial).warm_origin
    label = "baseline" if baseline else f"warm start {seed}" if isinstance(seed, str) else "trial"
    return f"[{done + 1}{of}{eta}{loop.budget.describe()}] trial #{trial.number} ({label}): {describe_params(params)}"


def _failure_words(failure: TrialFailure) -> str:
    """``pruned: slower than the best (...)`` or ``failed: did not start [ready] ...``: the console's verdict."""
    if isinstance(failure, RegressionPruned):
        return f"pruned: slower than the best ({failure.reason})"
    return f"{Outcome.of_failure(str(failure.phase), environment=failure.kind == ENVIRONMENT).words} {failure}"


def _rejected(loop: Loop, trial: optuna.Trial, params: dict[str, Value]) -> bool:
    """A sample that breaks a declared constraint ends PRUNED without a restart (TPE learns to avoid it)."""
    violations = loop.config.space.violations(params)
    if not violations:
        return False
    write(trial, rejected=True)
    write(trial, failure_phase="sample")
    write(trial, failure_reason="violates " + ", ".join(str(c) for c in violations))
    loop.study.tell(trial, state=TrialState.PRUNED)
    retry_branch(loop.study, trial)
    return True


def _repeat(study: optuna.Study, config: StudyConfig, trial: optuna.Trial, emulation: Emulation | None) -> bool:
    """A config already measured (or being measured elsewhere) is told its known outcome, never run again. A trial
    that plays its cap is the same config as any trial of its other params (that one chose its cap already)."""
    from tuner.report import mark_feasibility

    ignore = emulation.names if emulation is not None else ()
    duplicate = find_duplicate(study, config, dict(trial.params), trial.number, ignore=ignore)
    if duplicate is not None and record_of(trial).is_baseline and duplicate.state == TrialState.PRUNED:
        duplicate = None  # a baseline PRUNED by an older tune is run again, never taken as its verdict
    if duplicate is None:
        return False
    if emulation is not None:
        settle(trial, emulation, int(duplicate.params.get(emulation.param.name, emulation.server)))
    write(trial, duplicate_of=duplicate.number)
    if duplicate.state == TrialState.COMPLETE:
        for key, value in duplicate.constraints.items():
            trial.set_constraint(key, value)
        mark_feasibility(trial)
        study.tell(trial, duplicate.values)
    elif duplicate.state == TrialState.RUNNING:
        # Another worker measures this config right now: no restart; the slot goes back and the next ask
        # re-samples. FAIL, not PRUNED: this trial says nothing about the config, and TPE ignores FAIL trials.
        write(
            trial, failure_reason=f"re-sampled: same config as trial #{duplicate.number}, running elsewhere"
        )
        study.tell(trial, state=TrialState.FAIL)
    else:
        write(trial, failure_phase=record_of(duplicate).failure_phase or "sample")
        write(trial, failure_reason=f"same config as trial #{duplicate.number}, which failed")
        study.tell(trial, state=TrialState.PRUNED)
    return True
