"""The end-of-study confirmation as the study records it (see :mod:`tuner.study._confirm`, which runs it)."""

from __future__ import annotations

import optuna
from optuna.trial import FrozenTrial

__all__ = ["CONFIRMATION", "confirmation_text", "recommended_trial"]

CONFIRMATION = "confirmation"
"""Study user attr: ``{"trials", "values", "ranks", "errors", "winner", "best_before", "held", "rounds",
"precision"}`` (``precision``: the study's ``[benchmark] precision``, which the race resolved)."""


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
    close = ""
    before, after = values.get(str(c["best_before"])), values.get(str(c["winner"]))
    precision = c.get("precision")
    if isinstance(precision, float) and before and after and after < before * (1 + precision):
        close = f", by less than the study's precision ({precision:.1%}): either is about as fast"
    return (
        f"confirmation: the winner did NOT hold: #{c['winner']} beat #{c['best_before']} on re-measurement "
        f"({shown}{close}); #{c['winner']} is recommended"
    )


def recommended_trial(study: optuna.Study) -> FrozenTrial | None:
    """The confirmed winner when the study was confirmed, else the best trial by its own measurement."""
    from tuner.trials import best_trials, study_trials

    c = study.user_attrs.get(CONFIRMATION)
    if isinstance(c, dict) and isinstance(c.get("winner"), int) and len(study.directions) == 1:
        return study_trials(study)[c["winner"]]
    best = best_trials(study)
    return best[0] if best else None
