"""The tuning run: open the study, lock the server, run the trial loop (:mod:`tuner.study._drive`), confirm and
gate the top at the end, put the server back as ``on_exit`` says, and summarise.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass

import optuna
from optuna.trial import TrialState

from tuner.config import StudyConfig
from tuner.errors import TrialFailure, TuneError
from tuner.search import make_pruner, make_sampler, pruning_savings
from tuner.space import count_configs
from tuner.stats import import_statistics
from tuner.study import _fleet
from tuner.study._budget import UNTIL_DEADLINE, TimeBudget
from tuner.study._confirm import bring_up_spec, maybe_confirm
from tuner.study._console import Console
from tuner.study._drive import SPACE_COUNT_LIMIT, Loop, drive
from tuner.study._faults import RUN_AFTERMATH, storage_faults
from tuner.study._objective import Evidence, TrialParts, TrialRunner
from tuner.study._policy import FailurePolicy, ensure_baseline
from tuner.study._recovery import recover_stale_trials
from tuner.study._signals import stop_signals
from tuner.study._starts import enqueue_starting_points
from tuner.study._storage import open_study
from tuner.study._warm import read_warm_start, warm_prior
from tuner.study._warmups import describe_warmups
from tuner.target import Target, open_target
from tuner.trials import WarmStart, counted_trials, recommended, record_of, study_record, write_study
from tuner.trials.adapter import storage_of

__all__ = ["Interrupted", "RunSummary", "resume_command", "run_study"]

PartsFactory = Callable[[StudyConfig, Target], TrialParts]


class Interrupted(TuneError):
    """Ctrl-C or SIGTERM: the running trial was marked FAIL and the server put back per ``on_exit``."""

    def __init__(self, message: str, *, ran: int | None = None) -> None:
        super().__init__(message)
        self.ran = ran
        """Trials the interrupted run ran (the notify summary's ``run_now``)."""


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
    on_locked: Callable[[], None] | None = None,
    on_open: Callable[[], None] | None = None,
) -> RunSummary:
    """Run trials until the study holds ``trials`` counted trials in total (a resume continues to N), then
    re-measure and gate the top (``confirm=True`` forces it: ``tune best --confirm``).

    ``target`` replaces the config's (the in-process model brings its own); closed at the end either way.
    ``deadline`` (Unix time): no trial starts that would end after it; without ``trials``, run until then.
    ``worker_name`` names this worker of a fleet; a server unlike the study's is refused unless
    ``allow_mixed_targets``. With the config's own target the preflight runs and the lock is taken before the
    study is created: a broken environment or a busy server is refused with nothing created or changed;
    ``on_locked`` is called once the lock is held (the run is the study's: its run record), ``on_open`` once the
    preflight passed and the study is open (a detached run is under way: its parent stops watching).
    """
    from_file = config  # what the study file says: a hint addresses the study by the file only if it names it
    if study_name and study_name != config.study.name:
        # The lock record, the notes and the resume hint must name the study that runs, not the file's default.
        config = dataclasses.replace(config, study=dataclasses.replace(config.study, name=study_name))
    run = _Run(
        config=config,
        console=console or Console(),
        storage=storage or config.study.storage,
        goal=trials if trials is not None else (UNTIL_DEADLINE if deadline else config.study.trials),
        parts_factory=parts_factory,
        confirm=confirm,
        deadline=deadline,
    )
    run.begin()
    check = target is None and preflight
    target = target or open_target(config)
    worker = _fleet.WorkerId.for_target(config, name=worker_name)
    start = time.monotonic()
    with storage_faults(run.storage, aftermath=RUN_AFTERMATH), target, target.locked():
        if on_locked is not None:
            on_locked()
        study = _open(run, target, worker, storage=storage, force_config=force_config, check=check,
                      allow_mixed_targets=allow_mixed_targets)  # fmt: skip
        (on_open or _nothing)()
        _run_locked(run, study, target)
    with storage_faults(run.storage):
        summary = _summarise(study, run, seconds=time.monotonic() - start)
    if run.interrupted:
        hint = resume_command(from_file, run.storage, run.goal, study=config.study.name)
        raise Interrupted(f"stopped at {summary.counted}/{run.goal} trials. Resume with: {hint}", ran=summary.ran)
    return summary


def _nothing() -> None:
    pass


@dataclass(kw_only=True)
class _Run:
    """One run of a study, from start to summary: the run context every step of it reads."""

    config: StudyConfig
    console: Console
    storage: str
    goal: int
    parts_factory: PartsFactory | None
    confirm: bool
    deadline: float | None
    space_size: int | None = None
    fleet: _fleet.Fleet | None = None
    ran: int = 0
    interrupted: bool = False

    def begin(self) -> None:
        """Say once which dialect a real server speaks, and fit the goal to the space."""
        if self.parts_factory is None:
            for line in self.config.dialect.describe():
                self.console.line(line)
        self.fit_goal_to_space()

    def fit_goal_to_space(self) -> None:
        """A space smaller than the goal ends the study once every config is measured, as a normal end."""
        self.space_size = count_configs(self.config.space, limit=SPACE_COUNT_LIMIT)
        if self.space_size is not None and self.goal > self.space_size:
            if self.goal != UNTIL_DEADLINE:
                self.console.line(
                    f"the search space holds {self.space_size} configs: the study ends once all are measured"
                )
            self.goal = self.space_size


def _open(
    run: _Run,
    target: Target,
    worker: _fleet.WorkerId,
    *,
    storage: str | None,
    force_config: bool,
    check: bool,
    allow_mixed_targets: bool,
) -> optuna.Study:
    """Under the lock: the preflight, the study (created or resumed), its fleet bookkeeping and its targets."""
    from tuner.target import require_preflight

    config = run.config
    if check:
        # Under the lock: when another tune holds the server, its lock names it; the preflight would only
        # see "a port held by a process this study did not start".
        require_preflight(config, storage=storage)
    study, run.fleet = _prepare_study(
        config,
        storage=storage,
        study_name=config.study.name,
        force_config=force_config,
        console=run.console,
        worker=worker,
    )
    if run.goal > 0:  # `tune finish` / `best --confirm` run no trial: the study's own target stands
        write_study(study, target_trials=run.goal)
    write_study(study, confirm_top=config.search.confirm_top)
    run.fleet.target = _fleet.target_fingerprint(config, target.host)
    _fleet.check_target(run.fleet.claims, run.fleet.target, allow_mixed=allow_mixed_targets)
    return study


def resume_command(config: StudyConfig, storage: str, goal: int, *, study: str | None = None) -> str:
    """A command that continues study ``study`` (default: the config's) to ``goal`` trials, as it can be pasted:
    the one place that writes it (the interrupt's hint, a detached run's, a complete study's)."""
    from tuner.report import tune_command

    name = study or config.study.name
    command = tune_command("start", config, storage=storage, study=name)
    if command.startswith("tune start --config"):
        return command.replace("tune start", f"tune start --trials {goal}", 1)
    return tune_command("resume", config, storage=storage, study=name) + f" --trials {goal}"


def _run_locked(run: _Run, study: optuna.Study, target: Target) -> None:
    """The trial loop, then the end of the study (confirmation and gate), then ``on_exit``: signals held back
    while the server is put back, so a second Ctrl-C cannot kill tune mid-restore."""
    from tuner.study._parts import http_parts

    config, console = run.config, run.console
    assert run.fleet is not None
    parts = (run.parts_factory or http_parts)(config, target)
    runner = TrialRunner(
        config=config, parts=parts, evidence=Evidence(artifacts_dir=config.study.artifacts_dir), progress=console.status
    )
    loop = Loop(
        study=study,
        config=config,
        runner=runner,
        console=console,
        goal=run.goal,
        fleet=run.fleet,
        policy=FailurePolicy(study=study, max_same_failures=config.search.max_same_failures),
        budget=TimeBudget(deadline=run.deadline, config=config),
    )
    import_statistics()  # before the signals are armed (see import_statistics)
    try:
        with stop_signals():
            try:
                drive(loop)
                _end_of_study(run, loop, parts)
            except KeyboardInterrupt:
                run.interrupted = True
                console.line("interrupted: the running trial is marked FAIL and will be retried on resume")
            finally:
                run.ran = loop.ran
                with contextlib.suppress(Exception):  # a storage fault must not hide the run's own error
                    loop.policy.release()
                _put_back(run, study, target)
    except KeyboardInterrupt:  # held back by the run's last storage write until the run had ended
        run.interrupted = True
        console.line("interrupted as the run ended: every trial kept its verdict")


def _end_of_study(run: _Run, loop: Loop, parts: TrialParts) -> None:
    """What a study does once its trials are run: say a small space is exhausted, confirm the top, gate it."""
    assert run.fleet is not None
    if run.space_size is not None and counted_trials(loop.study) >= run.space_size:
        run.console.line(f"all {run.space_size} configs of the space were measured")
    if loop.budget.remaining_s() > 0:
        loop.policy.release()
        maybe_confirm(
            loop.study,
            run.config,
            parts=parts,
            console=run.console,
            force=run.confirm,
            claim=run.fleet.claim_confirmation,
            until=run.deadline,
        )


def _put_back(run: _Run, study: optuna.Study, target: Target) -> None:
    """Only while we hold the lock: the server is ours to put back."""
    config, console = run.config, run.console
    try:
        _on_exit(config, study, target, console)
    except KeyboardInterrupt:
        run.interrupted = True
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
    """Open (or create) the study, recover dead trials, enqueue the starts, give it its sampler and pruner."""
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
    write_study_note(study, config)
    stale = recover_stale_trials(study, stale_after_s=config.study.stale_after_s)
    if stale:
        console.line(f"marked interrupted trials FAIL and re-enqueued them: {stale}")
    # One worker enqueues the starting points: the baseline is measured exactly once however many start together.
    has_baseline = any(record_of(t).is_baseline for t in study.get_trials(deepcopy=False))
    if _fleet.claim_starting_points(
        fleet.claims, worker, has_baseline=has_baseline, stale_after_s=config.study.stale_after_s
    ):
        try:
            warm = _warm_start(config, storage=storage or config.study.storage, console=console)
        except BaseException:
            _drop_if_empty(study)  # a warm start that cannot be read leaves no empty study behind
            raise
        enqueue_starting_points(study, config, warm=warm)
    else:
        _retry_failed_baseline(study, config, fleet)
        if has_baseline and config.search.warm_start and study_record(study).warm_start is None:
            console.line(
                f"warm start from {config.search.warm_start} not applied: study {study.study_name} had started "
                "already (a warm start chooses a new study's first trials)"
            )
    # A fleet's other worker may not have written the warm start's record yet: then the study file decides.
    warm = study_record(study).warm_start
    search = config.search
    with_prior = warm.prior if warm is not None else search.warm_start is not None and search.warm_start_prior
    study.sampler = make_sampler(seeded, offset=0, prior=warm_prior(config) if with_prior else None)
    study.pruner = make_pruner(config)
    return study, fleet


def _drop_if_empty(study: optuna.Study) -> None:
    """Delete a study that holds no trial (created by this run, which is failing before its first)."""
    with contextlib.suppress(Exception):  # the run's own error is the one to report
        if not study.get_trials(deepcopy=False):
            optuna.delete_study(study_name=study.study_name, storage=storage_of(study))


def _warm_start(config: StudyConfig, *, storage: str, console: Console) -> WarmStart | None:
    """The other study's results, read once for a study starting now; what was carried over, said."""
    if config.search.warm_start is None:
        return None
    warm = read_warm_start(config, storage=storage)
    for line in warm.lines():
        console.line(line)
    return warm


def _retry_failed_baseline(study: optuna.Study, config: StudyConfig, fleet: _fleet.Fleet) -> None:
    """A baseline that failed (the environment was broken) runs again: one worker enqueues it, per failure."""
    failed = [
        t
        for t in study.get_trials(deepcopy=False)
        if record_of(t).is_baseline and t.state in (TrialState.FAIL, TrialState.PRUNED)
    ]
    key = f"tune:baseline-retry:{len(failed)}"
    if failed and fleet.claims.claim(key, {"worker": fleet.worker.process}) is not None:
        ensure_baseline(study, dict(config.baseline))


def _summarise(study: optuna.Study, run: _Run, *, seconds: float) -> RunSummary:
    # The study-level figure of what regression pruning saved (each trial records its own share).
    write_study(study, pruning_saved_s=round(pruning_savings(study), 3))
    if warmups := describe_warmups(study, run.config):
        write_study(study, warmups=warmups)  # for the report, which does not do statistics
    rec = recommended(study)
    return RunSummary(
        study_name=study.study_name,
        storage=run.storage,
        target=run.goal,
        counted=counted_trials(study),
        ran=run.ran,
        best_number=rec.trial.number if rec is not None else None,
        seconds=round(seconds, 1),
        space_size=run.space_size,
    )


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
            spec = bring_up_spec(config, rec.trial)
            console.line(f"restarting with the recommended config (trial #{rec.trial.number})")
        else:
            console.line("no feasible best trial: restoring the baseline instead")
    if spec is None:
        console.line("restoring the baseline configuration")
    try:
        target.bring_up(spec, label="on-exit", progress=console.status)
    except TrialFailure as failure:
        console.line(f"WARNING: the server did not come back after {action}: {failure.reason}")
