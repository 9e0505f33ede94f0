"""What became of a trial, in one vocabulary for the console, ``tune status``, notes, exports and the report.

The words matter: a config that was only *slower* than the best is "pruned", never "failed" (it started,
served and answered; its log is healthy). "Failed" is kept for configs that did not start, died under load or
gave wrong answers, the ones a user must never deploy.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any

from optuna.trial import FrozenTrial, TrialState

from tuner.trials import _attrs as attrs
from tuner.trials._ranking import is_feasible
from tuner.trials._verdicts import gate_pending

__all__ = ["Outcome", "infeasibility", "outcome", "outcome_text"]


class Outcome(StrEnum):
    """What became of a counted trial, in the order the report lists them (each is its own words' short form:
    an outcome compares and prints as its string)."""

    FEASIBLE = "feasible"
    NOT_GATED = "not gated (behind the best)"
    NOT_GATED_YET = "not gated yet (finalists only)"
    NOT_FINALIST = "not gated (not a finalist)"
    WRONG = "infeasible (wrong answers)"
    MISSES_SLO = "infeasible (misses the SLO)"
    SLOWER = "pruned (slower)"
    NOT_STARTED = "failed to start"
    DIED = "died under load"
    ENVIRONMENT = "environment"
    OTHER = "other failure"

    @property
    def words(self) -> str:
        """The outcome as every view prints it."""
        return _WORDS[self]

    @classmethod
    def of(cls, t: FrozenTrial) -> str:
        """What became of ``t``: an :class:`Outcome` for a COMPLETE or PRUNED trial (the state's name otherwise)."""
        return outcome(t)

    @classmethod
    def of_failure(cls, phase: str, *, slower: bool = False, environment: bool = False) -> Outcome:
        """The outcome of a trial that ended in ``phase`` (``slower``: the regression pruner stopped it)."""
        if environment:
            return cls.ENVIRONMENT
        if slower:
            return cls.SLOWER
        if phase == "gate":
            return cls.WRONG
        if phase in _START_PHASES:
            return cls.NOT_STARTED
        if phase == "benchmark":
            return cls.DIED
        return cls.OTHER

    @classmethod
    def text(cls, t: FrozenTrial) -> str:
        """What became of ``t`` in a few words, the same in every view (:func:`outcome_text`)."""
        return outcome_text(t)


_START_PHASES = ("apply", "restart", "ready", "verify")

_WORDS: dict[str, str] = {
    Outcome.FEASIBLE: "feasible",
    Outcome.NOT_GATED: "not gated: too far behind the best to need it",
    Outcome.NOT_GATED_YET: "not gated yet: only finalists are gated, at the end of the study",
    Outcome.NOT_FINALIST: "not gated: not a finalist",
    Outcome.WRONG: "failed: wrong answers",
    Outcome.MISSES_SLO: "infeasible: misses the latency SLO",
    Outcome.SLOWER: "pruned: slower than the best",
    Outcome.NOT_STARTED: "failed: did not start",
    Outcome.DIED: "failed: died under load",
    Outcome.ENVIRONMENT: "environment fault: not counted, run again",
    Outcome.OTHER: "failed",
}


def outcome(t: FrozenTrial) -> str:
    """An :class:`Outcome` for a COMPLETE or PRUNED trial (the state's name otherwise)."""
    user = t.user_attrs
    if t.state == TrialState.COMPLETE:
        if _misses_slo_only(t.constraints, user):
            return Outcome.MISSES_SLO  # never a finalist or a contender, whatever its gate would say
        if user.get(attrs.GATE_SKIPPED):
            return Outcome.NOT_GATED
        if gate_pending(t):
            return Outcome.NOT_FINALIST if user.get(attrs.NOT_FINALIST) else Outcome.NOT_GATED_YET
        return Outcome.FEASIBLE if is_feasible(t) else Outcome.WRONG
    if t.state != TrialState.PRUNED:
        return t.state.name
    if user.get(attrs.CORRECT) is False:
        return Outcome.WRONG
    return Outcome.of_failure(
        str(user.get(attrs.FAILURE_PHASE) or ""),
        slower=user.get(attrs.PRUNED_SKIPPED) is not None,
        environment=user.get(attrs.FAILURE_KIND) == "environment",
    )


def _misses_slo_only(constraints: Mapping[str, float], user_attrs: Mapping[str, Any]) -> bool:
    """Infeasible by ``[slo]`` alone: the answers were right (or not judged yet), the latency promise missed."""
    wrong = user_attrs.get(attrs.CORRECT) is False or constraints.get("correctness", 0) > 0
    return constraints.get("slo", 0) > 0 and not wrong


def infeasibility(t: FrozenTrial) -> str | None:
    """Why a measured config is not eligible (``gate 3/5``), or None when it is feasible."""
    reasons = []
    constraints, user_attrs = t.constraints, t.user_attrs
    gate = user_attrs.get(attrs.GATE)
    if user_attrs.get(attrs.CORRECT) is False or constraints.get("correctness", 0) > 0:
        reasons.append(f"gate {gate}" if gate else "gate failed")
    if constraints.get("slo", 0) > 0:
        reasons.append(str(user_attrs.get(attrs.SLO_MISSED) or "misses the SLO"))
    reasons += [f"{k}={v:g}" for k, v in sorted(constraints.items()) if v > 0 and k not in ("correctness", "slo")]
    return ", ".join(reasons) if reasons else None


def outcome_text(t: FrozenTrial) -> str:
    """What became of ``t`` in a few words, the same in every view: ``feasible``, ``pruned: slower than the
    best``, ``failed: did not start``, ``infeasible: wrong answers (gate 3/5)``, ``repeat of #4``, ..."""
    user = t.user_attrs
    if user.get(attrs.DUPLICATE_OF) is not None and t.state != TrialState.RUNNING:
        return f"repeat of #{user[attrs.DUPLICATE_OF]} (not run again)"
    if user.get(attrs.REJECTED):
        return f"rejected without running: {user.get(attrs.FAILURE_REASON, 'violates a constraint')}"
    if t.state == TrialState.FAIL:
        if user.get(attrs.FAILURE_KIND) == "environment":
            return f"environment fault [{user.get(attrs.FAILURE_PHASE)}]: not counted, run again"
        if user.get(attrs.INTERRUPTED):
            return "interrupted: run again on resume"
        return "not counted (failed outside the trial)"
    if t.state == TrialState.RUNNING:
        return "running"
    became = outcome(t)
    if became == Outcome.NOT_GATED:
        return f"{_WORDS[became]} ({user.get(attrs.GATE)})"
    if became == Outcome.WRONG:
        return f"infeasible: wrong answers ({infeasibility(t) or 'gate failed'})"
    if became == Outcome.MISSES_SLO:
        return f"infeasible: {user.get(attrs.SLO_MISSED) or 'misses the SLO'}"
    if became == Outcome.OTHER:
        return f"failed in phase {user.get(attrs.FAILURE_PHASE)}"
    return _WORDS.get(became, t.state.name)
