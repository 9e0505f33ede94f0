"""The failure policy's pure parts: classification, signatures, and the verdicts it gives on a real study."""

from __future__ import annotations

import optuna
import pytest
from optuna.trial import TrialState

from tuner.errors import EnvironmentFault, GateFailed, NotReady, StartFailed
from tuner.study._policy import CONFIG, ENVIRONMENT, FailurePolicy, ask_next, classify, ensure_baseline, signature
from tuner.trials import record_of


@pytest.mark.parametrize(
    ("failure", "kind"),
    [
        (
            StartFailed("server logged a fatal error while starting: OSError: [Errno 98] Address already in use"),
            ENVIRONMENT,
        ),
        (StartFailed("server process exited with status 127 while starting"), ENVIRONMENT),
        (
            StartFailed("server process exited with status 1: PermissionError: [Errno 13] Permission denied"),
            ENVIRONMENT,
        ),
        (StartFailed("server process exited with status 1: torch.OutOfMemoryError: CUDA out of memory"), CONFIG),
        (StartFailed("AssertionError: draft window must be >= block size"), CONFIG),
        (GateFailed("correctness gate: 1/5 passed (need 4)", evidence="Permission denied"), CONFIG),
        (NotReady("/health answered 404 5 times in a row", kind=ENVIRONMENT), ENVIRONMENT),
    ],
)
def test_classify(failure: StartFailed, kind: str) -> None:
    assert classify(failure) == kind


def test_signature_strips_what_varies_between_runs() -> None:
    a = signature("ready", "exited with status 2 while starting: error: unrecognized arguments: --x 17 (/tmp/a/b.log)")
    b = signature("ready", "exited with status 2 while starting: error: unrecognized arguments: --x 3 (/var/log/c.log)")
    assert a == b and "<n>" in a and "<path>" in a
    assert a != signature("apply", "exited with status 2 while starting: error: unrecognized arguments: --x 3 (/c)")


def _study() -> optuna.Study:
    return optuna.create_study(storage=optuna.storages.InMemoryStorage())


def _fail(study: optuna.Study, policy: FailurePolicy, x: int, reason: str) -> optuna.Trial:
    study.enqueue_trial({"x": x})
    trial = study.ask()
    trial.suggest_int("x", 0, 100)
    policy.failed(trial, StartFailed(reason), baseline=False)
    return trial


def test_three_identical_failures_on_different_params_stop_as_environment() -> None:
    study = _study()
    policy = FailurePolicy(study=study, max_same_failures=3)
    _fail(study, policy, 1, "server process exited with status 1: NCCL error 12")
    _fail(study, policy, 2, "server process exited with status 1: NCCL error 7")
    assert policy.holding == 2  # verdicts held back: they may still be the environment's
    with pytest.raises(EnvironmentFault, match=r"3 trials in a row .* failed the same way"):
        _fail(study, policy, 3, "server process exited with status 1: NCCL error 3")
    trials = study.get_trials(states=(TrialState.FAIL,))
    assert len(trials) == 3 and all(record_of(t).failure_kind == ENVIRONMENT for t in trials)
    assert len(study.get_trials(states=(TrialState.WAITING,))) == 3  # their params run again


def test_a_different_failure_or_a_success_releases_the_held_trials_as_the_configs() -> None:
    study = _study()
    policy = FailurePolicy(study=study, max_same_failures=3)
    _fail(study, policy, 1, "server process exited with status 1: NCCL error 12")
    _fail(study, policy, 2, "server process exited with status 1: something else entirely")
    assert [t.state for t in study.trials] == [TrialState.PRUNED, TrialState.RUNNING]
    policy.success()
    assert [t.state for t in study.trials] == [TrialState.PRUNED, TrialState.PRUNED]


def test_a_failed_baseline_is_enqueued_again_and_taken_first() -> None:
    study = _study()
    ensure_baseline(study, {"x": 5})
    study.enqueue_trial({"x": 9})
    trial = ask_next(study)
    assert record_of(trial).is_baseline
    policy = FailurePolicy(study=study)
    with pytest.raises(EnvironmentFault, match="the unmodified base command fails"):
        policy.failed(trial, StartFailed("server process exited with status 2"), baseline=True)
    assert study.trials[0].state == TrialState.FAIL
    ensure_baseline(study, {"x": 5})
    again = ask_next(study)  # the new baseline is younger than the waiting x=9, and still goes first
    assert record_of(again).is_baseline and again.number == 2
