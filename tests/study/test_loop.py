"""The whole loop against a real simulator process, real Optuna storage and the real process manager."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from tuner.stats import SequentialPolicy
from tuner.study import run_study
from tuner.study._storage import FingerprintMismatch
from tuner.trials import best_trials, counted_trials, recommended, record_of

OOM = {
    "algorithm": "DDTREE", "budget": 32, "topk": 10, "block_size": 8, "draft_window": 2048,
    "max_running_requests": 128, "mem_fraction_static": 0.92,
}  # fmt: skip
CORRUPT = {
    "algorithm": "DDTREE", "budget": 28, "topk": 9, "block_size": 8, "draft_window": 2048,
    "max_running_requests": 16, "mem_fraction_static": 0.85,
}  # fmt: skip


def load(cfg) -> optuna.Study:  # type: ignore[no-untyped-def]
    return optuna.load_study(study_name=cfg.study.name, storage=cfg.study.storage)


def seeds(*trials: dict) -> str:  # type: ignore[type-arg]
    rows = ", ".join("{" + ", ".join(f"{k} = {v!r}" for k, v in t.items()) + "}" for t in trials)
    return f"seed_trials = [{rows}]".replace("'", '"')


def test_short_study_completes_with_baseline_first(make_config, capsys) -> None:  # type: ignore[no-untyped-def]
    from tuner.cli import main

    cfg = make_config()
    summary = run_study(cfg, trials=3)
    study = load(cfg)
    assert summary.counted == counted_trials(study) == 3
    first = study.trials[0]
    assert record_of(first).is_baseline is True
    assert first.params == cfg.baseline
    assert first.state == TrialState.COMPLETE
    assert record_of(first).gate == "2/2" and record_of(first).correct is True
    assert first.user_attrs["c2.tok_s"] > 0 and first.user_attrs["c2.accept_length"] > 1
    assert record_of(first).ready_s > 0
    assert "--speculative-ddtree-budget 12" in record_of(first).command
    assert best_trials(study)
    assert study.user_attrs["config_fingerprint"] == cfg.fingerprint()
    capsys.readouterr()
    assert main(["best", "--config", cfg.source]) == 0
    out = capsys.readouterr().out
    rec = recommended(study)  # the confirmed winner: the top was re-measured at the end
    assert rec is not None and rec.confirmed and "confirmation" in study.user_attrs
    assert f"recommended: trial #{rec.trial.number} (confirmed winner)" in out
    assert "launch: " in out and "--speculative-algorithm" in out and "deploy: tune apply --best --config " in out


def test_failing_and_incorrect_configs_are_pruned_with_evidence(make_config) -> None:
    cfg = make_config(search=seeds(OOM, CORRUPT))
    run_study(cfg, trials=3)
    study = load(cfg)
    oom, corrupt = study.trials[1], study.trials[2]
    assert oom.params == OOM and oom.state == TrialState.PRUNED
    assert record_of(oom).failure_phase == "ready"
    assert "out of memory" in record_of(oom).failure_reason.lower()
    assert "Traceback" in record_of(oom).log_tail
    assert corrupt.params == CORRUPT and corrupt.state == TrialState.PRUNED
    assert record_of(corrupt).failure_phase == "gate"
    assert record_of(corrupt).correct is False
    assert corrupt.constraints["correctness"] > 0
    assert all(t.number not in (1, 2) for t in best_trials(study))


def test_resume_continues_to_the_total_and_skips_repeats(make_config) -> None:
    cfg = make_config(search=seeds(OOM))
    run_study(cfg, trials=3)  # baseline, the seed, the DFLASH branch
    study = load(cfg)
    assert counted_trials(study) == 3
    study.enqueue_trial(OOM)  # as a sampler might propose it again
    run_study(cfg, trials=4)
    study = load(cfg)
    assert counted_trials(study) == 4
    repeat = study.trials[3]
    assert repeat.params == OOM and record_of(repeat).duplicate_of == 1
    assert repeat.state == TrialState.PRUNED  # a failed config is never run again
    assert record_of(repeat).command is None
    assert len(study.trials) == 5


def test_a_config_that_differs_only_in_knobs_its_server_ignores_is_not_run_again(make_config) -> None:
    """SGLang's DDTree knobs do nothing under DFLASH: in a space that does not say so (no `when`), two DFLASH
    samples that differ only in them are one config, measured once."""
    dflash = {"algorithm": "DFLASH", "budget": 8, "topk": 4, "block_size": 8, "draft_window": 2048,
              "max_running_requests": 64, "mem_fraction_static": 0.85}  # fmt: skip
    unconditional = lambda text: text.replace('when = { algorithm = "DDTREE" }\n', "")  # noqa: E731
    cfg = make_config(search=seeds(dflash, dict(dflash, budget=16, topk=2)), edit=unconditional)
    assert not cfg.space.by_name("budget").when
    run_study(cfg, trials=3)
    study = load(cfg)
    first, again = study.trials[1], study.trials[2]
    assert first.params == dflash and record_of(first).duplicate_of is None
    assert again.params["budget"] == 16 and record_of(again).duplicate_of == first.number
    assert record_of(again).command is None  # no restart
    assert again.state == first.state and again.values == first.values


def test_constraint_violations_cost_no_restart_and_do_not_count(make_config) -> None:
    bad = dict(OOM, draft_window=8, block_size=16)
    cfg = make_config(search=seeds(bad))
    run_study(cfg, trials=2)
    study = load(cfg)
    rejected = study.trials[1]
    assert record_of(rejected).rejected is True
    assert "draft_window >= block_size" in record_of(rejected).failure_reason
    assert record_of(rejected).command is None
    assert counted_trials(study) == 2


def test_changed_space_is_refused_unless_forced(make_config) -> None:
    cfg = make_config()
    run_study(cfg, trials=1)
    changed = make_config(edit=lambda t: t.replace("high = 32", "high = 28"))
    with pytest.raises(FingerprintMismatch, match="--force-config"):
        run_study(changed, trials=2)
    run_study(changed, trials=2, force_config=True)
    assert counted_trials(load(changed)) == 2


def test_resume_uses_the_config_stored_in_the_study(make_config, tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    from tuner.cli import main

    cfg = make_config(name="stored")
    run_study(cfg, trials=1)
    Path(cfg.source).unlink()  # the study file is gone: resume must not need it
    assert main(["resume", "--storage", cfg.study.storage, "--study", "stored", "--trials", "2"]) == 0
    assert counted_trials(load(cfg)) == 2
    assert main(["status", "--storage", cfg.study.storage, "--study", "stored", "--wide"]) == 0
    out = capsys.readouterr().out
    assert "study stored: 2/2 counted trials" in out and "<baseline>" in out
    assert "<branch algorithm=DFLASH>" in out  # trial #1: the branch the baseline did not enter


def test_the_time_left_is_in_restarts_and_measuring(make_config) -> None:  # type: ignore[no-untyped-def]
    """What `tune status` says of a running study once some of its trials have run."""
    from tuner.study import study_eta
    from tuner.trials import study_record

    cfg = make_config(name="left")
    run_study(cfg, trials=2)
    study = load(cfg)
    eta = study_eta(study.trials, cfg, trials_left=3, confirmed=study_record(study).confirmation is not None)
    assert eta.restarts == 2 and eta.seconds is not None and eta.seconds > 0
    assert "left: 3 trials" in eta.text() and "each a restart" in eta.text(), eta.text()


def test_sequential_repeats_stop_early_and_intermediates_are_on_the_objective_scale(make_config) -> None:  # type: ignore[no-untyped-def]
    # A loose precision (+-50%) makes the scenario "easy": two agreeing repeats settle it, far below the cap.
    sequential = "min_repeats = 2\nmax_repeats = 6\nprecision = 0.5"
    cfg = make_config(edit=lambda text: text.replace("repeats = 2", sequential))
    run_study(cfg, trials=3)
    study = load(cfg)
    measured = [t for t in study.trials if "c2.repeats" in t.user_attrs]
    assert measured
    for t in measured:
        repeats = t.user_attrs["c2.repeats"]
        assert 1 <= len(repeats) <= 6
        # Where the load generator kept up. A starved client (a loaded machine: tune warns "requests went out
        # late" and marks the scenario client-bound) can measure one repeat at a tenth of the rest, and then the
        # scenario rightly takes all 6.
        if not t.user_attrs.get("c2.client_bound"):
            assert len(repeats) < 6 and t.user_attrs["c2.stopped"] in ("precise", "worse", "better", "behind")
        assert record_of(t).steps == ("c2",)
        point, score = t.user_attrs["c2.point"], t.user_attrs["c2.score"]
        assert 0 < score <= point and (len(repeats) == 1 or t.user_attrs["c2.half_width"] > 0)
    # The baseline (no reference to beat) stops at the first look the policy calls precise: on an idle machine two
    # agreeing repeats; on a loaded one the simulator's own pace can swing 40% between two, and a third settles it.
    baseline = study.trials[0]
    repeats = baseline.user_attrs["c2.repeats"]
    policy = SequentialPolicy.from_section(cfg.benchmark)
    looks = [policy.decide(repeats[:k]).verdict for k in range(1, len(repeats) + 1)]
    assert looks[:-1] == ["more"] * (len(repeats) - 1) and baseline.user_attrs["c2.stopped"] == looks[-1], looks
    assert looks[-1] == "precise" or baseline.user_attrs.get("c2.client_bound"), looks
    for t in measured:
        if t.state == TrialState.COMPLETE:
            # The last intermediate value is the trial's objective, not a per-scenario tok/s.
            assert t.intermediate_values[max(t.intermediate_values)] == pytest.approx(t.values[0], rel=1e-6)
