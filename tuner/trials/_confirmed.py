"""The end-of-study confirmation as the study records it (see :mod:`tuner.study._confirm`, which runs it)."""

from __future__ import annotations

import optuna
from optuna.trial import FrozenTrial

__all__ = ["CONFIRMATION", "confirmation_text", "recommended_trial"]

CONFIRMATION = "confirmation"
"""Study user attr: ``{"trials", "values", "ranks", "errors", "winner", "best_before", "held", "rounds"}``."""


def confirmation_text(study: optuna.Study) -> str | None:
    """One line on whether the winner held its place on re-measurement (None: no confirmation yet)."""
    c = study.user_attrs.get(CONFIRMATION)
    if not isinstance(c, dict):
        return None
    values = c.get("values", {})
    shown = ", ".join(f"#{n} {v:.1f}" for n, v in sorted(values.items(), key=lambda kv: -kv[1]))
    if c.get("held"):
        rounds = c.get("rounds", 2)
        return f"confirmation: the winner held (#{c['winner']} best again over {rounds} rounds: {shown})"
    return (
        f"confirmation: the winner did NOT hold: #{c['winner']} beat #{c['best_before']} on re-measurement "
        f"({shown}); #{c['winner']} is recommended"
    )


def recommended_trial(study: optuna.Study) -> FrozenTrial | None:
    """The confirmed winner when the study was confirmed, else the best trial by its own measurement."""
    from tuner.trials import best_trials, study_trials

    c = study.user_attrs.get(CONFIRMATION)
    if isinstance(c, dict) and isinstance(c.get("winner"), int) and len(study.directions) == 1:
        return study_trials(study)[c["winner"]]
    best = best_trials(study)
    return best[0] if best else None
