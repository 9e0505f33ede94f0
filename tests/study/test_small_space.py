"""A small search space is a normal end, and an interrupted `when = "final"` study says what is left to verify."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import optuna
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fixtures_demo import MakeConfig, gate_when, make_config

from tuner.cli import main
from tuner.sim.inprocess import run_inprocess
from tuner.study import Console, Interrupted
from tuner.trials import counted_trials, recommended, study_record
from tuner.trials._confirmed import CONFIRMATION

__all__ = ["make_config"]

# block_size 4..16 step 4 x draft_window {none, 2048}: 8 configs, none breaking "window >= block size".
SMALL = """
[space.block_size]
type = "int"
low = 4
high = 16
step = 4
flag = "--speculative-dflash-block-size"
aliases = ["--speculative-num-draft-tokens"]

[space.draft_window]
type = "categorical"
choices = ["none", 2048]
absent = "none"
flag = "--speculative-dflash-draft-window-size"

"""


def _small(text: str) -> str:
    return re.sub(r"\[space\.algorithm\].*?(?=\[\[constraints\]\])", SMALL, text, count=1, flags=re.DOTALL)


class _Lines:
    """A console stream that keeps what the loop prints."""

    def __init__(self, *, stop_at: str | None = None) -> None:
        self.text = ""
        self.stop_at = stop_at

    def write(self, text: str) -> None:
        self.text += text
        if self.stop_at and self.stop_at in text:
            raise KeyboardInterrupt  # Ctrl-C as the line appears

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False


def test_a_space_smaller_than_the_trials_ends_normally_after_every_config(make_config: MakeConfig) -> None:
    cfg = make_config(edit=lambda text: gate_when("final")(_small(text)))
    assert cfg.study.trials == 30
    lines = _Lines()
    run = run_inprocess(cfg, storage=cfg.study.storage, console=Console(stream=lines, live=False))
    study = optuna.load_study(study_name=run.study_name, storage=run.storage)
    assert run.counted == counted_trials(study) == 8
    assert "the search space holds 8 configs: the study ends once all are measured" in lines.text
    assert "all 8 configs of the space were measured" in lines.text
    assert "exhausted" not in lines.text  # not the error of a sampler stuck on duplicates
    assert len({tuple(sorted(t.params.items())) for t in study.trials if t.params}) == 8
    assert isinstance(study.user_attrs.get(CONFIRMATION), dict)  # the end of the study ran: confirmation...
    rec = recommended(study)
    verdicts = study_record(study).gate_verdicts
    assert rec is not None and rec.confirmed and rec.gated and rec.trial.number in verdicts  # ...gate


def test_an_interrupted_final_study_says_its_recommendation_is_not_verified(
    make_config: MakeConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = make_config(name="cut", edit=gate_when("final"))
    with pytest.raises(Interrupted, match=r"Resume with: tune start --trials 6 --config "):
        # Ctrl-C just as the end-of-study confirmation (and with it the finalists' gate) begins.
        run_inprocess(cfg, storage=cfg.study.storage, trials=6,
                      console=Console(stream=_Lines(stop_at="confirming the top"), live=False))
    source = str(cfg.source)
    capsys.readouterr()
    assert main(["best", "--config", source]) == 0
    out = capsys.readouterr().out
    rec = recommended(optuna.load_study(study_name="cut", storage=cfg.study.storage))
    assert rec is not None and not rec.gated and not rec.confirmed
    assert f"recommended: trial #{rec.trial.number} (best by its own measurement)" in out
    verdict = next(line for line in out.splitlines() if line.startswith("NOT VERIFIED"))
    assert verdict == (
        f"NOT VERIFIED: the top {cfg.search.confirm_top} configs were not re-measured and its correctness gate has "
        f"not run (only finalists are gated, at the end of the study); finish with: tune finish --config {source}"
    )
    assert main(["apply", "--best", "--config", source]) == 1
    err = capsys.readouterr().err
    assert f"tune: error: trial #{rec.trial.number} has not passed the correctness gate yet" in err
    assert f"run `tune finish --config {source}` first, or apply it anyway with --unverified" in err

    # What `tune finish` runs (the loop with no trial left to run), here against the model: now it is verified.
    finished = run_inprocess(cfg, storage=cfg.study.storage, trials=0)
    study = optuna.load_study(study_name="cut", storage=cfg.study.storage)
    after = recommended(study)
    assert finished.counted == 6 and after is not None and after.confirmed and after.gated and after.missing() == []
    assert study.user_attrs["target_trials"] == 6  # finishing asked for no trial: the study's target stands
    capsys.readouterr()
    assert main(["best", "--config", source]) == 0
    assert "NOT VERIFIED" not in capsys.readouterr().out
