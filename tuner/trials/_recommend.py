"""The recommendation: the one trial every command and view names (``tune start``'s last lines, ``best``,
``apply --best``, ``export``, the report, the dashboard, ``status``).

The best trial by its own measurement is a noisy maximum (the winner's curse), so a study re-measures its top
configs at the end (:mod:`tuner.study`'s confirmation) and gates the finalists when only they are gated. The
recommendation is the confirmation's winner while that confirmation still covers the study's top; otherwise
(no confirmation yet, or trials added since changed the top) it is the best by its own measurement, and
:meth:`Recommendation.missing` says what the end of the study would still do for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import optuna
from optuna.trial import FrozenTrial

from tuner.trials import _attrs as attrs
from tuner.trials._confirmed import CONFIRMATION
from tuner.trials._ranking import best_trials, candidates, rank_value
from tuner.trials._verdicts import gate_pending

__all__ = ["GATE_NONE", "GATE_PASSED", "GATE_PENDING", "Recommendation", "current_confirmation", "recommended"]

GATE_PASSED = "passed"
GATE_PENDING = "pending"
"""``[gate] when = "final"`` and the end-of-study gate has not judged this config (yet)."""
GATE_NONE = "none"
"""The study has no correctness gate."""


@dataclass(frozen=True, kw_only=True)
class Recommendation:
    trial: FrozenTrial
    confirmed: bool
    """The end-of-study confirmation re-measured the study's current top and this config won."""
    confirmed_value: float | None
    """Its objective from the confirmation's fresh repeats (None: not confirmed)."""
    gate: str
    """:data:`GATE_PASSED`, :data:`GATE_PENDING` or :data:`GATE_NONE`."""
    candidates: int
    """Distinct feasible configs the study has (a confirmation needs two)."""
    confirm_top: int = 3
    """The study's ``[search] confirm_top``: how many top configs its end re-measures (below 2: none)."""
    stale: bool = False
    """A confirmation exists but trials measured since changed the top it covered."""
    front: tuple[FrozenTrial, ...] = ()
    """Multi-objective studies: the feasible Pareto front this member (the highest geometric mean) comes from."""

    @property
    def gated(self) -> bool:
        return self.gate != GATE_PENDING

    def missing(self) -> list[str]:
        """What the end of the study would still do for this recommendation (``[]``: nothing; it is verified)."""
        out = []
        if not self.confirmed and not self.front and self.confirm_top >= 2 and self.candidates >= 2:
            since = " since trials measured after it changed the top" if self.stale else ""
            out.append(f"the top {min(self.confirm_top, self.candidates)} configs were not re-measured{since}")
        if self.gate == GATE_PENDING:
            out.append("its correctness gate has not run (only finalists are gated, at the end of the study)")
        return out


def current_confirmation(study: optuna.Study) -> Mapping[str, Any] | None:
    """The stored confirmation while it covers the study's top: the same configs are still its best
    ``len(trials)`` distinct feasible ones by their own measurement (None: no confirmation, or a stale one)."""
    c = study.user_attrs.get(CONFIRMATION)
    if not isinstance(c, dict) or not isinstance(c.get("winner"), int) or not isinstance(c.get("trials"), list):
        return None
    top = {t.number for t in candidates(study)[: len(c["trials"])]}
    return c if top == set(c["trials"]) and c["winner"] in top else None


def recommended(study: optuna.Study) -> Recommendation | None:
    """The trial to deploy, or None when the study has no feasible trial yet."""
    front = best_trials(study)
    if not front:
        return None
    n = len(candidates(study))
    k = study.user_attrs.get(attrs.CONFIRM_TOP)
    k = k if isinstance(k, int) else 3
    if len(study.directions) > 1:
        top = max(front, key=lambda t: (rank_value(t, study.directions), -t.number))
        return Recommendation(
            trial=top, confirmed=False, confirmed_value=None, gate=_gate(top), candidates=n, confirm_top=k,
            front=tuple(front),
        )
    confirmation = current_confirmation(study)
    if confirmation is not None:
        winner = next(t for t in candidates(study) if t.number == confirmation["winner"])
        value = confirmation.get("values", {}).get(str(winner.number))
        return Recommendation(
            trial=winner,
            confirmed=True,
            confirmed_value=float(value) if isinstance(value, int | float) else None,
            gate=_gate(winner),
            candidates=n,
            confirm_top=k,
        )
    stale = isinstance(study.user_attrs.get(CONFIRMATION), dict)
    return Recommendation(
        trial=front[0],
        confirmed=False,
        confirmed_value=None,
        gate=_gate(front[0]),
        candidates=n,
        confirm_top=k,
        stale=stale,
    )


def _gate(t: FrozenTrial) -> str:
    if gate_pending(t):
        return GATE_PENDING
    if t.user_attrs.get(attrs.CORRECT) is True:
        return GATE_PASSED
    return GATE_NONE
