"""A scenario's SLO verdict from its requests: attainment, its interval, the margin, and the line every view prints."""

from __future__ import annotations

import pytest

from tuner.bench import LoadResult, RequestRecord, ScenarioResult
from tuner.bench._latency import latency_figures
from tuner.config import Slo
from tuner.metrics import scenario_attrs


def _requests(ttfts: list[float]) -> list[RequestRecord]:
    # Each request: arrives at i, its first token after ``ttft``, then 10 tokens at 20 ms each.
    return [
        RequestRecord(index=i, t_start=i, t_scheduled=i, t_first=i + t, t_end=i + t + 0.18, output_tokens=10)
        for i, t in enumerate(ttfts)
    ]


def _result(figures: dict[str, float | None]) -> ScenarioResult:
    return ScenarioResult(
        name="chat-6rps", concurrency=8, repeats_tok_s=(1.0,), output_tok_s=1.0, score=1.0, per_stream_tok_s=1.0,
        **figures,  # type: ignore[arg-type]
    )


def test_attainment_counts_requests_that_met_every_limit() -> None:
    slo = Slo(ttft_s=1.0, tpot_s=0.04, attainment=0.9)
    records = _requests([0.5] * 91 + [1.5] * 9)  # 91% within TTFT 1 s; every TPOT 20 ms
    figures = latency_figures([LoadResult(records=records, started=100)], slo=slo, confidence=0.8)
    assert figures["attainment"] == pytest.approx(0.91)
    assert figures["attainment_low"] < 0.91 < figures["attainment_high"]  # type: ignore[operator]
    verdict = _result(figures).verdict
    assert verdict is not None and verdict.state == "undecided" and verdict.holds  # 91% is not confidently below 90%
    assert scenario_attrs(_result(figures))["chat-6rps.attainment"] == 0.91
    assert scenario_attrs(_result(figures))["chat-6rps.slo_verdict"] == "undecided"


def test_a_confident_miss_says_so_in_one_line() -> None:
    slo = Slo(ttft_s=1.0, tpot_s=0.04, attainment=0.99)
    records = _requests([0.5] * 182 + [1.5] * 18)  # 91% of 200: the interval's top is well under 99%
    figures = latency_figures([LoadResult(records=records, started=200)], slo=slo, confidence=0.8)
    verdict = _result(figures).verdict
    assert verdict is not None and verdict.state == "missed" and verdict.constraint > 0
    line = verdict.text("chat-6rps", slo.describe())
    # The margin as a person reads it: the slowest 1% ran at 1.5 s, 150% of the TTFT limit.
    assert line == (
        "misses the SLO in chat-6rps: 91% of requests within TTFT 1 s / TPOT 40 ms, 99% required; "
        "99% of requests within 150% of the limits"
    )


def test_no_slo_no_attainment() -> None:
    figures = latency_figures([LoadResult(records=_requests([0.5, 0.6]), started=2)])
    assert "attainment" not in figures and _result(figures).verdict is None


def test_goodput_is_the_rate_of_the_requests_that_met_the_slo() -> None:
    from tuner.config import Scenario

    slo = Slo(ttft_s=1.0)
    # 100 requests, one a second; 80 on time with 10 tokens, 20 late with 30 tokens each.
    records = _requests([0.5] * 80 + [1.5] * 20)
    for r in records[80:]:
        r.output_tokens = 30
    figures = latency_figures([LoadResult(records=records, started=100)], slo=slo, confidence=0.8)
    assert figures["attainment"] == pytest.approx(0.8)
    assert figures["good_token_share"] == pytest.approx(800 / 1400)
    scenario = Scenario(name="chat-1rps", concurrency=1, prompt_tokens=64, rate=1.0, requests=100, output_tokens=10)
    result = ScenarioResult.from_repeats(
        scenario=scenario, repeats_tok_s=[14.0, 14.0], repeats_per_stream_tok_s=[], confidence=0.8, **figures
    )
    achieved = figures["achieved_rps"]
    assert achieved is not None and achieved == pytest.approx(1.0, rel=0.02)
    assert result.goodput_rps == pytest.approx(achieved * 0.8)
    assert result.goodput_rps_low == pytest.approx(achieved * figures["attainment_low"])  # type: ignore[operator]
    assert result.goodput_tok_s == pytest.approx(result.point * 800 / 1400)  # type: ignore[operator]
    assert result.goodput_tok_s_low is not None and result.goodput_tok_s_low < result.goodput_tok_s
    attrs = scenario_attrs(result)
    assert attrs["chat-1rps.goodput_rps"] == round(achieved * 0.8, 4)


def test_goodput_without_an_slo_counts_every_request() -> None:
    from tuner.config import Scenario

    scenario = Scenario(name="c8", concurrency=8, prompt_tokens=64, requests=16, output_tokens=100)
    result = ScenarioResult.from_repeats(
        scenario=scenario, repeats_tok_s=[400.0], repeats_per_stream_tok_s=[], confidence=0.8,
        requests=16, output_tokens=1600,
    )  # fmt: skip
    assert result.goodput_rps == pytest.approx(4.0)  # 400 tok/s of 100-token answers: 4 requests/s
    assert result.goodput_tok_s == result.point


def test_met_only_when_the_interval_clears_the_target() -> None:
    slo = Slo(ttft_s=1.0, attainment=0.9)
    records = _requests([0.5] * 400)  # 400 of 400: the interval's low end (99.6%) clears 90%
    figures = latency_figures([LoadResult(records=records, started=400)], slo=slo, confidence=0.8)
    verdict = _result({**figures, "requests": 400}).verdict
    assert verdict is not None and verdict.state == "met" and verdict.met
    assert verdict.text("c", slo.describe()).startswith("meets the SLO in c: 100% of 400 requests within TTFT 1 s")
    # 23 of 24 within the limits against a 99% target: not confidently missed, and not shown to meet it either.
    few = _requests([0.5] * 23 + [1.5])
    strict = Slo(ttft_s=1.0, attainment=0.99)
    figures = latency_figures([LoadResult(records=few, started=24)], slo=strict, confidence=0.8)
    verdict = _result({**figures, "requests": 24}).verdict
    assert verdict is not None and verdict.state == "undecided" and verdict.holds and not verdict.met
    assert verdict.text("c", strict.describe()).startswith("not shown to meet the SLO in c: 95.83% (")


def test_the_margin_is_the_log_of_the_worst_ratios_quantile_and_signs_the_constraint() -> None:
    import math
    import random

    rng = random.Random(7)
    slo = Slo(ttft_s=1.0, tpot_s=0.04, attainment=0.9)
    for _ in range(200):
        n = rng.randint(5, 120)
        ttfts = [rng.uniform(0.2, 1.6) for _ in range(n)]
        figures = latency_figures([LoadResult(records=_requests(ttfts), started=n)], slo=slo, confidence=0.8)
        verdict = _result(figures).verdict
        assert verdict is not None
        # The worst ratio is TTFT's here (TPOT is 20 ms of 40): its 90th percentile is the promise's edge.
        ratios = sorted(t / 1.0 for t in ttfts)
        assert verdict.margin == pytest.approx(math.log(_interpolated(ratios, 0.9)))
        # The constraint is positive exactly when the verdict is a miss, whatever the interval's ties.
        assert (verdict.constraint > 0) == (verdict.state == "missed")
        if verdict.margin_low is not None and verdict.state != "missed":
            assert verdict.margin_low <= 1e-9  # the quantile's interval agrees: not confidently past 1


def _interpolated(xs: list[float], q: float) -> float:
    """The q-quantile by linear interpolation (numpy's default, as tuner.stats.percentile)."""
    pos = q * (len(xs) - 1)
    lo = int(pos)
    return xs[lo] + (xs[min(lo + 1, len(xs) - 1)] - xs[lo]) * (pos - lo)
