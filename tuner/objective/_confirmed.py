"""What the end-of-study confirmation recorded of two configs side by side (every kind reads its figures here)."""

from __future__ import annotations

from typing import Any

import optuna

from tuner.trials import current_confirmation

__all__ = ["confirmed_pair"]


def confirmed_pair(study: optuna.Study, best: int, baseline: int) -> tuple[Any, Any, int] | None:
    """The confirmation's ``figures`` of ``best`` and ``baseline`` and the rounds the baseline was re-measured in
    beside it (None: the confirmation did not measure both)."""
    c = current_confirmation(study)
    if c is None or best == baseline:
        return None
    figures = c.get("figures") or {}
    base: dict[str, Any] = c["baseline"] if isinstance(c.get("baseline"), dict) else {}
    if baseline in c.get("trials", []):
        visits = c.get("rounds")
    elif base.get("trial") == baseline and isinstance(base.get("visits"), int):
        visits = base["visits"]
    else:
        return None
    return figures.get(str(best)), figures.get(str(baseline)), visits if isinstance(visits, int) else 0
