"""Per-request figures: TTFT, TPOT and end-to-end from the right origin, offered and achieved rates, and the
names they reach a trial's user attrs under."""

from __future__ import annotations

import pytest

from tuner.bench import LoadResult, RequestRecord, ScenarioResult
from tuner.bench._latency import latency_figures
from tuner.metrics import scenario_attrs
from tuner.stats import percentile_interval


def _rec(i: int, *, start: float, first: float, end: float, tokens: int, scheduled: float | None) -> RequestRecord:
    return RequestRecord(
        index=i, t_start=start, t_first=first, t_end=end, output_tokens=tokens, t_scheduled=scheduled, t_sent=start
    )


def test_open_loop_latency_counts_from_the_arrival_and_tpot_per_request() -> None:
    # Due at 0, sent 0.5 s late: TTFT and E2E include the lateness; TPOT is the pace after the first token.
    rec = _rec(0, start=10.5, first=11.0, end=12.0, tokens=11, scheduled=10.0)
    assert rec.ttft_s == pytest.approx(1.0) and rec.e2e_s == pytest.approx(2.0)
    assert rec.tpot_s == pytest.approx((2.0 - 1.0) / 10)
    closed = _rec(1, start=10.5, first=11.0, end=12.0, tokens=1, scheduled=None)
    assert closed.ttft_s == pytest.approx(0.5) and closed.tpot_s is None


def test_rates_offered_by_the_schedule_and_achieved_by_completions() -> None:
    # 5 arrivals 0.25 s apart (4 req/s); the server finishes them 0.5 s apart (2 req/s): it falls behind.
    records = [_rec(i, start=i / 4, first=i / 2 + 0.1, end=i / 2 + 0.2, tokens=3, scheduled=i / 4) for i in range(5)]
    figures = latency_figures([LoadResult(records=records, started=5)])
    assert figures["offered_rps"] == pytest.approx(4.0) and figures["achieved_rps"] == pytest.approx(2.0)
    # The queue grows through the pass: it never reaches steady state (tuner.bench._steady), so its last half
    # alone is judged, the 3 requests that waited longest.
    assert figures["fill_requests"] == 2
    ttfts = sorted(i / 2 + 0.1 - i / 4 for i in range(2, 5))  # growing: the queue
    assert figures["ttft_p50_s"] == pytest.approx(ttfts[1])
    assert figures["ttft_p50_s"] < figures["ttft_p90_s"] < figures["ttft_p99_s"] <= ttfts[-1]  # type: ignore[operator]


def test_a_closed_loop_offers_no_rate() -> None:
    records = [_rec(i, start=0.0, first=0.1, end=1.0 + i, tokens=3, scheduled=None) for i in range(3)]
    figures = latency_figures([LoadResult(records=records, started=3)])
    assert figures["offered_rps"] is None and figures["achieved_rps"] == pytest.approx(1.0)


def _closed_run(count: int, *, offset: int) -> LoadResult:
    """``count`` requests of a closed loop whose TTFTs are 20 ms apart (request ``i`` waits ``(offset + 2 i) /
    100`` s: two runs of offsets 0 and 1 interleave, as two draws of one server would) and whose end-to-end
    latencies are 1 s longer; 11 tokens each, so TPOT is a tenth of the difference."""
    records = [
        _rec(i, start=float(i), first=i + (offset + 2 * i) / 100, end=i + 1 + (offset + 2 * i) / 100 + (i % 7) / 10,
             tokens=11, scheduled=None)
        for i in range(count)
    ]  # fmt: skip
    return LoadResult(records=records, started=count)


def test_p50_and_p99_have_intervals_over_every_repeat_and_none_where_too_few_requests() -> None:
    """Two repeats of 150 requests: the intervals are two of the 300 pooled requests, around the point, never
    narrower than the rank interval (the repeats' spread can only widen it). One repeat alone is too few for an
    upper bound on the p99 at 80% (0.99**150 = 22% > 10%): None, not a guess."""
    first, second = _closed_run(150, offset=0), _closed_run(150, offset=1)
    both = latency_figures([first, second], confidence=0.8)
    ttfts = [rec.ttft_s for run in (first, second) for rec in run.records]
    e2e = [rec.e2e_s for run in (first, second) for rec in run.records]
    for prefix, samples in (("ttft", ttfts), ("e2e", e2e)):
        for q in (50, 99):
            low, high = both[f"{prefix}_p{q}_low_s"], both[f"{prefix}_p{q}_high_s"]
            ranks = percentile_interval(samples, q, 0.8)
            assert low <= ranks[0] and high >= ranks[1]  # type: ignore[operator]
            assert low in samples and high in samples
            assert low < both[f"{prefix}_p{q}_s"] <= high  # type: ignore[operator]
    assert both["ttft_p99_high_s"] == pytest.approx(max(ttfts))  # n = 300: the largest is a bound at 80%
    assert both["tpot_p50_low_s"] is not None and both["tpot_p99_low_s"] is not None
    one = latency_figures([first], confidence=0.8)
    assert one["ttft_p99_high_s"] is None and one["e2e_p99_high_s"] is None and one["tpot_p99_high_s"] is None
    assert one["ttft_p99_low_s"] is not None and one["ttft_p50_high_s"] is not None
    # A higher confidence widens the interval (or leaves no bound).
    strict = latency_figures([first, second], confidence=0.95)
    # Two repeats that disagree (the second's requests all slower) widen it past the ranks'.
    apart = latency_figures([first, _closed_run(150, offset=300)], confidence=0.8)
    pooled = [rec.ttft_s for run in (first, _closed_run(150, offset=300)) for rec in run.records]
    assert (apart["ttft_p50_low_s"] or 0.0) < percentile_interval(pooled, 50, 0.8)[0]  # type: ignore[operator]
    assert strict["ttft_p50_low_s"] < both["ttft_p50_low_s"]  # type: ignore[operator]
    assert strict["ttft_p99_high_s"] is None


def test_the_figures_reach_user_attrs_under_their_scenario() -> None:
    result = ScenarioResult(
        name="chat-6rps", concurrency=8, repeats_tok_s=(1.0,), output_tok_s=1.0, score=1.0, per_stream_tok_s=1.0,
        offered_rps=6.0, achieved_rps=5.9, ttft_p99_s=0.8, tpot_p99_s=0.04, e2e_p50_s=2.0, e2e_p99_s=3.0,
        e2e_p90_s=2.5, tpot_p50_s=0.03, tpot_p90_s=0.035, ttft_p50_s=0.2, ttft_p90_s=0.5,
        ttft_p99_low_s=0.7, ttft_p99_high_s=None, e2e_p50_low_s=1.9, tpot_p50_high_s=0.031,
    )  # fmt: skip
    attrs = scenario_attrs(result)
    expected = {"offered_rps": 6.0, "achieved_rps": 5.9, "ttft_p50_s": 0.2, "ttft_p90_s": 0.5, "ttft_p99_s": 0.8,
                "tpot_p50_s": 0.03, "tpot_p90_s": 0.035, "tpot_p99_s": 0.04, "e2e_p50_s": 2.0, "e2e_p90_s": 2.5,
                "e2e_p99_s": 3.0, "ttft_p99_low_s": 0.7, "ttft_p99_high_s": None, "e2e_p50_low_s": 1.9,
                "tpot_p50_high_s": 0.031}  # fmt: skip
    for key, value in expected.items():
        assert attrs[f"chat-6rps.{key}"] == value
