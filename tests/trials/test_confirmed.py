"""The confirmation as the study records it, the recommendation it makes, and the line every view prints."""

from __future__ import annotations

from typing import Any

import optuna
from optuna.distributions import IntDistribution
from optuna.trial import TrialState, create_trial

from tuner.trials import Outcome, current_confirmation, recommended
from tuner.trials import _attrs as attrs
from tuner.trials._confirmed import CONFIRMATION, confirmation_text
from tuner.trials._recommend import GATE_PENDING


def _study(record: dict[str, Any]) -> optuna.Study:
    study = optuna.create_study(direction="maximize")
    study.set_user_attr(CONFIRMATION, record)
    return study


def test_a_winner_that_held_says_over_how_many_rounds() -> None:
    text = confirmation_text(
        _study({"values": {"3": 300.0, "5": 290.0}, "winner": 3, "best_before": 3, "held": True, "rounds": 4})
    )
    assert text == "confirmation: #3 held its place (re-measured over 4 rounds: #3 300.0, #5 290.0)"


def test_an_overturn_within_the_precision_says_both_are_equally_fast() -> None:
    close = {"values": {"21": 302.1, "24": 300.4}, "winner": 21, "best_before": 24, "held": False, "precision": 0.02}
    text = confirmation_text(_study(close))
    assert text == (
        "confirmation: #21 and #24 are equally fast within the study's 2% precision; #21 recommended "
        "(re-measured over 2 rounds: #21 302.1, #24 300.4)"
    )
    far = close | {"values": {"21": 320.0, "24": 300.4}}
    assert confirmation_text(_study(far)) == (
        "confirmation: #21 beat #24, the best by its own measurement; #21 recommended "
        "(re-measured over 2 rounds: #21 320.0, #24 300.4)"
    )
    older = {k: v for k, v in close.items() if k != "precision"}  # recorded before the precision was
    assert "precision" not in (confirmation_text(_study(older)) or "")


def _trial(number_value: float, budget: int, **user: Any) -> optuna.trial.FrozenTrial:
    return create_trial(
        values=[number_value],
        params={"budget": budget},
        distributions={"budget": IntDistribution(1, 64)},
        user_attrs=user,
    )


def _measured(*values: float, **user: Any) -> optuna.Study:
    study = optuna.create_study(direction="maximize")
    for i, v in enumerate(values):
        study.add_trial(_trial(v, i + 1, **user))
    return study


def test_the_recommendation_is_the_confirmed_winner_while_the_confirmation_covers_the_top() -> None:
    study = _measured(280.0, 300.0, 298.0, 250.0)  # #1 leads by its own measurement, #2 close behind
    study.set_user_attr(attrs.CONFIRM_TOP, 2)
    first = recommended(study)
    assert first is not None and first.missing() == ["the top 2 configs were not re-measured"]
    study.set_user_attr(CONFIRMATION, {"trials": [1, 2], "winner": 2, "best_before": 1, "held": False,
                                       "values": {"1": 297.0, "2": 301.0}})  # fmt: skip
    rec = recommended(study)
    assert rec is not None and rec.trial.number == 2 and rec.confirmed and rec.confirmed_value == 301.0
    assert rec.missing() == [] and rec.gated
    # A later trial that enters the top makes the confirmation stale: its winner is no longer recommended.
    study.add_trial(_trial(310.0, 9))
    assert current_confirmation(study) is None
    rec = recommended(study)
    assert rec is not None and rec.trial.number == 4 and not rec.confirmed and rec.stale
    assert rec.missing() == [
        "the top 2 configs were not re-measured since trials measured after it changed the top"
    ]


def test_an_ungated_recommendation_says_so() -> None:
    study = _measured(200.0, 210.0, **{attrs.GATE_DEFERRED: True, attrs.GATE: "at the end, if a finalist"})
    study.set_user_attr(attrs.CONFIRM_TOP, 0)  # no confirmation: only the gate is missing
    rec = recommended(study)
    assert rec is not None and rec.trial.number == 1 and rec.gate == GATE_PENDING and not rec.gated
    assert rec.missing() == ["its correctness gate has not run (only finalists are gated, at the end of the study)"]


def test_slower_is_pruned_and_never_called_failed() -> None:
    slower = create_trial(
        state=TrialState.PRUNED,
        params={"budget": 3},
        distributions={"budget": IntDistribution(1, 64)},
        user_attrs={
            attrs.FAILURE_PHASE: "benchmark",
            attrs.PRUNED_SKIPPED: ["c32"],
            attrs.FAILURE_REASON: "pruned after scenario c1",
        },
        intermediate_values={0: 100.0},
    )
    died = create_trial(
        state=TrialState.PRUNED,
        params={"budget": 4},
        distributions={"budget": IntDistribution(1, 64)},
        user_attrs={attrs.FAILURE_PHASE: "benchmark", attrs.FAILURE_REASON: "died under load"},
    )
    assert Outcome.text(slower) == "pruned: slower than the best"
    assert Outcome.text(died) == "failed: died under load"
