"""Which requests judge an open-loop pass and the busy periods that batch them (tuner.bench._steady)."""

from __future__ import annotations

import pytest

from tuner.bench import LoadResult, RequestRecord
from tuner.bench._latency import latency_figures
from tuner.bench._steady import by_period, steady_pass
from tuner.config import Slo
from tuner.stats import clopper_pearson


def _request(i: int, arrival: float, ttft: float) -> RequestRecord:
    # 10 tokens at 20 ms each after the first: a residence of ttft + 0.18 s.
    return RequestRecord(index=i, t_start=arrival, t_scheduled=arrival, t_first=arrival + ttft,
                         t_end=arrival + ttft + 0.18, output_tokens=10)  # fmt: skip


def _pass(burst_at: int | None, *, n: int = 200, misses: int = 20) -> LoadResult:
    """``n`` requests 10 s apart (each alone in the server), ``misses`` of them with a TTFT of 1.5 s: spread one in
    ten, or (``burst_at``) all arriving together from that request on, so that they share one busy period."""
    records, t = [], 0.0
    for i in range(n):
        if burst_at is None:
            records.append(_request(i, 10.0 * i, 1.5 if i % (n // misses) == 5 else 0.5))
            continue
        in_burst = burst_at <= i < burst_at + misses
        t = t + 0.01 if in_burst and i > burst_at else t + 10.0
        records.append(_request(i, t, 1.5 if in_burst else 0.5))
    return LoadResult(records=records, started=n)


def test_an_arrival_that_finds_the_server_empty_starts_a_busy_period() -> None:
    spread, burst = steady_pass(_pass(None)), steady_pass(_pass(100))
    assert spread.fill == burst.fill == 1  # the first request: the arrivals of two residences from the start
    assert spread.periods == (1,) * 199  # each request alone
    assert sum(burst.periods) == 199 and max(burst.periods) == 20  # the burst is one busy period
    assert burst.periods.count(20) == 1 and len(burst.periods) == 199 - 19
    values = [[r.index for r in burst.judged]]
    assert [len(group) for group in by_period([burst], values)] == list(burst.periods)
    assert [x for group in by_period([burst], values) for x in group] == values[0]  # in order, nothing lost


def test_misses_that_share_a_busy_period_count_as_fewer_draws() -> None:
    # The same share within the limit (179 of the 199 judged), the 20 misses either spread over 20 busy periods or
    # together in one: one burst is one draw of the queue, so its interval is the wider one.
    slo = Slo(ttft_s=1.0, attainment=0.8)
    spread = latency_figures([_pass(None)], slo=slo, confidence=0.8)
    burst = latency_figures([_pass(100)], slo=slo, confidence=0.8)
    assert spread["attainment"] == burst["attainment"] == 179 / 199  # the first request is the fill
    width = {k: f["attainment_high"] - f["attainment_low"] for k, f in (("spread", spread), ("burst", burst))}
    assert width["burst"] > 2 * width["spread"], width
    # Misses alone in their busy periods are independent draws: the requests' own interval (exact), to within the
    # symmetric t interval's thousandth above it.
    cp = clopper_pearson(179, 199, 0.8)
    assert (spread["attainment_low"], spread["attainment_high"]) == pytest.approx(cp, abs=0.001)
