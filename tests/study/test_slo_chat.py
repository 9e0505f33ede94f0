"""``studies/slo-chat.toml`` on the in-process model: the config with the best closed-loop throughput misses the
chat service's latency promise, and tune recommends one that keeps it (the simulator's open-loop queueing:
a bigger batch makes every decode step, so every request's TPOT, longer); the report says up to which rate."""

from __future__ import annotations

from pathlib import Path

import optuna
from optuna.trial import TrialState

from tuner.config import load_config
from tuner.report import build_report, slo_object, speedup_clause, study_speedup
from tuner.sim.inprocess import run_inprocess
from tuner.trials import Outcome, recommended

STUDY = Path(__file__).resolve().parents[2] / "studies" / "slo-chat.toml"


def test_the_fastest_closed_loop_config_misses_the_slo_and_tune_recommends_one_that_meets_it(
    tmp_path: Path,
) -> None:
    config = load_config(STUDY)
    storage = f"sqlite:///{tmp_path / 'slo-chat.db'}"
    run = run_inprocess(config, storage=storage, trials=20, seed=0)
    study = optuna.load_study(study_name=run.study_name, storage=storage)
    measured = [t for t in study.trials if t.state == TrialState.COMPLETE and "c64-batch.point" in t.user_attrs]
    fastest = max(measured, key=lambda t: t.user_attrs["c64-batch.point"])
    assert Outcome.of(fastest) == Outcome.MISSES_SLO, fastest.user_attrs
    assert fastest.user_attrs["chat-4rps.tpot_p99_s"] > 0.03  # its big batch makes every token slower
    # 160 requests bound the p99 from below only (an upper bound at 80% needs 230): recorded as None, not guessed.
    low, high = (fastest.user_attrs.get(f"chat-4rps.tpot_p99_{side}_s") for side in ("low", "high"))
    assert high is None and low is not None and low <= fastest.user_attrs["chat-4rps.tpot_p99_s"]

    rec = recommended(study)
    assert rec is not None
    slo = slo_object(rec.trial, config)
    # Kept in the search (not missed); its passes of 160 requests (as many as the verdict could use, up to
    # max_repeats), all within the limits, cannot show 99%, so no view calls it "met".
    assert slo is not None and slo["met"] is False and slo["verdict"] == "undecided"
    chat = slo["scenarios"]["chat-4rps"]
    assert chat["high"] >= chat["required"] == 0.99 > chat["low"] and chat["verdict"] == "undecided"
    assert rec.trial.user_attrs["c64-batch.point"] < fastest.user_attrs["c64-batch.point"]
    assert rec.trial.params["max_running_requests"] < fastest.params["max_running_requests"]

    # The report says how far each is shown to keep the promise: not at 4 req/s for the recommendation (kept by
    # every request, too few requests to show it), with its share and interval; and draws both against the rate.
    report = build_report(study, config, tmp_path / "report", storage=storage)
    text = report.path.read_text()
    attrs = rec.trial.user_attrs
    assert attrs["chat-4rps.requests"] == config.benchmark.max_repeats * 160  # undecided: every pass it may take
    unshown = (f"not shown to meet it at 4 req/s (100.0% ({attrs['chat-4rps.attainment_low']:.1%}-100.0%) of "
               f"{attrs['chat-4rps.requests']} requests)")  # fmt: skip
    assert f"**Recommended, in its own trial: {unshown}.**" in text
    assert report.plots["latency_rate"].stat().st_size > 10_000

    # The baseline breaks the promise: whatever the ratio of throughputs, it is no alternative to recommend.
    speedup = study_speedup(study, config, rec.trial)
    assert speedup is not None and speedup.baseline_misses is not None
    assert speedup.baseline_misses.startswith("misses the SLO in chat-4rps")
    clause = speedup_clause(speedup)
    assert "keep the baseline command" not in clause and "the baseline is no alternative" in clause
    assert clause in text
    # Its table quotes each p99 with its interval; 160 requests allow no upper bound on it at 80%.
    assert "| config | scenario | offered req/s | SLO attainment | TTFT p99 s | TPOT p99 ms | E2E p99 s |" in text
    row = next(x for x in text.splitlines() if x.startswith(f"| recommended (#{rec.trial.number}) | chat-4rps | 4 |"))
    tpot, low, high = (rec.trial.user_attrs.get(f"chat-4rps.tpot_p99{k}_s") for k in ("", "_low", "_high"))
    assert f"| {tpot * 1000:.3g} [{low * 1000:.3g}, {'none' if high is None else f'{high * 1000:.3g}'}] |" in row
    assert any(x.startswith("| baseline (#") and "| chat-4rps |" in x and "(misses)" in x for x in text.splitlines())
    assert "| 4 | 100.0% (not shown) |" in row
