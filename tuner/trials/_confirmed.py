"""The end-of-study confirmation as the study records it (:mod:`tuner.study` runs it), and its one line."""

from __future__ import annotations

import optuna

__all__ = ["CONFIRMATION", "confirmation_text"]

CONFIRMATION = "confirmation"
"""Study user attr: ``{"trials", "values", "ranks", "errors", "winner", "best_before", "held", "rounds",
"precision"}`` (``precision``: the study's ``[benchmark] precision``, which the race resolved)."""


def confirmation_text(study: optuna.Study) -> str | None:
    """One line on what re-measuring the top decided (None: no confirmation recorded)."""
    c = study.user_attrs.get(CONFIRMATION)
    if not isinstance(c, dict) or not isinstance(c.get("winner"), int):
        return None
    values = c.get("values", {})
    errors = c.get("errors", {})
    ranks, texts = c.get("ranks") or {}, c.get("shown") or {}
    # Best first: the ranks the confirmation stored (in its objective's direction); a record without them ranked
    # by the highest value.
    order = sorted(values.items(), key=lambda kv: (ranks.get(kv[0], 0), -kv[1]))
    missed = c.get("slo_missed") or {}

    def one(n: str, v: float) -> str:
        if n in errors:
            return f"#{n} failed"
        return f"#{n} {texts.get(n, f'{v:.1f}')}" + (" (misses the SLO)" if n in missed else "")

    shown = ", ".join(one(n, v) for n, v in order)
    rounds = c.get("rounds", 2)
    winner, before = c["winner"], c.get("best_before")
    measured = f"re-measured over {rounds} rounds: {shown}"
    if c.get("held") or before is None:
        return f"confirmation: #{winner} held its place ({measured})"
    precision = c.get("precision")
    w, b = values.get(str(winner)), values.get(str(before))
    close = c.get("close") if isinstance(c.get("close"), bool) else bool(w and b and w < b * (1 + (precision or 0)))
    if isinstance(precision, float) and close:
        return (
            f"confirmation: #{winner} and #{before} are equally fast within the study's {precision * 100:g}% "
            f"precision; #{winner} recommended ({measured})"
        )
    return (
        f"confirmation: #{winner} beat #{before}, the best by its own measurement; #{winner} recommended ({measured})"
    )
