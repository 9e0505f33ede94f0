"""``[gate] when = "final"``: no trial pays for the gate while the study runs; the finalists are gated at the end,
and a finalist that fails gives its place to the next best."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import optuna
from optuna.trial import TrialState

from tuner.report._plots import plot_history
from tuner.sim.inprocess import run_inprocess
from tuner.trials import Outcome, best_trials, recommended, record_of, study_record, study_trials
from tuner.trials._confirmed import CONFIRMATION

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fixtures_demo import MakeConfig, gate_when, make_config, seeds

__all__ = ["make_config"]

# Both slower than the baseline (~279 tok/s), so pruning is off for them to complete. FAST_WRONG (~231 tok/s
# before its gate) is on the simulator's buggy kernel path (DDTREE top-k >= 9, budget >= 24: wrong code);
# SLOW_RIGHT (~200 tok/s) is correct and clearly slower than FAST_WRONG, beyond the model's 2% noise.
FAST_WRONG = {"algorithm": "DDTREE", "budget": 24, "topk": 9, "block_size": 12, "draft_window": 2048,
              "max_running_requests": 16, "mem_fraction_static": 0.85}  # fmt: skip
SLOW_RIGHT = {"algorithm": "DDTREE", "budget": 2, "topk": 8, "block_size": 16, "draft_window": 512,
              "max_running_requests": 16, "mem_fraction_static": 0.85}  # fmt: skip


def _study(make_config: MakeConfig, *trials: dict[str, object], confirm_top: int) -> tuple[Path, optuna.Study]:
    cfg = make_config(
        search=seeds(*trials) + f"\nconfirm_top = {confirm_top}\npruning = false",
        edit=gate_when("final"),
    )
    assert cfg.gate is not None and cfg.gate.when == "final"
    run = run_inprocess(cfg, storage=cfg.study.storage, trials=1 + len(trials))
    return cfg.source, optuna.load_study(study_name=run.study_name, storage=run.storage)


def test_a_finalist_that_fails_the_gate_hands_its_place_to_the_next_best(make_config: MakeConfig, capsys) -> None:  # type: ignore[no-untyped-def]
    from tuner.cli import main

    source, study = _study(make_config, FAST_WRONG, SLOW_RIGHT, confirm_top=2)
    frozen = study.trials[:3]  # as Optuna holds them (a DFLASH branch trial waits after them): none was gated
    assert [t.params for t in frozen[1:]] == [FAST_WRONG, SLOW_RIGHT]
    assert all(t.state == TrialState.COMPLETE for t in frozen), [record_of(t).failure_reason for t in frozen]
    assert all(record_of(t).gate_deferred is True and record_of(t).gate_s is None for t in frozen)
    assert not any(t.constraints for t in frozen)  # TPE saw every measured config as correct
    assert frozen[0].values[0] > frozen[1].values[0] > frozen[2].values[0]  # the finalists: #0 and #1

    verdicts = study_record(study).gate_verdicts
    assert sorted(verdicts) == [0, 1, 2]  # #1 failed, #2 took its place
    assert verdicts[0].correct and verdicts[2].correct and verdicts[0].passed == verdicts[0].total
    assert not verdicts[1].correct and verdicts[1].passed < 4 and verdicts[1].failures
    confirmation = study.user_attrs[CONFIRMATION]
    assert confirmation["trials"] == [0, 2] and confirmation["winner"] == 0

    base, wrong, right = study_trials(study)[:3]  # the verdicts applied
    assert record_of(wrong).correct is False and not record_of(wrong).feasible
    assert record_of(wrong).gate == f"{verdicts[1].passed}/5 at the end"
    assert Outcome.of(wrong) == Outcome.WRONG and Outcome.text(wrong).startswith("infeasible: wrong answers (gate ")
    assert record_of(base).feasible and record_of(right).feasible and Outcome.of(right) == "feasible"
    assert [t.number for t in best_trials(study)] == [0]
    rec = recommended(study)
    assert rec is not None and rec.trial.number == 0 and rec.confirmed and rec.gated

    # The history plot draws the end-gate failure as wrong, from the verdicts; the study itself is unchanged.
    from tuner.config import load_config

    png = plot_history(study, load_config(source), Path(source).parent / "history.png", recommended=rec)
    assert png.stat().st_size > 0
    assert not study.trials[1].constraints

    capsys.readouterr()
    assert main(["status", "--config", str(source), "--wide"]) == 0
    rows = capsys.readouterr().out.splitlines()
    row = next(line for line in rows if re.match(r"[ ★]\s+1 WRONG ", line))
    assert f" {verdicts[1].passed}/5 " in row and "infeasible: wrong answers" in row, row
    assert "gated at the end" in row


def test_without_a_confirmation_the_best_alone_is_gated(make_config: MakeConfig) -> None:
    _, study = _study(make_config, SLOW_RIGHT, confirm_top=0)
    assert sorted(study_record(study).gate_verdicts) == [0]  # the best; #1 never paid for the gate
    base, right = study_trials(study)[:2]
    assert record_of(base).gate == "5/5 at the end" and record_of(base).feasible
    # measured, presumed correct, never recommended first
    assert record_of(right).gate_pending and record_of(right).feasible
    # The study has ended: its end gate passed #1 over, so it is not gated "yet" any more, and never will be.
    assert Outcome.of(right) == Outcome.NOT_FINALIST
    assert Outcome.text(right) == "not gated: not a finalist"
    # the stored trial alone cannot tell: the study's verdicts do
    assert Outcome.of(study.trials[1]) == Outcome.NOT_GATED_YET
    assert CONFIRMATION not in study.user_attrs


def test_a_multi_objective_study_gates_its_pareto_front(make_config: MakeConfig) -> None:
    cfg = make_config(
        search=seeds(FAST_WRONG, SLOW_RIGHT) + "\npruning = false",
        edit=lambda text: gate_when("final")(text).replace(
            'kind = "geomean"', 'kind = "multi"\nobjectives = ["c1-short", "c32-long"]'
        ),
    )
    run = run_inprocess(cfg, storage=cfg.study.storage, trials=3)
    study = optuna.load_study(study_name=run.study_name, storage=run.storage)
    front = best_trials(study)
    verdicts = study_record(study).gate_verdicts
    assert front and all(t.number in verdicts and verdicts[t.number].correct for t in front)
    assert all(not record_of(t).gate_pending for t in front)
    # Whatever else was gated failed and left the front; what was never on it was never gated.
    assert all(not v.correct for n, v in verdicts.items() if n not in {t.number for t in front})
