"""``[gate] when = "contenders"``: only a config that could be recommended pays for the correctness gate."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import optuna
from optuna.trial import TrialState

from tuner.sim.inprocess import run_inprocess
from tuner.trials import Outcome, best_trials, candidates, recommended, record_of

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fixtures_demo import MakeConfig, gate_when, make_config, seeds

__all__ = ["make_config"]

# Within 1-3% of the baseline on one and eight streams, so no scenario before the last prunes it, but 25% slower
# on c32-long (a wide tree on a narrow batch): the objective ends about 8% behind the baseline.
BEHIND = {"algorithm": "DDTREE", "budget": 26, "topk": 5, "block_size": 12, "draft_window": 1024,
          "max_running_requests": 16, "mem_fraction_static": 0.89}  # fmt: skip


def _study(make_config: MakeConfig, *trials: dict[str, object], when: str) -> tuple[str, optuna.Study]:
    """Run the baseline and ``trials`` with the gate ``when``; the study file's path and the study."""
    cfg = make_config(
        search=seeds(*trials) + "\nconfirm_top = 0",
        edit=gate_when(when),
    )
    assert cfg.gate is not None and cfg.gate.when == when
    run = run_inprocess(cfg, storage=cfg.study.storage, trials=1 + len(trials))
    return cfg.source, optuna.load_study(study_name=run.study_name, storage=run.storage)


def test_a_config_behind_the_best_is_measured_but_not_gated(make_config: MakeConfig, capsys) -> None:  # type: ignore[no-untyped-def]
    from tuner.cli import main

    source, study = _study(make_config, BEHIND, when="contenders")
    baseline, behind = study.trials[:2]
    assert record_of(baseline).gate == "5/5" and record_of(baseline).feasible  # no best yet: a contender
    assert behind.params == BEHIND and behind.state == TrialState.COMPLETE, record_of(behind).failure_reason
    assert behind.values[0] < 0.95 * baseline.values[0]
    assert record_of(behind).gate_skipped is True and record_of(behind).gate_s is None
    assert record_of(behind).gate.startswith("not run: ") and "behind #0" in record_of(behind).gate
    assert record_of(behind).correct is None and not behind.constraints  # no verdict: nothing for TPE to avoid
    assert not record_of(behind).feasible  # an unchecked config is never recommended
    assert Outcome.of(behind) == "not gated (behind the best)"
    assert Outcome.text(behind).startswith("not gated: too far behind the best to need it (not run: ")
    assert [t.number for t in best_trials(study)] == [0]
    assert [t.number for t in candidates(study)[:3]] == [0]  # nor confirmed as a candidate
    capsys.readouterr()
    assert main(["status", "--config", source, "--wide"]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if re.match(r"[ ★]\s+1 ok ", line))
    assert " skip " in row and "not run: " in row and "behind #0" in row
    rec = recommended(study)
    assert rec is not None and rec.trial.number == 0


def test_after_gates_every_config_that_survives_the_benchmark(make_config: MakeConfig) -> None:
    _, study = _study(make_config, BEHIND, when="after")
    behind = study.trials[1]
    assert behind.params == BEHIND and record_of(behind).gate == "5/5" and record_of(behind).feasible
    assert record_of(behind).gate_skipped is False and Outcome.of(behind) == "feasible"
