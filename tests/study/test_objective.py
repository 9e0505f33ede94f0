"""The objective's per-scenario console line (:func:`tuner.study._objective.describe_result`)."""

from __future__ import annotations

from tuner.bench import ScenarioResult
from tuner.config import Scenario
from tuner.stats import RepeatDecision
from tuner.study import describe_result

SC = Scenario(name="c32-long", concurrency=32, prompt_tokens=1024, output_tokens=16, requests=32)


def _result(verdict: str) -> ScenarioResult:
    result = ScenarioResult.from_repeats(
        scenario=SC, repeats_tok_s=[400.0], repeats_per_stream_tok_s=[12.5], confidence=0.8, warmup="none"
    )
    return result.stopped_by(RepeatDecision(verdict=verdict, reason="test"))


def test_a_worse_scenario_says_who_decides_when_it_is_the_last() -> None:
    # Before the last scenario a "worse" prunes the trial; the last one is never pruned, so it says so.
    assert describe_result(_result("worse")) == "c32-long: score 400.0 (400.0) tok/s, 1 repeat, worse, no warm-up"
    last = describe_result(_result("worse"), last=True)
    assert last == (
        "c32-long: score 400.0 (400.0) tok/s, 1 repeat, worse than the reference (the last scenario: the objective "
        "decides), no warm-up"
    )
    objective = describe_result(_result("objective"), last=True)
    assert objective.endswith(", 1 repeat, more if the objective asks, no warm-up")
