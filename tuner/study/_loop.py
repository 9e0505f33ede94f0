"""The tuning loop: ask -> run the trial's story -> tell, until the study holds N counted trials.

It uses Optuna's ask-and-tell interface rather than ``study.optimize`` so that every ending is ours to
choose: a failed config ends PRUNED (TPE ignores FAIL trials and would suggest them again), an interrupted
trial ends FAIL and is re-enqueued once, and constraint violations or repeats of an already-measured config
never cost a server restart.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from tuner.config import StudyConfig
from tuner.errors import HostError, TrialFailure, TuneError
from tuner.search import make_pruner, make_sampler, pruning_savings
from tuner.services import BaseService
from tuner.space import Value, format_value, render, suggest
from tuner.study import _attrs as attrs
from tuner.study._faults import storage_faults
from tuner.study._objective import Evidence, TrialParts, TrialRunner
from tuner.study._policy import ENVIRONMENT, FailurePolicy, ask_next, ensure_baseline
from tuner.study._storage import open_study
from tuner.target import base_spec

Progress = Callable[[str], None]
PartsFactory = Callable[[StudyConfig, BaseService], TrialParts]

HEARTBEAT_S = 20.0
STALE_AFTER_S = 90.0
MAX_UNCOUNTED_IN_A_ROW = 200
MAX_HOST_ERRORS_IN_A_ROW = 3
MAX_BRANCH_TRIES = 20
WAIT_FOR_OTHERS_S = 2.0


class Interrupted(TuneError):
    """Ctrl-C or SIGTERM: the running trial was marked FAIL and the server put back per ``on_exit``."""


@dataclass(frozen=True, kw_only=True)
class RunSummary:
    study_name: str
    target: int
    counted: int
    ran: int
    best_number: int | None
    best_values: tuple[float, ...] | None
    seconds: float


# -- which trials count ------------------------------------------------------------------


def is_counted(t: FrozenTrial) -> bool:
    """A trial that ran the server to a verdict (not a rejected sample, a repeat, or an interruption)."""
    if t.state not in (TrialState.COMPLETE, TrialState.PRUNED):
        return False
    return not (t.user_attrs.get(attrs.REJECTED) or t.user_attrs.get(attrs.DUPLICATE_OF) is not None)


def is_feasible(t: FrozenTrial) -> bool:
    return (
        t.state == TrialState.COMPLETE
        and all(v <= 0 for v in t.constraints.values())
        and t.user_attrs.get(attrs.CORRECT, True) is not False
    )


def counted_trials(study: optuna.Study) -> int:
    return sum(1 for t in study.get_trials(deepcopy=False) if is_counted(t))


def best_trials(study: optuna.Study) -> list[FrozenTrial]:
    """Feasible, counted COMPLETE trials: the best one (single objective) or the Pareto front (multi)."""
    done = [t for t in study.get_trials(deepcopy=False) if is_counted(t) and is_feasible(t)]
    if not done:
        return []
    if len(study.directions) == 1:
        return [max(done, key=lambda t: t.values[0])]
    front = []
    for t in done:
        dominated = any(
            all(o >= v for o, v in zip(other.values, t.values, strict=True)) and other.values != t.values
            for other in done
        )
        if not dominated:
            front.append(t)
    return sorted(front, key=lambda t: t.number)


# -- starting points and recovery ------------------------------------------------------------------


def _worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _worker_dead(worker: str) -> bool:
    host, _, pid = worker.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return int(pid) == os.getpid()


def recover_stale_trials(study: optuna.Study, *, now: float | None = None) -> list[int]:
    """Mark RUNNING trials of dead workers FAIL and re-enqueue their params once.

    A trial is stale when its worker process is gone (same host), or its heartbeat stopped. Live trials of
    other workers sharing the study are left alone.
    """
    now = time.time() if now is None else now
    failed = []
    for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        worker = t.user_attrs.get(attrs.WORKER)
        beat = t.user_attrs.get(attrs.HEARTBEAT)
        started = t.datetime_start.timestamp() if t.datetime_start else now
        stale = (
            (worker is not None and _worker_dead(worker))
            or (beat is not None and now - beat > STALE_AFTER_S)
            # No owner at all: killed between becoming RUNNING and writing its worker (one heartbeat is plenty).
            or (beat is None and now - started > (HEARTBEAT_S if worker is None else STALE_AFTER_S))
        )
        if not stale:
            continue
        study._storage.set_trial_user_attr(t._trial_id, attrs.INTERRUPTED, "stale: worker gone")
        study.tell(t.number, state=TrialState.FAIL)
        _requeue(study, t)
        failed.append(t.number)
    return failed


def _requeue(study: optuna.Study, t: FrozenTrial) -> None:
    if t.user_attrs.get(attrs.RETRY_OF) is not None or not t.params:
        return  # once only: a config that kills the tuner twice is not tried a third time
    carried = {k: t.user_attrs[k] for k in (attrs.BASELINE, attrs.SEED, attrs.BRANCH) if k in t.user_attrs}
    study.enqueue_trial(t.params, user_attrs={**carried, attrs.RETRY_OF: t.number})


def enqueue_starting_points(study: optuna.Study, config: StudyConfig) -> None:
    """Trial 0 is the unmodified base command; then the study file's expert seeds; then imported bests."""
    ensure_baseline(study, dict(config.baseline))
    for i, seed in enumerate(config.search.seed_trials):
        study.enqueue_trial(dict(seed), user_attrs={attrs.SEED: i}, skip_if_exists=True)
    if config.search.import_best_from:
        other = optuna.load_study(study_name=config.search.import_best_from, storage=study._storage)
        ranked = sorted(
            (t for t in other.get_trials(deepcopy=False) if is_counted(t) and is_feasible(t)),
            key=lambda t: t.values[0],
            reverse=True,
        )
        names = {p.name for p in config.space.params}
        for t in ranked[: config.search.import_top]:
            params = {k: v for k, v in t.params.items() if k in names}
            study.enqueue_trial(params, user_attrs={attrs.SEED: f"{other.study_name}#{t.number}"}, skip_if_exists=True)
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
                study.enqueue_trial({p.name: choice}, user_attrs={attrs.BRANCH: {p.name: choice}}, skip_if_exists=True)


def find_duplicate(study: optuna.Study, params: dict[str, Value], number: int) -> FrozenTrial | None:
    """A measured (or, with several workers, currently running) trial with exactly these params."""
    for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED, TrialState.RUNNING)):
        if t.number == number or t.params != params:
            continue
        if t.state == TrialState.RUNNING or is_counted(t):
            return t
    return None


# -- the loop ------------------------------------------------------------------


@contextmanager
def _signals_raise() -> Iterator[None]:
    """SIGTERM and SIGHUP (the SSH session running tune dropped) behave like Ctrl-C: the loop gets to mark the
    trial and restore the server."""

    def handler(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


class _Heartbeat:
    """Marks the running trial alive, so other workers (and later runs) can tell a stale trial."""

    def __init__(self, study: optuna.Study, trial: optuna.Trial) -> None:
        self._storage = study._storage
        self._trial_id = trial._trial_id
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="tune-heartbeat", daemon=True)

    def __enter__(self) -> _Heartbeat:
        self._beat()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _beat(self) -> None:
        self._storage.set_trial_user_attr(self._trial_id, attrs.HEARTBEAT, time.time())

    def _loop(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            # A missed beat only risks a false "stale"; never kill the trial for it.
            with contextlib.suppress(Exception):
                self._beat()


class Console:
    """Progress lines on stderr; a live, rewritten status line when stderr is a terminal."""

    def __init__(self, *, stream: Any = None, live: bool | None = None) -> None:
        self._stream = stream or sys.stderr
        self._live = self._stream.isatty() if live is None else live
        self._last_live = -math.inf
        self._dirty = False

    def line(self, text: str) -> None:
        if self._dirty:
            self._stream.write("\r\033[K")
            self._dirty = False
        self._stream.write(text + "\n")
        self._stream.flush()

    def status(self, text: str) -> None:
        if self._live:
            self._stream.write("\r\033[K  " + text[:150])
            self._stream.flush()
            self._dirty = True
            return
        # A log file gets the status every 15 s at most: enough to see a 6-minute load progress.
        now = time.monotonic()
        if now - self._last_live >= 15:
            self._last_live = now
            self.line("  " + text)


def _fmt_duration(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


def run_study(
    config: StudyConfig,
    *,
    trials: int | None = None,
    storage: str | None = None,
    study_name: str | None = None,
    force_config: bool = False,
    parts_factory: PartsFactory | None = None,
    service: BaseService | None = None,
    console: Console | None = None,
    preflight: bool = True,
) -> RunSummary:
    """Run trials until the study holds ``trials`` counted trials in total (a resume continues to N).

    With its own target (no ``service`` given), the preflight runs and the lock is taken before the study is
    created: a broken environment or a busy server is refused with nothing created or changed.
    """
    # Imported here: these packages import tuner.study themselves.
    from tuner.lock import TargetLock, lock_path_for
    from tuner.target import make_host, make_service

    console = console or Console()
    target = trials if trials is not None else config.study.trials
    host = None
    lock: Any = contextlib.nullcontext()
    if service is None:
        host = make_host(config.target)
        service = make_service(config, host)
        if config.target.lock:
            # One tuner per server: a second one would restart the server under the first one's benchmark.
            lock = TargetLock(host=host, path=lock_path_for(config.target), study=study_name or config.study.name)
    progress = _Progress()
    start = time.monotonic()
    try:
        if host is not None and preflight:
            from tuner.preflight import require_preflight

            require_preflight(config, host=host, service=service, storage=storage or config.study.storage)
        with storage_faults(storage or config.study.storage), lock:
            study = _prepare(config, storage=storage, study_name=study_name, force_config=force_config)
            study.set_user_attr(attrs.TARGET_TRIALS, target)
            stale = recover_stale_trials(study)
            if stale:
                console.line(f"marked interrupted trials FAIL and re-enqueued them: {stale}")
            enqueue_starting_points(study, config)
            _run_locked(study, config, service, (parts_factory, console), target, progress)
    finally:
        service.close()
        if host is not None:
            host.close()
    with storage_faults(storage or config.study.storage):
        return _summary(study, config, target, progress, time.monotonic() - start)


def _prepare(config: StudyConfig, *, storage: str | None, study_name: str | None, force_config: bool) -> optuna.Study:
    from tuner.report import write_study_note

    study = open_study(config, storage=storage, study_name=study_name, force_config=force_config)
    # The sampler's seed is offset by what the study already holds (see make_sampler).
    study.sampler = make_sampler(config, offset=len(study.trials))
    study.pruner = make_pruner(config)
    write_study_note(study, config)
    return study


def _run_locked(
    study: optuna.Study,
    config: StudyConfig,
    service: BaseService,
    how: tuple[PartsFactory | None, Console],
    target: int,
    progress: _Progress,
) -> None:
    from tuner.study._parts import http_parts

    parts_factory, console = how
    parts = (parts_factory or http_parts)(config, service)
    evidence = Evidence(artifacts_dir=config.study.artifacts_dir)
    runner = TrialRunner(config=config, parts=parts, evidence=evidence, progress=console.status)
    base = base_spec(config.target)
    policy = FailurePolicy(study=study, max_same_failures=config.search.max_same_failures)
    with _signals_raise():  # also while putting the server back: a second signal must not kill tune mid-restore
        try:
            _drive(study, config, runner, base, console, target, progress, policy)
        except KeyboardInterrupt:
            progress.interrupted = True
            console.line("interrupted: the running trial is marked FAIL and will be retried on resume")
        finally:
            with contextlib.suppress(Exception):  # a storage fault must not hide the real error
                policy.release()
            _put_back(config, study, service, base, console, parts, progress)


def _put_back(
    config: StudyConfig,
    study: optuna.Study,
    service: BaseService,
    base: Any,
    console: Console,
    parts: TrialParts,
    progress: _Progress,
) -> None:
    """Only while we hold the lock: the server is ours to put back."""
    try:
        _on_exit(config, study, service, base, console, parts)
    except KeyboardInterrupt:
        progress.interrupted = True
        console.line(f"interrupted again: on_exit = {config.study.on_exit!r} was not finished (`tune restore` does it)")
    except Exception as exc:  # whatever went wrong, the run's own error is the one to report
        console.line(f"WARNING: could not put the server back ({config.study.on_exit}): {exc}")


def _summary(study: optuna.Study, config: StudyConfig, target: int, progress: _Progress, seconds: float) -> RunSummary:
    # The study-level figure of what regression pruning saved (each trial records its own share).
    study.set_user_attr(attrs.PRUNING_SAVED_S, round(pruning_savings(study), 3))
    best = best_trials(study)
    summary = RunSummary(
        study_name=study.study_name,
        target=target,
        counted=counted_trials(study),
        ran=progress.ran,
        best_number=best[0].number if best else None,
        best_values=tuple(best[0].values) if best else None,
        seconds=round(seconds, 1),
    )
    if progress.interrupted:
        raise Interrupted(
            f"stopped at {summary.counted}/{target} trials. Resume with: tune start --trials {target} "
            f"--config {config.source}   (or: tune resume --study {study.study_name})"
        )
    return summary


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
    policy: FailurePolicy,
) -> None:
    durations: list[float] = []
    uncounted_in_a_row = 0
    host_errors_in_a_row = 0
    while (done := _next_slot(study, target, policy, console)) is not None:
        if uncounted_in_a_row >= MAX_UNCOUNTED_IN_A_ROW:
            raise TuneError(
                f"the sampler proposed {uncounted_in_a_row} configs in a row that violate constraints or "
                "repeat measured ones: the search space looks exhausted or over-constrained"
            )
        trial = ask_next(study)
        trial.set_user_attr(attrs.WORKER, _worker_id())
        t0 = time.monotonic()
        try:
            counted = _run_one(study, trial, config, runner, base, console, (done, target), durations, policy)
        except KeyboardInterrupt:
            study._storage.set_trial_user_attr(trial._trial_id, attrs.INTERRUPTED, "Ctrl-C or SIGTERM")
            study.tell(trial, state=TrialState.FAIL)
            _requeue(study, study.trials[trial.number])
            raise
        except HostError as exc:
            # The host, not the config, failed (SSH dropped, a command timed out): FAIL keeps the sampler from
            # learning anything from it, and the params are retried once the host is back.
            host_errors_in_a_row += 1
            study._storage.set_trial_user_attr(trial._trial_id, attrs.FAILURE_PHASE, "host")
            study._storage.set_trial_user_attr(trial._trial_id, attrs.FAILURE_KIND, ENVIRONMENT)
            study._storage.set_trial_user_attr(trial._trial_id, attrs.FAILURE_REASON, str(exc)[:1000])
            study.tell(trial, state=TrialState.FAIL)
            _requeue(study, study.trials[trial.number])
            console.line(f"  host error (trial will be retried): {exc}")
            if host_errors_in_a_row >= MAX_HOST_ERRORS_IN_A_ROW:
                raise HostError(f"{host_errors_in_a_row} host errors in a row, giving up; last: {exc}") from exc
            time.sleep(min(30.0, 2.0**host_errors_in_a_row))
            continue
        host_errors_in_a_row = 0
        if counted:
            progress.ran += 1
            uncounted_in_a_row = 0
            durations.append(time.monotonic() - t0)
        else:
            uncounted_in_a_row += 1


def _next_slot(study: optuna.Study, target: int, policy: FailurePolicy, console: Console) -> int | None:
    """The number of counted trials when another trial may start now; None once the study holds ``target``.

    Other workers' running trials count as in flight, so several workers sharing a study stop at N together;
    but a run never ends short of N while a RUNNING trial is only a dead worker's leftover: it waits, and
    recovers trials that turn stale meanwhile.
    """
    while (done := counted_trials(study)) < target:
        running = len(study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)))
        if done + running < target:
            return done
        if policy.holding:
            policy.release()  # the held failures are the last trials of the run: their verdicts are due now
            continue
        console.status(f"{done}/{target} counted; waiting for {running} trial(s) running elsewhere")
        time.sleep(WAIT_FOR_OTHERS_S)
        stale = recover_stale_trials(study)
        if stale:
            console.line(f"marked trials of dead workers FAIL and re-enqueued them: {stale}")
    return None


def _run_one(
    study: optuna.Study,
    trial: optuna.Trial,
    config: StudyConfig,
    runner: TrialRunner,
    base: Any,
    console: Console,
    position: tuple[int, int],
    durations: list[float],
    policy: FailurePolicy,
) -> bool:
    """Run one asked trial to its end; True when it counts towards the target."""
    from tuner.report import mark_feasibility

    params = suggest(trial, config.space)
    violations = config.space.violations(params)
    if violations:
        trial.set_user_attr(attrs.REJECTED, True)
        trial.set_user_attr(attrs.FAILURE_PHASE, "sample")
        trial.set_user_attr(attrs.FAILURE_REASON, "violates " + ", ".join(str(c) for c in violations))
        study.tell(trial, state=TrialState.PRUNED)
        _retry_branch(study, trial)
        return False
    is_baseline = bool(trial.user_attrs.get(attrs.BASELINE))
    duplicate = find_duplicate(study, dict(trial.params), trial.number)
    if duplicate is not None and is_baseline and duplicate.state == TrialState.PRUNED:
        duplicate = None  # a baseline PRUNED by an older tune is run again, never taken as its verdict
    if duplicate is not None:
        trial.set_user_attr(attrs.DUPLICATE_OF, duplicate.number)
        if duplicate.state == TrialState.COMPLETE:
            for key, value in duplicate.constraints.items():
                trial.set_constraint(key, value)
            mark_feasibility(trial)
            study.tell(trial, duplicate.values)
        elif duplicate.state == TrialState.RUNNING:
            # Another worker measures this config right now (two workers enqueued the same baseline, say).
            # FAIL, not PRUNED: this trial says nothing about the config, and TPE ignores FAIL trials.
            trial.set_user_attr(attrs.FAILURE_REASON, f"same config as trial #{duplicate.number}, running elsewhere")
            study.tell(trial, state=TrialState.FAIL)
        else:
            trial.set_user_attr(attrs.FAILURE_PHASE, duplicate.user_attrs.get(attrs.FAILURE_PHASE, "sample"))
            trial.set_user_attr(attrs.FAILURE_REASON, f"same config as trial #{duplicate.number}, which failed")
            study.tell(trial, state=TrialState.PRUNED)
        return False
    done, target = position
    spec = base if is_baseline else render(config.space, base, params)
    eta = ""
    if durations:
        mean = sum(durations) / len(durations)
        eta = f", ETA {_fmt_duration(mean * (target - done))}"
    label = "baseline" if is_baseline else "trial"
    console.line(f"[{done + 1}/{target}{eta}] trial #{trial.number} ({label}): {_describe(params)}")
    with _Heartbeat(study, trial):
        try:
            result = runner.run(trial, spec, label=f"trial-{trial.number:04d}")
        except TrialFailure as failure:
            console.line(f"  failed: [{failure.phase}] {failure.reason}")
            policy.failed(trial, failure, baseline=is_baseline)
            return True
    policy.success()
    mark_feasibility(trial)
    study.tell(trial, list(result.values))
    best = best_trials(study)
    best_text = f"; best #{best[0].number} {_values(best[0].values)}" if best else ""
    console.line(f"  score {_values(result.values)}{best_text}")
    return True


def _retry_branch(study: optuna.Study, trial: optuna.Trial) -> None:
    """A branch trial whose sampled values broke a constraint: the branch is still unexplored, so try again."""
    branch = trial.user_attrs.get(attrs.BRANCH)
    if branch is None:
        return
    tries = sum(1 for t in study.get_trials(deepcopy=False) if t.user_attrs.get(attrs.BRANCH) == branch)
    if tries < MAX_BRANCH_TRIES:  # a branch whose every config breaks a constraint is given up, not looped on
        study.enqueue_trial(dict(branch), user_attrs={attrs.BRANCH: branch})


def _describe(params: dict[str, Value]) -> str:
    return " ".join(f"{k}={format_value(v)}" for k, v in params.items())


def _values(values: Any) -> str:
    return "/".join(f"{v:.1f}" for v in values if isinstance(v, float) and math.isfinite(v))


def _on_exit(
    config: StudyConfig,
    study: optuna.Study,
    service: BaseService,
    base: Any,
    console: Console,
    parts: TrialParts,
) -> None:
    """Leave the server in a known configuration, as the study file asks."""
    from tuner.readiness import wait_ready

    action = config.study.on_exit
    if action == "leave":
        return
    if action == "stop":
        service.stop()
        return
    if action == "best":
        best = best_trials(study)
        if not best:
            console.line("no feasible best trial: restoring the baseline instead")
            action = "baseline"
        else:
            service.apply(render(config.space, base, best[0].params))
            console.line(f"restarting with the best config (trial #{best[0].number})")
    if action == "baseline":
        service.revert()
        console.line("restoring the baseline configuration")
    restarted = service.restart(label="on-exit")
    try:
        (parts.readiness or wait_ready)(
            service=service,
            restarted=restarted,
            endpoint=parts.endpoint,
            config=config.readiness,
            progress=console.status,
        )
    except TrialFailure as failure:
        console.line(f"WARNING: the server did not come back after {action}: {failure.reason}")
