"""The objective's score: the lower end of the weighted geomean's interval, and the precision it asks of scenarios."""

from __future__ import annotations

import math

import pytest

from tuner.config import BenchmarkSection, ObjectiveSection, Scenario
from tuner.config._objective import precision_share
from tuner.objective._throughput import bound as objective_bound


def _section(*weights: float, precision: float = 0.02) -> BenchmarkSection:
    scenarios = tuple(
        Scenario(name=f"s{i}", concurrency=1, prompt_tokens=8, output_tokens=8, requests=1, weight=w)
        for i, w in enumerate(weights)
    )
    return BenchmarkSection(scenarios=scenarios, precision=precision)


def test_half_widths_add_in_quadrature() -> None:
    section = _section(2.0, 1.0, 1.0)
    points = {"s0": 100.0, "s1": 200.0, "s2": 400.0}
    h = 0.03
    scores = {k: v * math.exp(-h) for k, v in points.items()}
    point = math.exp(0.5 * math.log(100) + 0.25 * math.log(200) + 0.25 * math.log(400))
    bound = objective_bound(points, scores, section)
    assert bound == pytest.approx(point * math.exp(-h * math.sqrt(0.5**2 + 0.25**2 + 0.25**2)))
    # Tighter than the geomean of the lower bounds (which assumes every scenario errs low at once) ...
    assert point * math.exp(-h) < bound < point
    # ... and equal to it when one scenario carries all the uncertainty.
    one_uncertain = {**points, "s0": 100.0 * math.exp(-h)}
    assert objective_bound(points, one_uncertain, section) == pytest.approx(point * math.exp(-0.5 * h))


def test_scenarios_without_an_interval_and_partial_sets() -> None:
    section = _section(1.0, 1.0)
    assert objective_bound({"s0": 50.0}, {"s0": 50.0}, section) == pytest.approx(50.0)  # weights renormalised
    assert objective_bound({"s0": 50.0, "s1": 200.0}, {"s0": 50.0, "s1": 200.0}, section) == pytest.approx(100.0)


def test_scenario_precision_gives_the_objective_its_precision() -> None:
    section = _section(2.0, 1.0, 1.0, precision=0.02)
    each = 0.02 * precision_share(section, ObjectiveSection())
    assert each == pytest.approx(0.02 / math.sqrt(0.375))  # +-3.27% per scenario for +-2% overall
    points = {"s0": 100.0, "s1": 100.0, "s2": 100.0}
    scores = {k: v * math.exp(-each) for k, v in points.items()}
    assert objective_bound(points, scores, section) == pytest.approx(100.0 * math.exp(-0.02))
    multi = ObjectiveSection(kind="multi", objectives=("s0", "s1"))
    assert precision_share(section, multi) == 1.0  # each objective is ranked on its own
    assert precision_share(_section(1.0), ObjectiveSection()) == 1.0  # one scenario: the objective itself
