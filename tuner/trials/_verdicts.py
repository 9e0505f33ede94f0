"""End-of-study gate verdicts (``[gate] when = "final"``), and the study's trials with them applied.

A ``final`` study measures every config without gating it and gates only the finalists, at the end (see
:mod:`tuner.study._confirm`). By then their trials are finished, and Optuna refuses to change a finished trial,
so each verdict is a study user attr ``gate_verdict:<trial number>``: one key per trial, so workers sharing
the study never overwrite each other's. :func:`study_trials` hands every reader of the study (ranking,
recommendation, report, status, dashboard) the trials as if the verdict had been recorded on them: a copy of
each gated trial carries ``gate`` ("3/5 at the end") and ``correct``, so the same feasibility rules apply.

Until then a deferred trial is *provisionally* feasible: it ranks, it is a pruning reference, it can be a
finalist. TPE learns nothing from a late verdict (it reads the frozen trial): a study whose fast region is
wrong keeps sampling there, and the end-of-study gate walks down the ranking until a config passes.
"""

from __future__ import annotations

import copy
from collections.abc import Container, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from tuner.trials import _attrs as attrs

__all__ = [
    "GATE_VERDICT_PREFIX",
    "GateVerdict",
    "apply_verdicts",
    "gate_pending",
    "gate_verdicts",
    "record_gate_verdict",
    "study_trials",
]

GATE_VERDICT_PREFIX = "gate_verdict:"


@dataclass(frozen=True, kw_only=True)
class GateVerdict:
    passed: int
    total: int
    correct: bool
    seconds: float
    failures: tuple[str, ...] = ()
    """``task_id: reason`` of the problems that failed (the first few)."""

    @property
    def text(self) -> str:
        return f"{self.passed}/{self.total} at the end"

    def to_dict(self) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "total": self.total,
            "correct": self.correct,
            "seconds": self.seconds,
            "failures": list(self.failures),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> GateVerdict | None:
        try:
            return cls(
                passed=int(d["passed"]),
                total=int(d["total"]),
                correct=bool(d["correct"]),
                seconds=float(d.get("seconds", 0.0)),
                failures=tuple(str(f) for f in d.get("failures", ())),
            )
        except (KeyError, TypeError, ValueError):
            return None  # written by something else: no verdict rather than a crash in every reader


def gate_pending(t: FrozenTrial) -> bool:
    """A COMPLETE trial of a ``when = "final"`` study that has no end-of-study verdict (yet, or ever: only the
    finalists are gated)."""
    user = t.user_attrs
    return t.state == TrialState.COMPLETE and bool(user.get(attrs.GATE_DEFERRED)) and attrs.CORRECT not in user


def gate_verdicts(study: optuna.Study) -> dict[int, GateVerdict]:
    """The end-of-study gate verdicts recorded in ``study``, by trial number."""
    out: dict[int, GateVerdict] = {}
    for key, value in study.user_attrs.items():
        number = key.removeprefix(GATE_VERDICT_PREFIX)
        if key.startswith(GATE_VERDICT_PREFIX) and number.isdigit() and isinstance(value, Mapping):
            verdict = GateVerdict.from_dict(value)
            if verdict is not None:
                out[int(number)] = verdict
    return out


def record_gate_verdict(
    study: optuna.Study, number: int, *, passed: int, total: int, correct: bool, seconds: float,
    failures: tuple[str, ...] = (),
) -> GateVerdict:  # fmt: skip
    """Record trial ``number``'s end-of-study gate verdict in ``study``; the verdict as every view reads it."""
    verdict = GateVerdict(passed=passed, total=total, correct=correct, seconds=seconds, failures=failures)
    study.set_user_attr(f"{GATE_VERDICT_PREFIX}{number}", verdict.to_dict())
    return verdict


def study_trials(
    study: optuna.Study, *, states: Container[TrialState] | None = None
) -> list[FrozenTrial]:
    """``study.get_trials(deepcopy=False)`` with the end-of-study gate verdicts applied (see the module doc).

    The trials are Optuna's cached objects: never mutate them. Only the few gated at the end are copies.
    """
    trials = study.get_trials(deepcopy=False, states=states)
    if not any(t.user_attrs.get(attrs.GATE_DEFERRED) for t in trials):
        return list(trials)
    return apply_verdicts(trials, gate_verdicts(study))


def apply_verdicts(trials: Iterable[FrozenTrial], verdicts: Mapping[int, GateVerdict]) -> list[FrozenTrial]:
    out = []
    for t in trials:
        verdict = verdicts.get(t.number) if t.user_attrs.get(attrs.GATE_DEFERRED) else None
        if verdict is None and verdicts and gate_pending(t):  # the end-of-study gate ran and passed it over
            t = copy.copy(t)
            t.user_attrs = {**t.user_attrs, attrs.NOT_FINALIST: True}
        if verdict is not None:
            t = copy.copy(t)
            t.user_attrs = {
                **t.user_attrs,
                attrs.GATE: verdict.text,
                attrs.CORRECT: verdict.correct,
                attrs.GATE_S: verdict.seconds,
            }
        out.append(t)
    return out
