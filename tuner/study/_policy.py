"""Whose fault is a failed trial: the configuration's, or the world's?

A configuration's failure (out of memory at start, an assertion about its params, death under load, a
regression, the gate) ends PRUNED and counts: TPE learns to stay away from it. An environment's failure (a
port held by a stranger, a missing program, permission denied, a wrong URL, storage, the host) says nothing
about the params: it ends FAIL, never counts, never makes its params a ``duplicate_of`` target, and the params
are enqueued again so they run once the environment is fixed. The run stops at once with exit status 3.

Two more rules catch what a single failure cannot tell:
- the baseline (the unmodified base command) must work: when it does not, no sampled trial can be judged,
  so the run stops at once;
- K consecutive trials failing with the same *signature* (phase + reason with numbers, paths and pids
  stripped) on different params are the environment, not K bad configs. The loop holds back the verdict of
  a failed trial until the next trial ends, so that a streak can still be re-classified as FAIL.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass, field

import optuna
from optuna.trial import FrozenTrial, TrialState

from tuner.errors import EnvironmentFault, GateFailed, RegressionPruned, TrialFailure
from tuner.trials import enqueue, record_of, write, write_stored
from tuner.trials.adapter import pop_waiting, storage_of, trial_id

__all__ = [
    "CONFIG",
    "ENVIRONMENT",
    "FailurePolicy",
    "ask_next",
    "classify",
    "ensure_baseline",
    "requeue_params",
    "signature",
]

CONFIG = "config"
ENVIRONMENT = "environment"

# Reasons that can only come from the world around the server, whatever its params.
_ENVIRONMENT_PATTERNS = tuple(
    re.compile(p, re.IGNORECASE)
    for p in (
        r"address already in use|EADDRINUSE|errno 98\b",
        r"exited with status 12[67]\b|command not found|not found in PATH",
        r"permission denied|EACCES|operation not permitted",
        r"no space left on device|read-only file system|disk quota exceeded",
        r"could not launch the server",
    )
)
# Failures that evidently follow from the params, even when several in a row read the same once numbers are
# stripped (three too-big trees in a row all say "out of memory"): they never trip the repeated-failure rule.
_CONFIG_EVIDENT = tuple(
    re.compile(p, re.IGNORECASE) for p in (r"out ?of ?memory|OutOfMemoryError|CUDA error: out of memory", r"Assert")
)
_NORMALISE = (
    (re.compile(r"(?:[A-Za-z]:)?(?:/[\w.@+-]+)+/?"), "<path>"),
    (re.compile(r"\b0x[0-9a-fA-F]+\b"), "<hex>"),
    (re.compile(r"\d+(?:\.\d+)?"), "<n>"),
    (re.compile(r"\s+"), " "),
)


def classify(failure: TrialFailure) -> str:
    """``environment`` or ``config``: the failure site's own verdict, else the reason's tell-tale words."""
    if failure.kind is not None:
        return failure.kind
    if isinstance(failure, GateFailed | RegressionPruned):
        return CONFIG
    text = f"{failure.reason}\n{failure.evidence[-2000:]}"
    return ENVIRONMENT if any(p.search(text) for p in _ENVIRONMENT_PATTERNS) else CONFIG


def signature(phase: str, reason: str) -> str:
    """The failure with what varies between runs (numbers, paths, pids, addresses) stripped."""
    text = reason
    for pattern, repl in _NORMALISE:
        text = pattern.sub(repl, text)
    return f"[{phase}] {text.strip()}"


def _trips_streak(failure: TrialFailure) -> bool:
    if isinstance(failure, GateFailed | RegressionPruned) or failure.phase == "benchmark":
        return False
    return not any(p.search(failure.reason) for p in _CONFIG_EVIDENT)


# -- the queue: baseline first, environment failures retried ---------------------------------------------


def ensure_baseline(study: optuna.Study, baseline: dict[str, object]) -> None:
    """Enqueue the baseline unless it completed, waits, or runs (a FAIL baseline is run again)."""
    for t in study.get_trials(deepcopy=False):
        if not record_of(t).is_baseline:
            continue
        if t.state in (TrialState.WAITING, TrialState.RUNNING, TrialState.COMPLETE):
            return
    enqueue(study, baseline, is_baseline=True)


def ask_next(study: optuna.Study) -> optuna.Trial:
    """``study.ask()``, except that a waiting baseline is taken before every other waiting trial.

    Optuna pops waiting trials oldest first; a baseline enqueued again (it failed last time) is younger than
    the seeds and retries waiting before it, but nothing sampled may run before the baseline has worked.
    """
    baseline = pop_waiting(study, lambda t: bool(record_of(t).is_baseline))
    return baseline if baseline is not None else study.ask()


def requeue_params(study: optuna.Study, t: FrozenTrial) -> None:
    """Enqueue an environment-failed trial's params again (once per waiting copy), keeping its role."""
    if not t.params or record_of(t).is_baseline:
        return  # the baseline is enqueued by ensure_baseline on the next start
    for other in study.get_trials(deepcopy=False, states=(TrialState.WAITING,)):
        if other.system_attrs.get("fixed_params") == t.params:
            return
    enqueue(study, t.params, **record_of(t).retry(baseline=False))


# -- verdicts ------------------------------------------------------------------


@dataclass
class _Held:
    number: int
    trial_id: int
    params: dict[str, object]


@dataclass
class FailurePolicy:
    """Ends failed trials per their kind and stops the run when the environment is at fault.

    ``max_same_failures`` is K of the repeated-failure rule (0 disables it).
    """

    study: optuna.Study
    max_same_failures: int = 3
    _held: list[_Held] = field(default_factory=list)
    _signature: str | None = None

    def success(self) -> None:
        """A trial reached a verdict: the held failures were the configs' own."""
        self.release()

    def failed(self, trial: optuna.Trial, failure: TrialFailure, *, baseline: bool) -> None:
        """Record ``failure``; raise :class:`EnvironmentFault` when the run must stop."""
        kind = classify(failure)
        baseline = baseline and not isinstance(failure, RegressionPruned)
        # A failing baseline is never a sampled config's fault: it ran no sampled param.
        write(trial, failure_kind=ENVIRONMENT if baseline else kind)
        if baseline:
            self.release()
            self._end_fail(trial_id(trial), trial.number)
            raise EnvironmentFault(
                f"the unmodified base command fails: {failure}; fix the environment or "
                "the base command, then run `tune start` again"
            )
        if kind == ENVIRONMENT:
            self.release()
            self._end_fail(trial_id(trial), trial.number)
            raise EnvironmentFault(
                f"trial #{trial.number} failed because of its environment, not its config: {failure}; nothing "
                "was counted and its params will run again: fix it, then run "
                "`tune start` again"
            )
        if not _trips_streak(failure) or self.max_same_failures <= 0:
            self.release()
            self.study.tell(trial, state=TrialState.PRUNED)
            return
        self._hold(trial, signature(str(failure.phase), failure.reason))

    def _hold(self, trial: optuna.Trial, sig: str) -> None:
        if sig != self._signature:
            self.release()
            self._signature = sig
        self._held.append(_Held(number=trial.number, trial_id=trial_id(trial), params=dict(trial.params)))
        distinct = {tuple(sorted((k, repr(v)) for k, v in h.params.items())) for h in self._held}
        if len(distinct) < self.max_same_failures:
            return
        held, self._held, self._signature = self._held, [], None
        for h in held:
            write_stored(self.study, h.trial_id, failure_kind=ENVIRONMENT)
            self._end_fail(h.trial_id, h.number)
        raise EnvironmentFault(
            f"{len(held)} trials in a row (#{held[0].number}-#{held[-1].number}) failed the same way on different "
            f"configs: {sig}. That is the environment, the base command or a flag of the space (`tune check` "
            "verifies them), not the sampled values: nothing was counted and their params will run again; fix it, "
            "then run `tune start` again"
        )

    def _end_fail(self, trial_id: int, number: int) -> None:
        self.study.tell(number, state=TrialState.FAIL)
        requeue_params(self.study, storage_of(self.study).get_trial(trial_id))

    def release(self) -> None:
        """End the held failures as the configs' own (PRUNED, counted)."""
        held, self._held, self._signature = self._held, [], None
        for h in held:
            # Another worker may have recovered it as stale meanwhile: its verdict stands.
            with contextlib.suppress(ValueError, RuntimeError):
                self.study.tell(h.number, state=TrialState.PRUNED, skip_if_finished=True)

    @property
    def holding(self) -> int:
        return len(self._held)

    @property
    def held_numbers(self) -> list[int]:
        return [h.number for h in self._held]

    def held_ids(self) -> list[int]:
        """Storage ids of the held trials (their heartbeat must go on while they wait for a verdict)."""
        return [h.trial_id for h in self._held]
