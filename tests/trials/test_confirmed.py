"""The confirmation as the study records it: the line `tune best`, the report and the loop print."""

from __future__ import annotations

from typing import Any

import optuna

from tuner.trials import CONFIRMATION, confirmation_text


def _study(record: dict[str, Any]) -> optuna.Study:
    study = optuna.create_study(direction="maximize")
    study.set_user_attr(CONFIRMATION, record)
    return study


def test_a_winner_that_held_says_over_how_many_rounds() -> None:
    text = confirmation_text(
        _study({"values": {"3": 300.0, "5": 290.0}, "winner": 3, "best_before": 3, "held": True, "rounds": 4})
    )
    assert text == "confirmation: the winner held (#3 best again over 4 rounds: #3 300.0, #5 290.0)"


def test_an_overturn_within_the_precision_says_either_config_is_about_as_fast() -> None:
    close = {"values": {"21": 302.1, "24": 300.4}, "winner": 21, "best_before": 24, "held": False, "precision": 0.02}
    text = confirmation_text(_study(close))
    assert text is not None and text.startswith("confirmation: the winner did NOT hold: #21 beat #24")
    assert "by less than the study's precision (2.0%): either is about as fast" in text
    far = close | {"values": {"21": 320.0, "24": 300.4}}
    assert "precision" not in (confirmation_text(_study(far)) or "")
    older = {k: v for k, v in close.items() if k != "precision"}  # recorded before the precision was
    assert "precision" not in (confirmation_text(_study(older)) or "")
