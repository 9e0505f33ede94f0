"""The in-process path: the study's own loop and TrialRunner against the model, with seeded noise."""

from __future__ import annotations

import math
import re
import time

import optuna
import pytest
from optuna.trial import TrialState

from tuner.config import StudyConfig, base_spec
from tuner.errors import ConfigError, StartFailed
from tuner.report import per_scenario_best
from tuner.search import pruning_savings
from tuner.sim.inprocess import (
    ModelService,
    model_parts,
    model_readiness,
    model_target,
    run_inprocess,
    true_objective,
)
from tuner.space import suggest
from tuner.spec import LaunchSpec
from tuner.study._starts import MAX_BRANCH_TRIES
from tuner.target.readiness import wait_ready
from tuner.trials import best_trials, counted_trials, record_of, study_record

from .conftest import MakeConfig, gate_when, seeds

BASE = {"block_size": 8, "draft_window": 2048, "max_running_requests": 64, "mem_fraction_static": 0.85}
OOM_AT_START = {**BASE, "algorithm": "DDTREE", "budget": 32, "topk": 10, "max_running_requests": 128,
                "mem_fraction_static": 0.92}  # fmt: skip
CORRUPT = {**BASE, "algorithm": "DDTREE", "budget": 28, "topk": 9, "max_running_requests": 16}
SLOW = {**BASE, "algorithm": "DFLASH", "block_size": 4, "draft_window": 512, "max_running_requests": 32,
        "mem_fraction_static": 0.86}  # fmt: skip
GOOD = {**BASE, "algorithm": "DFLASH", "block_size": 12, "max_running_requests": 48, "mem_fraction_static": 0.87}
CROWDED = GOOD | {"mem_fraction_static": 0.70}  # c32-long's 32 requests do not fit the pool together


def with_crash_param(text: str) -> str:
    """The demo with a fault-injection parameter: ``crash = 20000`` makes the server die under c32-long."""
    return text + (
        '\n[space.crash]\ntype = "categorical"\nchoices = ["none", 20000]\nabsent = "none"\n'
        'flag = "--sim-crash-above-batch-tokens"\n'
    )


def study_of(run) -> optuna.Study:  # type: ignore[no-untyped-def]
    return optuna.load_study(study_name=run.study_name, storage=run.storage)


def test_failures_end_pruned_with_evidence_never_fail(make_config: MakeConfig) -> None:
    # Every config that survives the benchmark is gated: the corrupt one is slower than the baseline, which
    # the demo's `when = "contenders"` would leave unchecked (see tests/study/test_gate_contenders.py).
    dies = GOOD | {"crash": 20000}
    cfg = make_config(
        search=seeds(OOM_AT_START | {"crash": "none"}, dies, CORRUPT | {"crash": "none"}) + "\npruning = false",
        edit=lambda text: with_crash_param(gate_when("after")(text)),
    )
    run = run_inprocess(cfg, storage=cfg.study.storage, trials=4)
    study = study_of(run)
    assert [t.state for t in study.trials] == [TrialState.COMPLETE] + [TrialState.PRUNED] * 3
    oom, died, corrupt = study.trials[1:4]
    assert oom.params == OOM_AT_START | {"crash": "none"} and record_of(oom).failure_phase == "ready"
    assert "Capture cuda graph failed: CUDA out of memory" in record_of(oom).failure_reason
    assert "Traceback" in record_of(oom).log_tail
    assert "set --cuda-graph-max-bs-decode to a smaller value" in record_of(oom).log_tail
    assert record_of(died).failure_phase == "benchmark"
    assert "died under load in scenario c32-long" in record_of(died).failure_reason
    assert record_of(corrupt).failure_phase == "gate" and record_of(corrupt).correct is False
    assert corrupt.constraints["correctness"] > 0  # infeasible for TPE as well as PRUNED
    assert [t.number for t in best_trials(study)] == [0]
    # The virtual clock saw four real restarts; the OOM paid the weight load plus half a graph capture.
    assert len(run.clock.trials) == 4 and run.clock.trials["trial-0001"]["startup"] > 360


def test_a_crowded_kv_pool_is_slower_not_a_failure(make_config: MakeConfig) -> None:
    cfg = make_config(search=seeds(GOOD, CROWDED) + "\npruning = false")
    run = run_inprocess(cfg, storage=cfg.study.storage, trials=3, noise=0.0)
    good, crowded = study_of(run).trials[1:3]
    assert good.state == crowded.state == TrialState.COMPLETE
    assert crowded.user_attrs["c32-long.tok_s"] < 0.9 * good.user_attrs["c32-long.tok_s"]
    assert crowded.user_attrs["c1-short.tok_s"] == pytest.approx(good.user_attrs["c1-short.tok_s"])


def test_failed_params_are_never_run_again(make_config: MakeConfig) -> None:
    cfg = make_config(search=seeds(OOM_AT_START))
    run_inprocess(cfg, storage=cfg.study.storage, trials=3)  # baseline, the seed, the DFLASH branch
    study = optuna.load_study(study_name=cfg.study.name, storage=cfg.study.storage)
    study.enqueue_trial(OOM_AT_START)  # as a sampler might propose it again
    run = run_inprocess(cfg, storage=cfg.study.storage, trials=4)
    study = study_of(run)
    repeat = study.trials[3]
    assert repeat.params == OOM_AT_START and record_of(repeat).duplicate_of == 1
    assert repeat.state == TrialState.PRUNED and record_of(repeat).command is None
    assert "trial-0003" not in run.clock.trials  # no restart for the repeat
    assert counted_trials(study) == 4


def random_failure_rate(cfg: StudyConfig, *, samples: int = 400) -> float:
    """Share of random-search configs (constraint violations resampled, as the loop does) that fail for real."""
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    outcomes: list[bool] = []
    while len(outcomes) < samples:
        trial = study.ask()
        params = suggest(trial, cfg.space)
        study.tell(trial, 0.0)
        if not cfg.space.violations(params):
            outcomes.append(true_objective(cfg, params) == 0.0)
    return sum(outcomes) / len(outcomes)


def _memory_up_to_98(text: str) -> str:
    """The demo with a static memory fraction up to 0.98: above ~0.93 most CUDA-graph captures do not fit."""
    return text.replace("low = 0.70\nhigh = 0.92", "low = 0.80\nhigh = 0.98")


def test_tpe_learns_to_avoid_failing_regions(make_config: MakeConfig) -> None:
    cfg = make_config(search="n_startup_trials = 8", edit=_memory_up_to_98)
    run = run_inprocess(cfg, storage=cfg.study.storage, trials=30, seed=1)
    study = study_of(run)
    assert not [t for t in study.trials if t.state == TrialState.FAIL]
    counted = [t for t in study.trials if record_of(t).duplicate_of is None]

    def failed(t: optuna.trial.FrozenTrial) -> bool:
        return t.state == TrialState.PRUNED and record_of(t).pruned_skipped is None

    guided = [failed(t) for t in counted[8:]]
    # About a third of random configs of this space fail; TPE, told about its failures, rarely picks one.
    assert sum(guided) / len(guided) < 0.5 * random_failure_rate(cfg)
    best = best_trials(study)[0]
    assert true_objective(cfg, best.params) > 1.05 * true_objective(cfg, cfg.baseline)


def test_regression_pruning_saves_time_and_never_stops_the_study(make_config: MakeConfig) -> None:
    cfg = make_config(search=seeds(GOOD, SLOW, GOOD | {"mem_fraction_static": 0.88}) + '\nprune_against = "best"')
    run = run_inprocess(cfg, storage=cfg.study.storage, trials=6)
    study = study_of(run)
    assert counted_trials(study) == 6
    slow = study.trials[2]
    assert slow.params == SLOW and slow.state == TrialState.PRUNED
    assert record_of(slow).failure_phase == "benchmark"
    assert re.fullmatch(
        r"pruned after scenario c1-short: [\d.]+ tok/s is confidently more than 5% slower than the reference's",
        record_of(slow).failure_reason,
    ), record_of(slow).failure_reason
    assert record_of(slow).pruned_skipped == ("c8-short", "c32-long")  # cheapest (c1-short) ran first
    assert record_of(slow).pruning_saved_s > 0
    near_best = study.trials[3]  # the same config as the best but one notch of memory: within noise
    assert near_best.state == TrialState.COMPLETE
    assert pruning_savings(study) >= record_of(slow).pruning_saved_s
    assert study_record(study).pruning_saved_s == round(pruning_savings(study), 3)  # the study-level record
    assert run.clock.seconds("trial-0002", what="benchmark") < run.clock.seconds("trial-0001", what="benchmark")


def test_invalid_seed_params_are_rejected_at_load(make_config: MakeConfig) -> None:
    with pytest.raises(ConfigError, match=r"search.seed_trials\[0\].budget"):
        make_config(search=seeds({"algorithm": "DDTREE", "budget": 64}))
    with pytest.raises(ConfigError, match=r"search.seed_trials\[0\].topp"):
        make_config(search=seeds({"topp": 3}))


def test_multi_objective_study_reports_a_pareto_front(make_config: MakeConfig) -> None:
    cfg = make_config(
        edit=lambda text: text.replace('kind = "geomean"', 'kind = "multi"\nobjectives = ["c1-short", "c32-long"]')
    )
    run = run_inprocess(cfg, storage=cfg.study.storage, trials=14, seed=2)
    study = study_of(run)
    assert len(study.directions) == 2
    front = best_trials(study)
    assert front
    for t in front:
        assert not any(
            all(o >= v for o, v in zip(other.values, t.values, strict=True)) and other.values != t.values
            for other in front
        )
    best = per_scenario_best(study, ["c1-short", "c32-long"])
    assert set(best) == {"c1-short", "c32-long"}
    assert best["c1-short"].user_attrs["c1-short.point"] == max(t.user_attrs["c1-short.point"] for t in front)


def test_model_readiness_fails_like_the_real_server(make_config: MakeConfig) -> None:
    cfg = make_config()
    base = base_spec(cfg.target)
    service = ModelService(base=base)
    endpoint = wait_ready  # any object: readiness for the model never touches the endpoint
    cases = {
        ("--speculative-dflash-draft-window-size", "4"): (
            "ValueError: --speculative-draft-window-size must be >= --speculative-num-draft-tokens (block_size). "
            "window_size=4, block_size=8."
        ),
        ("--mem-fraction-static", "0.92", "--max-running-requests", "128", "--speculative-ddtree-budget", "32"): (
            "Exception: Capture cuda graph failed: CUDA out of memory"
        ),
        ("--no-such-flag",): "unrecognized arguments: --no-such-flag",
        # Mainline has no DDTree budget flag.
        ("--sim-sglang-version", "0.5.23"): ("unrecognized arguments: --speculative-ddtree-budget 12"),
    }
    for extra, expected in cases.items():
        service.apply(LaunchSpec(argv=(*base.argv, *extra), env={"SGLANG_DDTREE_MAX_TOPK": "10"}))
        restarted = service.restart(label="x")
        with pytest.raises(StartFailed) as failed:
            model_readiness(service=service, restarted=restarted, endpoint=endpoint, config=cfg.readiness)  # type: ignore[arg-type]
        assert expected in failed.value.reason + failed.value.evidence
        assert not service.is_alive(restarted.new)
    service.revert()
    restarted = service.restart(label="ok")
    ready = model_readiness(service=service, restarted=restarted, endpoint=endpoint, config=cfg.readiness)  # type: ignore[arg-type]
    assert ready.seconds > 360 and "serving" in ready.phase_times
    assert service.running_spec() == base


def test_every_branch_is_measured_once_before_tpe_takes_over(make_config: MakeConfig) -> None:
    cfg = make_config(search="n_startup_trials = 2")
    run_inprocess(cfg, storage=cfg.study.storage, trials=2)
    run = run_inprocess(cfg, storage=cfg.study.storage, trials=4)  # a resume must not add a second one
    study = study_of(run)
    branch = [t for t in study.trials if record_of(t).branch is not None]
    assert [t.number for t in branch] == [1]  # right after the baseline (DDTREE)
    assert branch[0].params["algorithm"] == "DFLASH" and record_of(branch[0]).branch == {"algorithm": "DFLASH"}
    assert "budget" not in branch[0].params  # the rest is sampled, conditions applied


def test_a_branch_breaking_constraints_is_retried_then_given_up(make_config: MakeConfig) -> None:
    def dflash_never_valid(text: str) -> str:
        return text + (
            '\n[space.dflash_steps]\ntype = "int"\nlow = 5\nhigh = 6\nflag = "--num-continuous-decode-steps"\n'
            'when = { algorithm = "DFLASH" }\n\n[[constraints]]\nleft = "dflash_steps"\nop = "<="\nright = 4\n'
        )

    cfg = make_config(search='sampler = "random"', edit=dflash_never_valid)
    run = run_inprocess(cfg, storage=cfg.study.storage, trials=3, seed=0)
    study = study_of(run)
    branch = [t for t in study.trials if record_of(t).branch is not None]
    assert len(branch) == MAX_BRANCH_TRIES
    assert all(record_of(t).rejected and t.params["algorithm"] == "DFLASH" for t in branch)
    assert counted_trials(study) == 3


def _rounds_after_two(visits: list[str], trials: list[int]) -> list[list[int]]:
    rounds = sorted({int(v.rsplit("-", 1)[1]) for v in visits if int(v.rsplit("-", 1)[1]) > 2})
    return [[n for n in trials if f"confirm-{n:04d}-{r}" in visits] for r in rounds]


def test_a_noisy_confirmation_races_the_finalists_that_could_still_win_and_drops_the_one_behind(
    make_config: MakeConfig,
) -> None:
    """5% noise: two samples cannot tell apart configs within the study's precision (2%). Two configs of the same
    true speed and one 9% slower: after the two rounds every finalist gets, the slower one is confidently
    behind and measured no more, the other two race on to the limit."""
    from tuner.study._confirm import MAX_ROUNDS, ROUNDS

    same, slower = GOOD | {"mem_fraction_static": 0.88}, GOOD | {"block_size": 8, "mem_fraction_static": 0.70}
    cfg = make_config(
        search=seeds(GOOD, same, slower) + "\npruning = false\nconfirm_top = 3\nconfirm_baseline = false",
        edit=lambda text: text.replace(
            '"--speculative-dflash-block-size", "8"', '"--speculative-dflash-block-size", "4"'
        ),
    )  # a baseline behind all three
    assert true_objective(cfg, GOOD) == true_objective(cfg, same) and cfg.benchmark.precision == 0.02
    assert true_objective(cfg, cfg.baseline) < true_objective(cfg, slower) < 0.92 * true_objective(cfg, GOOD)
    run = run_inprocess(cfg, storage=cfg.study.storage, trials=4, seed=0, noise=0.05)
    c = study_of(run).user_attrs["confirmation"]
    assert sorted(c["trials"]) == [1, 2, 3]  # the three seeds, over the baseline
    visits = [label for label in run.clock.trials if label.startswith("confirm-")]
    assert c["rounds"] == MAX_ROUNDS > ROUNDS
    assert _rounds_after_two(visits, c["trials"]) == [[n for n in c["trials"] if n != 3]] * (MAX_ROUNDS - ROUNDS)
    assert sum(v.startswith("confirm-0003-") for v in visits) == ROUNDS
    assert c["winner"] in (1, 2) and c["ranks"]["3"] == 3


def test_finalists_within_the_study_s_precision_are_not_raced_at_low_noise(make_config: MakeConfig) -> None:
    """2% noise: after two rounds none of three configs of one true speed can still be 2% faster than the leader
    (with a race to a difference of 0 they would be re-measured until the limit: a restart each, for nothing)."""
    same = [GOOD | {"mem_fraction_static": m} for m in (0.86, 0.87, 0.88)]
    cfg = make_config(search=seeds(*same) + "\npruning = false\nconfirm_top = 3")
    run = run_inprocess(cfg, storage=cfg.study.storage, trials=4, seed=0)
    c = study_of(run).user_attrs["confirmation"]
    visits = [v for v in run.clock.trials if v.startswith("confirm-")]
    assert c["rounds"] == 2 and len([v for v in visits if not v.startswith("confirm-0000-")]) == 6
    assert c["baseline"]["trial"] == 0 and c["baseline"]["visits"] == 2  # beside them in both rounds


def test_no_race_round_starts_that_would_end_after_the_deadline(make_config: MakeConfig) -> None:
    from tuner.study._confirm import ROUNDS, confirm_top

    same = [GOOD | {"mem_fraction_static": m} for m in (0.86, 0.87, 0.88)]  # one true speed, 5% noise: a race
    cfg = make_config(search=seeds(*same) + "\npruning = false\nconfirm_top = 0\nconfirm_baseline = false")
    run = run_inprocess(cfg, storage=cfg.study.storage, trials=4, seed=0, noise=0.05)
    service = ModelService(base=base_spec(cfg.target), load_time_s=1.0)
    parts = model_parts(cfg, model_target(cfg, service), seed=0, noise=0.05)
    said: list[str] = []
    result = confirm_top(study_of(run), cfg, parts=parts, k=3, progress=said.append, until=time.time() - 1.0)
    assert result is not None and study_of(run).user_attrs["confirmation"]["rounds"] == ROUNDS
    assert [label.rsplit("-", 1)[1] for label in service.clock.trials if label.startswith("confirm-")] == (
        ["1"] * 3 + ["2"] * 3
    )  # the rounds the time budget keeps free run; the race would end late
    assert any(line.startswith(f"  no round {ROUNDS + 1} for #") and "after the deadline" in line for line in said)


def test_a_per_stream_objective_is_confirmed_on_per_stream_repeats(make_config: MakeConfig) -> None:
    cfg = make_config(
        search=seeds(GOOD, SLOW) + "\npruning = false\nconfirm_top = 2",
        edit=lambda text: text.replace('metric = "output_tok_s"', 'metric = "per_stream_tok_s"'),
    )
    assert cfg.objective.metric == "per_stream_tok_s"
    study = study_of(run_inprocess(cfg, storage=cfg.study.storage, trials=3, seed=0))
    c = study.user_attrs["confirmation"]
    for n, value in c["values"].items():
        # Fresh per-stream repeats, scored like the trial's own: near its objective, never the 0 of no repeats.
        assert value == pytest.approx(study.trials[int(n)].values[0], rel=0.1)


def test_confirm_top_remeasures_the_top_three_interleaved(make_config: MakeConfig) -> None:
    from tuner.trials import recommended, study_record

    # Gated before the benchmark, so no finalist drops out at the end for wrong answers.
    cfg = make_config(
        search=seeds(GOOD, SLOW, GOOD | {"mem_fraction_static": 0.88}) + "\nconfirm_top = 3", edit=gate_when("before")
    )
    run = run_inprocess(cfg, storage=cfg.study.storage, trials=8, seed=2)
    study = study_of(run)
    c = study.user_attrs["confirmation"]
    top = sorted(
        (t for t in study.trials if t.state == TrialState.COMPLETE and record_of(t).duplicate_of is None),
        key=lambda t: t.values[0],
        reverse=True,
    )[:3]
    assert c["trials"] == [t.number for t in top] and c["best_before"] == top[0].number
    # base A B C base A B C: each visit is its own restart, in that order, the baseline first in every round;
    # then the race of those still within noise, the baseline still beside them.
    everything = [label for label in run.clock.trials if label.startswith("confirm-")]
    base = [label for label in everything if label.startswith("confirm-0000-")]
    assert 0 not in c["trials"] and base == [f"confirm-0000-{r}" for r in range(1, c["rounds"] + 1)]
    assert everything[:8] == [f"confirm-{n:04d}-{r}" for r in (1, 2) for n in (0, *c["trials"])]
    visits = [label for label in everything if label not in base]
    racing = c["trials"]
    for r in range(3, c["rounds"] + 1):
        later = [n for n in c["trials"] if f"confirm-{n:04d}-{r}" in visits]
        assert len(later) >= 2 and set(later) <= set(racing)  # a config out of the race stays out
        racing = later
    assert len(visits) == 6 + sum(len(racing) for racing in _rounds_after_two(visits, c["trials"]))
    assert all(run.clock.seconds(v, what="benchmark") > 0 for v in visits)
    values = {int(n): v for n, v in c["values"].items()}
    assert c["winner"] == max(values, key=lambda n: values[n]) and c["held"] == (c["winner"] == top[0].number)
    for rank, n in enumerate(sorted(values, key=lambda n: -values[n]), start=1):
        assert c["ranks"][str(n)] == rank
        # Fresh repeats, scored like a trial: close to the trial's own objective (2% noise).
        assert values[n] == pytest.approx(study.trials[n].values[0], rel=0.1)
    rec = recommended(study)
    assert rec is not None and rec.confirmed and rec.trial.number == c["winner"]
    text = study_record(study).confirmation_text
    assert text is not None and ("held its place" in text if c["held"] else f"#{c['winner']} recommended" in text)


def test_the_speed_up_is_measured_side_by_side_in_the_confirmation(make_config: MakeConfig) -> None:
    """The baseline stands beside the finalists in every round: the speed-up every view prints is the winner's
    fresh repeats over the baseline's, from the same rounds, and says so."""
    from tuner.report import baseline_drift, recommendation_lines, speedup_clause, study_speedup, trial_note_text
    from tuner.trials import recommended

    twin = GOOD | {"mem_fraction_static": 0.88}  # two finalists ahead of the baseline
    cfg = make_config(search=seeds(GOOD, twin) + "\npruning = false\nconfirm_top = 2")
    study = study_of(run_inprocess(cfg, storage=cfg.study.storage, trials=3, seed=0))
    c = study.user_attrs["confirmation"]
    rec = recommended(study)
    assert rec is not None and rec.confirmed and 0 not in c["trials"]
    assert c["baseline"]["trial"] == 0 and c["baseline"]["visits"] == c["rounds"] >= 2
    speedup = study_speedup(study, cfg, rec.trial)
    assert speedup is not None and speedup.side_by_side and speedup.baseline_visits == c["rounds"]
    winner, base = c["figures"][str(rec.trial.number)], c["figures"]["0"]
    weights = cfg.benchmark.objective_weights()
    ratio = math.exp(sum(w * math.log(winner[s][0] / base[s][0]) for s, w in weights.items()) / sum(weights.values()))
    assert speedup.ratio == pytest.approx(ratio)
    assert speedup.low is not None and speedup.low < speedup.ratio < (speedup.high or 0)
    clause = speedup_clause(speedup)
    side = f"measured side by side in the confirmation (baseline re-measured {c['rounds']} times)"
    if speedup.confident:
        assert clause == f"{speedup.text} the baseline's objective, {side}"
    else:
        assert clause == f"NOT confidently faster than the baseline ({speedup.text}, {side}): keep the baseline command"
    assert clause in recommendation_lines(study, cfg, rec, finish="tune finish")[0]
    assert clause in (trial_note_text(rec.trial, rec=rec, config=cfg, speedup=speedup) or "")
    assert baseline_drift(study, cfg) is None  # the simulated machine does not drift
    # A machine 10% slower by the end of the night: the baseline's own figure says so.
    before = study.trials[0].values[0]
    study.set_user_attr("confirmation", c | {"baseline": c["baseline"] | {"value": round(before * 0.9, 3)}})
    drift = baseline_drift(study, cfg)
    assert drift is not None and f"{before:.1f} in trial #0" in drift and "(-10.0%)" in drift


def test_without_the_baseline_beside_them_the_speed_up_says_it_is_not_side_by_side(make_config: MakeConfig) -> None:
    from tuner.report import speedup_clause, study_speedup
    from tuner.trials import recommended

    twin = GOOD | {"mem_fraction_static": 0.88}
    cfg = make_config(search=seeds(GOOD, twin) + "\npruning = false\nconfirm_top = 2\nconfirm_baseline = false")
    run = run_inprocess(cfg, storage=cfg.study.storage, trials=3, seed=0)
    study = study_of(run)
    assert study.user_attrs["confirmation"]["baseline"] is None
    assert not any(label.startswith("confirm-0000-") for label in run.clock.trials)
    rec = recommended(study)
    assert rec is not None
    speedup = study_speedup(study, cfg, rec.trial)
    assert speedup is not None and not speedup.side_by_side
    assert "against the baseline's own trial (not side by side)" in speedup_clause(speedup)
