"""The sequential-repeats policy on constructed samples, and the score bound it relies on."""

from __future__ import annotations

import math

import pytest

from tuner.stats import (
    EMPTY_POOL,
    Noise,
    ObjectiveDecision,
    Reference,
    SequentialPolicy,
    decide_objective,
    estimate,
    objective_slower,
    pooled_noise,
)

POLICY = SequentialPolicy(min_repeats=2, max_repeats=6, precision=0.02, confidence=0.8)
#: A reference measured four times, ~1% noise around 100 tok/s.
REF = Reference(samples=(100.0, 101.0, 99.0, 100.5), margin=0.05, confidence=0.9)


def test_precise_stops_at_min_repeats_when_repeats_agree() -> None:
    d = POLICY.decide([100.0, 100.3])
    assert d.stop and d.verdict == "precise"


def test_more_below_min_repeats_and_while_noisy() -> None:
    assert POLICY.decide([100.0]).verdict == "more"  # one repeat has no noise estimate
    d = POLICY.decide([100.0, 110.0, 92.0])  # +-~9%: not precise yet
    assert not d.stop and d.verdict == "more" and "want +-2.0%" in d.reason


def test_max_repeats_caps_a_noisy_scenario() -> None:
    noisy = [100.0, 120.0, 85.0, 110.0, 95.0, 125.0]
    assert POLICY.decide(noisy[:5]).verdict == "more"
    assert POLICY.decide(noisy).verdict == "max_repeats"


def test_confidently_worse_stops_after_one_repeat_by_borrowing_the_reference_noise() -> None:
    d = POLICY.decide([50.0], REF)
    assert d.stop and d.verdict == "worse" and "5%" in d.reason
    # Within the margin (3% slower) is never "worse", however many repeats.
    assert POLICY.decide([97.0, 97.2, 96.8], REF).verdict != "worse"


def test_confidently_better_stops_at_min_repeats_even_when_imprecise() -> None:
    d = POLICY.decide([130.0, 124.0], REF)  # +-~8% at 80%: imprecise, but clearly above the reference
    assert d.verdict == "better"
    assert POLICY.decide([130.0], REF).verdict == "more"  # better needs min_repeats


def test_a_reference_with_one_repeat_is_no_reference() -> None:
    one = Reference(samples=(100.0,))
    assert POLICY.decide([50.0], one).verdict == "more"


def test_fixed_mode_never_stops_early() -> None:
    fixed = SequentialPolicy(min_repeats=3, max_repeats=3)
    assert fixed.fixed
    assert fixed.decide([50.0], REF).verdict == "more"
    assert fixed.decide([100.0, 100.0], REF).verdict == "more"
    assert fixed.decide([100.0, 100.0, 100.0], REF).verdict == "max_repeats"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"min_repeats": 0}, "min_repeats must be >= 1"),
        ({"min_repeats": 4, "max_repeats": 3}, "max_repeats (3) must be >= min_repeats (4)"),
        ({"precision": 0.0}, "precision must be > 0"),
        ({"confidence": 1.0}, "confidence must be within (0, 1)"),
    ],
)
def test_policy_rejects_bad_settings(kwargs: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        SequentialPolicy(**kwargs)  # type: ignore[arg-type]


def test_score_never_below_zero_where_median_minus_mad_went_negative() -> None:
    # The real server's repeats that gave -1.41 tok/s under `median - 1.4826*MAD`.
    e = estimate([18.3, 2.4], 0.8)
    assert 0.0 < e.score < e.point == pytest.approx(math.sqrt(18.3 * 2.4))
    assert e.low == e.score and e.high > 18.3 * 0.9
    assert estimate([0.0, 5.0], 0.8).score >= 0.0  # a run that produced nothing drags the bound to ~0


def test_score_widens_with_fewer_repeats() -> None:
    # The same two values repeated: same point, same spread, only the number of repeats changes.
    pair = [98.0, 102.0]
    estimates = [estimate(pair * k, 0.8) for k in (1, 2, 3)]
    widths = [e.relative_half_width or 0.0 for e in estimates]
    assert widths[0] > widths[1] > widths[2] > 0 and widths[0] > 3 * widths[2]
    scores = [e.score for e in estimates]
    assert scores[0] < scores[1] < scores[2] < estimates[2].point  # more repeats, more trust


def test_score_of_one_repeat_and_identical_repeats() -> None:
    one = estimate([42.0], 0.8)
    assert one.score == one.point == pytest.approx(42.0) and one.half_width is None and one.n == 1
    same = estimate([42.0, 42.0, 42.0], 0.8)
    assert same.score == pytest.approx(42.0) and same.half_width == pytest.approx(0.0)
    with pytest.raises(ValueError, match="at least one finite sample"):
        estimate([math.nan], 0.8)
    with pytest.raises(ValueError, match="confidence"):
        estimate([1.0, 2.0], 1.5)


def test_higher_confidence_lowers_the_score() -> None:
    samples = [100.0, 104.0, 97.0]
    assert estimate(samples, 0.95).score < estimate(samples, 0.8).score < estimate(samples, 0.5).score


#: ~1% repeat noise, learnt from 40 degrees of freedom of other configs' repeats.
NOISE = Noise(ss=40 * 0.01**2, df=40)
ONCE = SequentialPolicy(min_repeats=1, max_repeats=4, precision=0.02, confidence=0.8)


def test_with_the_study_noise_one_repeat_can_settle_every_verdict() -> None:
    ref = Reference(samples=(100.0,), margin=0.05, confidence=0.9, noise=NOISE)
    assert ref.comparable  # one reference repeat is enough when the noise is known
    assert ONCE.decide([50.0], ref).verdict == "worse"
    assert ONCE.decide([110.0], ref).verdict == "better"
    assert ONCE.decide([97.0], ref).verdict == "behind"  # slower for sure, but within the pruning margin
    assert ONCE.decide([100.2], ref).verdict == "precise"  # +-1.3% at 80% from the pooled noise
    # Without the pool, one repeat says nothing about the noise: measure again.
    d = ONCE.decide([100.2], Reference(samples=(100.0, 100.4)))
    assert d.verdict == "more" and "no noise estimate" in d.reason


def test_a_noisier_study_needs_more_repeats_for_the_same_precision() -> None:
    noisy = Reference(samples=(100.0,), noise=Noise(ss=40 * 0.03**2, df=40), margin=0.05, confidence=0.9)
    assert ONCE.decide([100.5], noisy).verdict == "more"
    assert ONCE.decide([100.5, 99.0, 101.0, 100.0], noisy).verdict == "max_repeats"


def test_pooled_noise_counts_each_config_around_its_own_mean() -> None:
    pool = pooled_noise([[100.0, 102.0], [50.0, 51.0, 49.0], [7.0], []])
    assert pool is not None and pool.df == 3
    expected = 2 * math.log(102 / 100) ** 2 / 4 + sum((math.log(x / 50) - 0) ** 2 for x in (50, 51, 49))
    assert pool.ss == pytest.approx(expected, rel=0.02)
    assert pooled_noise([[7.0], [8.0]]) is None


def test_the_pool_gives_one_repeat_an_interval_and_a_score_below_its_point() -> None:
    est = estimate([100.0], 0.8, NOISE)
    assert est.half_width is not None and est.score < est.point == pytest.approx(100.0)
    assert est.relative_half_width == pytest.approx(1.303 * 0.01, rel=0.01)  # t(0.9, 40) * sigma / sqrt(1)
    assert estimate([100.0, 100.0], 0.8, NOISE).score > est.score  # two repeats: a tighter bound


def test_an_empty_pool_leaves_the_noise_to_the_reference_s_own_repeats() -> None:
    with pytest.raises(ValueError, match="empty noise pool"):
        _ = EMPTY_POOL.var
    assert estimate([100.0], 0.8, EMPTY_POOL).half_width is None  # one repeat and nothing else: no interval
    assert estimate([100.0, 102.0], 0.8, EMPTY_POOL) == estimate([100.0, 102.0], 0.8)
    # The reference's two repeats (~0.5% apart) are the study's noise: one repeat of a far slower config is
    # confidently worse, one repeat within a few percent is not; one repeat a side is no evidence at all.
    twice = Reference(samples=(100.0, 100.5), margin=0.05, confidence=0.9, noise=EMPTY_POOL)
    assert twice.comparable
    assert POLICY.decide([80.0], twice).verdict == "worse"
    assert POLICY.decide([98.0], twice).verdict == "more"
    once = Reference(samples=(100.0,), margin=0.05, confidence=0.9, noise=EMPTY_POOL)
    assert not once.comparable and POLICY.decide([50.0], once).verdict == "more"
    assert not objective_slower({"a": [50.0]}, references={"a": once}, weights={"a": 1.0}, margin=0.02)
    assert objective_slower({"a": [50.0]}, references={"a": twice}, weights={"a": 1.0}, margin=0.02)
    # The candidate's own interval (its score) uses the same noise: one pass after the baseline is not a point.
    assert twice.study_noise is not None and twice.study_noise.df == 1 and once.study_noise is None
    assert estimate([100.0], 0.8, twice.study_noise).half_width is not None
    pooled = Reference(samples=(100.0, 100.5), noise=STUDY_NOISE)
    assert pooled.study_noise is not None and pooled.study_noise.df == STUDY_NOISE.df + 1


# -- repeats decided on the objective ----------------------------------------------------------------------------

#: Two scenarios weighted 1:3, the study's noise ~2% per repeat (many df), each reference measured twice at 100.
STUDY_NOISE = Noise(ss=0.02**2 * 40, df=40)
OBJ_POLICY = SequentialPolicy(min_repeats=1, max_repeats=4, precision=0.03, confidence=0.8, objective_precision=0.015)
WEIGHTS = {"cheap": 0.25, "heavy": 0.75}
REFS = {
    name: Reference(samples=(100.0, 100.0), margin=0.05, confidence=0.9, noise=STUDY_NOISE) for name in WEIGHTS
}


def _decide(samples: dict[str, list[float]], costs: dict[str, float] | None = None) -> ObjectiveDecision:
    return decide_objective(
        samples, references=REFS, weights=WEIGHTS, costs=costs or {"cheap": 1.0, "heavy": 1.0}, policy=OBJ_POLICY
    )


def test_on_the_objective_a_scenario_stops_after_min_repeats_unless_worse() -> None:
    ref = REFS["cheap"]
    assert OBJ_POLICY.on_objective(ref)
    d = OBJ_POLICY.decide([100.5], ref, objective=True)  # a tie: per scenario it would need more repeats
    assert d.stop and d.verdict == "objective"
    assert OBJ_POLICY.decide([50.0], ref, objective=True).verdict == "worse"  # the pruner's test stays
    assert not OBJ_POLICY.on_objective(None)
    assert not OBJ_POLICY.on_objective(Reference(samples=(100.0, 100.0)))  # no study noise yet
    assert not SequentialPolicy(min_repeats=2, max_repeats=2, objective_precision=0.01).on_objective(ref)


def test_objective_behind_or_ahead_stops_though_one_scenario_is_a_tie() -> None:
    # cheap ties the reference, heavy is 6% slower: the objective is ~4.5% behind, settled after one repeat each.
    d = _decide({"cheap": [100.0], "heavy": [94.0]})
    assert d.stop and d.verdict == "behind" and d.reason.startswith("-4.6% against the reference, confidently")
    d = _decide({"cheap": [101.0], "heavy": [106.0]})
    assert d.stop and d.verdict == "better"


def test_a_close_objective_is_repeated_where_a_repeat_narrows_it_most_per_second() -> None:
    close = {"cheap": [100.0], "heavy": [100.5]}
    d = _decide(close)
    assert d.verdict == "more" and d.repeat == "heavy"  # same cost: the heavier weight first
    d = _decide(close, costs={"cheap": 1.0, "heavy": 20.0})
    assert d.verdict == "more" and d.repeat == "cheap"  # a heavy repeat 20x dearer: the cheap one first
    d = _decide({"cheap": [100.0, 100.2, 99.9, 100.1], "heavy": [100.5]}, costs={"cheap": 1.0, "heavy": 20.0})
    assert d.repeat == "heavy"  # the cheap one is at max_repeats


def test_a_tie_stops_when_the_objective_is_precise_or_at_max_repeats() -> None:
    tie = [100.0, 100.1, 99.9, 100.0]
    d = _decide({"cheap": tie[:2], "heavy": tie})
    assert d.stop and d.verdict == "precise" and d.reason.startswith("+-")
    loose = SequentialPolicy(min_repeats=1, max_repeats=2, objective_precision=0.001)
    d = decide_objective(
        {"cheap": [100.0, 100.0], "heavy": [100.0, 100.0]},
        references=REFS, weights=WEIGHTS, costs={}, policy=loose,
    )
    assert d.stop and d.verdict == "max_repeats"


def test_deciding_on_the_objective_needs_its_precision() -> None:
    with pytest.raises(ValueError, match="objective_precision"):
        decide_objective({"cheap": [100.0]}, references=REFS, weights=WEIGHTS, costs={}, policy=POLICY)


def test_objective_slower_weighs_the_scenarios_and_needs_their_noise() -> None:
    noise = Noise(ss=0.01**2 * 40, df=40)  # 1% per repeat, well known
    refs = {
        "a": Reference(samples=(100.0,), margin=0.05, confidence=0.9, noise=noise),
        "b": Reference(samples=(200.0,), margin=0.05, confidence=0.9, noise=noise),
    }
    weights = {"a": 3.0, "b": 1.0}
    # 4% behind on both, four repeats each: confidently more than 2% behind, not more than 5%.
    behind = {"a": [96.0] * 4, "b": [192.0] * 4}
    assert objective_slower(behind, references=refs, weights=weights, margin=0.02)
    assert not objective_slower(behind, references=refs, weights=weights, margin=0.05)
    # 10% behind on the light scenario, 1% ahead on the heavy one: -1.8% on the objective, within 2%.
    mixed = {"a": [101.0] * 4, "b": [180.0] * 4}
    assert not objective_slower(mixed, references=refs, weights=weights, margin=0.02)
    assert objective_slower(mixed, references=refs, weights={"a": 1.0, "b": 3.0}, margin=0.02)
    # Without the study's noise for a scenario there is no test.
    bare = {**refs, "b": Reference(samples=(200.0,), margin=0.05, confidence=0.9)}
    assert not objective_slower(behind, references=bare, weights=weights, margin=0.02)
