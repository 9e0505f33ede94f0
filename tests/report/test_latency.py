"""The latency object ``tune best`` carries: each percentile with its interval as recorded, a missing bound as
null (too few requests), and a study recorded before the intervals existed read as it was (no interval)."""

from __future__ import annotations

from optuna.trial import FrozenTrial, TrialState, create_trial

from tuner.metrics import interval_text
from tuner.report._latency import latency_object, percentile_figure


def _trial(**figures: object) -> FrozenTrial:
    return create_trial(state=TrialState.COMPLETE, value=1.0, user_attrs={f"chat.{k}": v for k, v in figures.items()})


def test_recorded_bounds_are_given_and_a_missing_one_is_null() -> None:
    t = _trial(ttft_p50_s=0.2, ttft_p90_s=0.3, ttft_p99_s=0.5, ttft_p50_low_s=0.19, ttft_p50_high_s=0.21,
               ttft_p99_low_s=0.45, ttft_p99_high_s=None)  # fmt: skip
    assert latency_object(t, "chat", 0.8) == {
        "confidence": 0.8,
        "ttft_s": {"p50": 0.2, "p50_interval": [0.19, 0.21], "p90": 0.3, "p99": 0.5, "p99_interval": [0.45, None]},
    }
    p99 = percentile_figure(t, "chat", "ttft_p99_s")
    assert p99 is not None and p99.text() == "0.5 [0.45, none]"
    assert latency_object(t, "other", 0.8) is None  # nothing measured there


def test_a_study_recorded_before_the_intervals_shows_its_percentiles_without_them() -> None:
    t = _trial(tpot_p50_s=0.0172, tpot_p99_s=0.0186)
    assert latency_object(t, "chat", 0.8) == {
        "confidence": 0.8,
        "tpot_s": {"p50": 0.0172, "p50_interval": None, "p99": 0.0186, "p99_interval": None},
    }
    p50 = percentile_figure(t, "chat", "tpot_p50_s")
    assert p50 is not None and p50.text(1000.0) == "17.2" and interval_text(0.0172, [0.0164, None], scale=1000) == (
        "17.2 [16.4, none]"
    )
