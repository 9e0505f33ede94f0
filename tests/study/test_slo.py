"""``[slo]`` in the study loop: a trial whose open-loop scenario confidently misses its latency promise is
infeasible (Optuna's ``slo`` constraint, so TPE learns the region), never ranked, with the one line that says why.
Runs whole studies on the in-process model, whose open-loop scenarios queue as the simulator's do."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import optuna
import pytest
from optuna.trial import TrialState

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fixtures_demo import MakeConfig, make_config

from tuner.cli import main
from tuner.trials import Outcome, closest_to_slo, feasible, record_of

__all__ = ["make_config"]

C32 = 'name = "c32-long"\nconcurrency = 32\nprompt_tokens = 1024\noutput_tokens = 16\nrequests = 32\n'
OPEN = 'name = "chat-4rps"\nrate = 4.0\nprompt_tokens = 512\noutput_tokens = 64\nrequests = 80\n'


def _with_slo(slo: str):  # type: ignore[no-untyped-def]
    return lambda text: text.replace(C32, OPEN, 1).replace("[objective]", f"[slo]\n{slo}\n\n[objective]", 1)


def _complete(cfg_name: str, storage: str) -> list[optuna.trial.FrozenTrial]:
    study = optuna.load_study(study_name=cfg_name, storage=storage)
    return [t for t in study.trials if t.state == TrialState.COMPLETE and "slo" in t.constraints]


def _tune(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_a_promise_no_config_keeps_makes_every_trial_infeasible(
    make_config: MakeConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    from tuner.sim.inprocess import run_inprocess

    cfg = make_config(name="tight", edit=_with_slo("ttft_s = 0.001\nattainment = 0.99"))
    run_inprocess(cfg, storage=cfg.study.storage, trials=3)
    done = _complete("tight", cfg.study.storage)
    assert done, "the trials ran their open-loop scenario"
    for t in done:
        assert t.constraints["slo"] > 0
        missed = record_of(t).slo_missed or ""
        assert missed.startswith("misses the SLO in chat-4rps: 0% of requests within TTFT 1 ms")
        assert t.user_attrs["chat-4rps.attainment"] == 0.0
        assert Outcome.of(t) == Outcome.MISSES_SLO  # every view says why, in one line
        assert Outcome.text(t) == "infeasible: " + missed
    study = optuna.load_study(study_name="tight", storage=cfg.study.storage)
    assert feasible(study) == []
    _no_config_met_the_slo(capsys, str(cfg.source), closest_to_slo(study))


def _no_config_met_the_slo(capsys: pytest.CaptureFixture[str], source: str, closest: object) -> None:
    """``tune best`` names the closest config, marked as not meeting the SLO; ``apply --best`` refuses it."""
    assert isinstance(closest, optuna.trial.FrozenTrial)
    n = closest.number
    code, out, _ = _tune(capsys, "best", "--config", source)
    assert code == 4  # no answer (docs/faults.md)
    assert "no config met the SLO: nothing to recommend" in out
    assert f"closest (does NOT meet the SLO): trial #{n}, attainment chat-4rps 0.0% (needs 99%)" in out
    # What the user would be promising:
    assert "    latency: p50 / p99 of the requests [80% interval over these requests]" in out
    latency = [line.split()[0] for line in out.splitlines() if line.startswith("      ") and "TTFT" in line]
    assert latency == ["chat-4rps"]  # the promise's scenario; a closed-loop one's latency is in --json
    code, out, _ = _tune(capsys, "best", "--config", source, "--json")
    best = json.loads(out)
    assert code == 4 and best["number"] == n and best["recommended"] is False
    slo = best["slo"]
    assert slo["met"] is False and slo["limits"] == {"ttft_s": 0.001} and slo["attainment"] == 0.99
    assert slo["scenarios"]["chat-4rps"]["attainment"] == 0.0 and slo["scenarios"]["chat-4rps"]["high"] < 0.99
    assert slo["missed"].startswith("misses the SLO in chat-4rps")
    assert best["scenarios"]["chat-4rps"]["latency"]["ttft_s"]["p99"] == closest.user_attrs["chat-4rps.ttft_p99_s"]
    code, out, err = _tune(capsys, "finish", "--config", source)  # the end of a study says it too
    assert code == 4, err  # the study ran to its end with no answer: the same status as tune best
    assert "no config met the SLO: nothing to recommend" in out
    assert f"closest (does NOT meet the SLO): trial #{n}" in out
    code, out, err = _tune(capsys, "apply", "--best", "--config", source)
    assert code != 0 and "applying" not in out
    assert len(err.strip().splitlines()) == 1, err
    assert f"no config met the SLO (the closest, trial #{n}, misses the SLO in chat-4rps" in err
    assert f"apply it anyway with --trial {n}" in err


def test_a_promise_every_config_keeps_leaves_the_study_as_it_was(
    make_config: MakeConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    from tuner.sim.inprocess import run_inprocess

    cfg = make_config(name="loose", edit=_with_slo("ttft_s = 60\ntpot_s = 10"))
    run_inprocess(cfg, storage=cfg.study.storage, trials=3)
    done = _complete("loose", cfg.study.storage)
    assert done
    for t in done:
        assert t.constraints["slo"] <= 0 and record_of(t).slo_missed is None
        assert t.user_attrs["chat-4rps.attainment"] == 1.0
        assert t.user_attrs["chat-4rps.offered_rps"] > 0 and t.user_attrs["chat-4rps.ttft_p99_s"] > 0
    code, out, _ = _tune(capsys, "best", "--config", str(cfg.source), "--json")
    slo = json.loads(out)["slo"]
    # A trial's passes of 80 requests, all within the limits, cannot show 99% (too few steady requests, and each
    # look at the verdict pays for the others): each trial is kept in the search (not missed), never called "met" ...
    for t in done:
        verdict = record_of(t).verdict("chat-4rps")
        assert verdict is not None and verdict.state == "undecided" and verdict.low is not None and verdict.low < 0.99
    # ... and the confirmation re-measures the finalists on fresh arrivals until it is decided: 4 rounds, whose
    # steady requests' interval clears 99%. The recommendation is shown to meet it.
    assert code == 0 and slo["met"] is True and slo["verdict"] == "met" and slo["confirmed"] is True
    assert slo["limits"] == {"ttft_s": 60.0, "tpot_s": 10.0}
    chat = slo["scenarios"]["chat-4rps"]
    assert chat["attainment"] == 1.0 and 0.99 <= chat["low"] < 1.0 == chat["high"] and chat["required"] == 0.99
    # The steady requests of 4 visits of 80 (each pass's queue fill left out): more than the 230 that show 99%.
    assert chat["verdict"] == "met" and 230 <= chat["requests"] < 4 * 80
    # Every scenario is promised the same; the in-process model judges the open-loop one only.
    assert set(slo["scenarios"]) == {"c1-short", "c8-short", "chat-4rps"}
    assert slo["scenarios"]["c1-short"]["attainment"] is None
    _latency_with_intervals(capsys, cfg.source, cfg.study.storage, json.loads(out))


def _latency_with_intervals(
    capsys: pytest.CaptureFixture[str], source: Path, storage: str, best: dict[str, Any]
) -> None:
    """``tune best`` gives each percentile its interval as recorded; a p99 of too few requests for an upper bound
    at 80% (the largest of n is above the p99 only 1 - 0.99**n of the time) has none: null in JSON, ``none`` in
    text, with the note that says why."""
    attrs = optuna.load_study(study_name="loose", storage=storage).trials[best["number"]].user_attrs
    latency = best["scenarios"]["chat-4rps"]["latency"]
    assert latency["confidence"] == 0.8
    for measure, key in (("ttft_s", "ttft"), ("tpot_s", "tpot"), ("e2e_s", "e2e")):
        p50, p99 = latency[measure]["p50_interval"], latency[measure]["p99_interval"]
        assert p50 == [attrs[f"chat-4rps.{key}_p50_low_s"], attrs[f"chat-4rps.{key}_p50_high_s"]]
        assert p50[0] <= latency[measure]["p50"] <= p50[1]
        assert p99 == [attrs[f"chat-4rps.{key}_p99_low_s"], attrs[f"chat-4rps.{key}_p99_high_s"]]
        assert p99[0] is not None and p99[0] <= latency[measure]["p99"]
        assert latency[measure]["p90"] == attrs[f"chat-4rps.{key}_p90_s"]
    code, out, _ = _tune(capsys, "best", "--config", str(source))
    assert code == 0 and "    latency: p50 / p99 of the requests [80% interval over these requests]" in out
    line = next(x for x in out.splitlines() if x.strip().startswith("chat-4rps"))
    p99, high = attrs["chat-4rps.ttft_p99_s"], attrs["chat-4rps.ttft_p99_high_s"]
    shown = "none" if high is None else f"{high:.3g}"
    assert line.split(";")[0].endswith(f" / {p99:.3g} [{attrs['chat-4rps.ttft_p99_low_s']:.3g}, {shown}] s")
    assert high is not None or "none: too few requests for that bound at 80% confidence" in out


def test_goodput_objective_is_the_geomean_of_the_rates_that_met_the_slo(make_config: MakeConfig) -> None:
    from tuner.config import StudyConfig
    from tuner.objective._throughput import bound as objective_bound
    from tuner.sim.inprocess import run_inprocess
    from tuner.trials._confirmed import CONFIRMATION

    def edit(text: str) -> str:
        text = _with_slo("ttft_s = 60\ntpot_s = 10")(text)
        return text.replace('kind = "geomean"\nmetric = "output_tok_s"', 'kind = "goodput"', 1)

    cfg: StudyConfig = make_config(name="goodput", edit=edit)
    assert cfg.objective.metric == "goodput_rps"
    run_inprocess(cfg, storage=cfg.study.storage, trials=5)
    study = optuna.load_study(study_name="goodput", storage=cfg.study.storage)
    done = feasible(study)
    assert len(done) >= 2
    names = [s.name for s in cfg.benchmark.scenarios]
    for t in done:
        user = t.user_attrs
        # The open-loop scenario: its achieved rate times the attainment's lower end (every request met it).
        rate = user["chat-4rps.achieved_rps"]
        assert user["chat-4rps.goodput_rps_low"] == pytest.approx(rate * user["chat-4rps.attainment_low"], rel=1e-3)
        # A closed-loop scenario the model does not judge counts every request: tok/s over tokens per answer.
        assert user["c1-short.goodput_rps"] == pytest.approx(user["c1-short.point"] / 32, rel=1e-3)
        points = {n: user[f"{n}.goodput_rps"] for n in names}
        lows = {n: user[f"{n}.goodput_rps_low"] for n in names}
        assert t.values[0] == pytest.approx(objective_bound(points, lows, cfg.benchmark), rel=1e-3)
    # The confirmation re-scores its fresh repeats as goodput too (requests/s, not tokens/s).
    confirmation = study.user_attrs[CONFIRMATION]
    best = max(t.values[0] for t in done)
    assert all(0.5 * best < v < 2 * best for v in confirmation["values"].values()), confirmation
