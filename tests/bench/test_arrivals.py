"""The open-loop arrival schedule: drawn from the benchmark seed, at the asked rate, with the asked spread."""

from __future__ import annotations

import itertools
import statistics
from pathlib import Path

import pytest

from tuner.bench._arrivals import arrival_schedule
from tuner.bench._latency import span_rate
from tuner.config import Scenario


def _open(**kw: object) -> Scenario:
    base: dict[str, object] = dict(name="o", concurrency=20000, prompt_tokens=8, output_tokens=8, requests=20000)
    return Scenario(**{**base, **kw})  # type: ignore[arg-type]


def _gaps(schedule: list[float]) -> list[float]:
    return [b - a for a, b in itertools.pairwise(schedule)]


def test_closed_loop_has_no_schedule() -> None:
    assert arrival_schedule(_open(), count=10, seed=0) is None


def test_every_trial_sees_the_same_arrivals_and_every_repeat_new_ones() -> None:
    sc = _open(rate=5.0)
    first = arrival_schedule(sc, count=50, seed=3)
    assert first == arrival_schedule(sc, count=50, seed=3)  # common random numbers across trials
    assert first != arrival_schedule(sc, count=50, seed=4)  # the next repeat draws its own
    assert first is not None and first[0] == 0.0 and first == sorted(first)


@pytest.mark.parametrize(
    ("arrival", "burstiness", "cv"), [("poisson", 1.0, 1.0), ("gamma", 0.25, 2.0), ("gamma", 4.0, 0.5)]
)
def test_rate_and_spread_of_the_gaps(arrival: str, burstiness: float, cv: float) -> None:
    """Mean gap 1/rate; the gaps' coefficient of variation is 1/sqrt(shape) (Poisson: 1)."""
    schedule = arrival_schedule(_open(rate=8.0, arrival=arrival, burstiness=burstiness), count=20000, seed=0)
    assert schedule is not None
    gaps = _gaps(schedule)
    assert span_rate(schedule) == pytest.approx(8.0, rel=0.05)
    assert statistics.pstdev(gaps) / statistics.fmean(gaps) == pytest.approx(cv, rel=0.1)


def test_constant_arrivals_are_evenly_spaced() -> None:
    schedule = arrival_schedule(_open(rate=4.0, arrival="constant"), count=5, seed=0)
    assert schedule == pytest.approx([0.0, 0.25, 0.5, 0.75, 1.0])


def test_a_trace_replays_its_offsets_at_its_speed(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    trace.write_text("".join(f'{{"timestamp": {100 + t}, "input_length": 4}}\n' for t in (0, 1, 3, 7)))
    sc = _open(trace=str(trace), trace_speed=2.0)
    assert arrival_schedule(sc, count=3, seed=0) == [0.0, 0.5, 1.5]
