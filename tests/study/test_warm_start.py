"""The warm start: another study's trials mapped onto this space, its top configs first, its results the
sampler's prior; never this study's trials (not counted, not recommended), and said in the status and report."""

from __future__ import annotations

import io
import math
import re
import sys
from collections.abc import Callable
from pathlib import Path

import optuna
import pytest
from fixtures_demo import DEMO, with_search
from optuna.trial import TrialState

from tuner.cli import main
from tuner.config import StudyConfig, load_config
from tuner.errors import ConfigError, TuneError
from tuner.report import build_report
from tuner.sim.inprocess import run_inprocess
from tuner.study import Console, NoSuchStudy, read_warm_start
from tuner.study._warm import map_config, prior_scale, warm_prior
from tuner.trials import counted_trials, is_counted, recommended, record_of, study_record

Make = Callable[..., StudyConfig]

#: A config of the demo space whose budget the narrowed space below does not hold.
WIDE = {"algorithm": "DDTREE", "budget": 24, "topk": 4, "block_size": 8, "draft_window": 2048,
        "max_running_requests": 48, "mem_fraction_static": 0.85}  # fmt: skip
GOOD = {"algorithm": "DFLASH", "block_size": 12, "draft_window": 2048, "max_running_requests": 48,
        "mem_fraction_static": 0.87}  # fmt: skip
#: The target's space: budget narrowed to 2..16, mem_fraction_static gone, decode_steps new.
NARROWER = """
[space.decode_steps]
type = "categorical"
choices = [1, 4, 8]
flag = "--num-continuous-decode-steps"
"""


@pytest.fixture
def demo(tmp_path: Path) -> Make:
    """The demo study file under another name, every study in one SQLite file."""
    storage = f"sqlite:///{tmp_path / 'studies.db'}"

    def make(name: str, *, search: str = "", narrower: bool = False) -> StudyConfig:
        # No confirmation at the end: what is tested here is where a study starts.
        text = with_search(DEMO.replace('name = "demo"', f'name = "{name}"'), f"confirm_top = 0\n{search}")
        text = text.replace("[study]\n", f'[study]\nstorage = "{storage}"\n', 1)
        if narrower:
            text = text.replace("low = 2\nhigh = 32\n", "low = 2\nhigh = 16\n", 1)
            text = re.sub(r"\[space\.mem_fraction_static\][^\[]*", NARROWER + "\n", text, count=1)
        path = tmp_path / f"{name}.toml"
        path.write_text(text)
        return load_config(path)

    return make


def test_another_study_s_params_are_mapped_onto_this_space(demo: Make) -> None:
    space_config = demo("target", narrower=True)
    space, baseline = space_config.space, space_config.baseline
    added: dict[str, object] = {}
    mapped = map_config(space, baseline, {**WIDE, "budget": 12, "gone": 3}, added=added)
    assert mapped == {k: v for k, v in WIDE.items() if k != "mem_fraction_static"} | {"budget": 12, "decode_steps": 8}
    assert added == {"decode_steps": 8}  # new here: the baseline's value (the base command's flag)
    assert map_config(space, baseline, WIDE, added={}) == "budget=24 is outside this space (2..16)"
    window = map_config(space, baseline, {**WIDE, "budget": 12, "draft_window": 8192}, added={})
    assert window == "draft_window=8192 is outside this space (one of none, 512, 1024, 2048, 4096)"
    # A DFLASH config has no budget or top-k: what the branch does not use is not needed.
    dflash = map_config(space, baseline, {"algorithm": "DFLASH", "block_size": 16}, added={})
    assert isinstance(dflash, dict) and "budget" not in dflash and dflash["draft_window"] == 2048


def test_a_warm_started_study_runs_the_other_s_top_first_and_never_counts_its_trials(
    demo: Make, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = demo("source", search=f"seed_trials = [{_toml(WIDE)}]")
    run_inprocess(source, storage=source.study.storage, trials=6, seed=1)
    target = demo("target", search='warm_start = "source"\nwarm_start_top = 2\nwarm_start_prior = true', narrower=True)
    console = io.StringIO()
    run = run_inprocess(
        target, storage=target.study.storage, trials=4, seed=2, console=Console(stream=console, live=False)
    )
    study = optuna.load_study(study_name=run.study_name, storage=run.storage)
    other = optuna.load_study(study_name="source", storage=run.storage)
    warm = study_record(study).warm_start
    assert warm is not None and warm.study == "source"

    # Mapped: WIDE's budget is out of this space; mem_fraction_static is gone; decode_steps is new.
    assert "#1: budget=24 is outside this space (2..16)" in warm.skipped
    assert warm.dropped == ("mem_fraction_static",) and warm.added == {"decode_steps": 8}
    skipped = {int(s.partition(":")[0].removeprefix("#")) for s in warm.skipped}
    assert {t.number for t in warm.trials} == {t.number for t in other.trials if is_counted(t)} - skipped
    # Its top configs (its recommendation first) run right after the baseline, as this study's own trials.
    assert record_of(study.trials[0]).is_baseline is True
    rec = recommended(other)
    assert rec is not None and warm.top[0].number == rec.trial.number
    firsts = study.trials[1 : 1 + len(warm.top)]
    assert [record_of(t).warm_origin for t in firsts] == [f"source#{t.number}" for t in warm.top]
    assert [t.params for t in firsts] == [t.params for t in warm.top]

    # Nothing carried over is a trial of this study: 4 counted, all measured here, one of them recommended.
    assert counted_trials(study) == 4 == run.counted
    assert all(t.number >= 0 and t.datetime_start is not None for t in study.trials)
    mine = recommended(study)
    assert mine is not None and study.trials[mine.trial.number].params == mine.trial.params

    line = warm.lines()[0]
    said = console.getvalue()  # what was carried over, then each of its configs named where it runs
    assert said.index(line) < said.index(f"] trial #1 (warm start source#{warm.top[0].number}): ")
    assert line.startswith(f"warm start from study source ({target.study.storage}): {len(warm.trials)} of its")
    assert "not counted here" in line and "its top 2 configs run first" in line
    report = build_report(study, target, tmp_path / "report", storage=run.storage)
    assert f"- Warm start from study source ({target.study.storage})" in report.path.read_text()
    assert main(["status", "--storage", run.storage, "--study", "target", "--wide"]) == 0
    out = capsys.readouterr().out
    assert line in out and "left out of the warm start, outside this space: #1: budget=24" in out
    assert f"warm start source#{warm.top[0].number}" in out
    _the_prior_is_the_other_study_on_this_study_s_scale(target, study)


def _the_prior_is_the_other_study_on_this_study_s_scale(target: StudyConfig, study: optuna.Study) -> None:
    warm = study_record(study).warm_start
    assert warm is not None
    # The pairs both studies measured: the baselines, and the warm start's top configs run here.
    theirs = {t.number: t for t in warm.trials}
    baseline = next(t for t in warm.trials if t.baseline)
    pairs = [(study.trials[0].values[0], baseline.values[0])]  # type: ignore[index]
    for t in study.trials[1 : 1 + len(warm.top)]:
        number = int(record_of(t).warm_origin.removeprefix("source#"))
        if t.state == TrialState.COMPLETE and theirs[number].values:
            pairs.append((t.values[0], theirs[number].values[0]))  # type: ignore[index]
    scale = math.exp(sum(math.log(a / b) for a, b in pairs) / len(pairs))
    assert prior_scale(study, warm) == [pytest.approx(scale)]
    prior = warm_prior(target)(study)
    assert len(prior) == len(warm.trials)
    for frozen, carried in zip(prior, warm.trials, strict=True):
        assert frozen.params == carried.params
        if carried.values is None:
            assert frozen.state == TrialState.PRUNED
        else:
            assert frozen.values == [pytest.approx(carried.values[0] * scale)]




def test_by_default_a_warm_start_runs_the_top_configs_and_the_sampler_sees_only_this_study(demo: Make) -> None:
    source = demo("source")
    run_inprocess(source, storage=source.study.storage, trials=5, seed=1)
    target = demo("target", search='warm_start = "source"')
    assert target.search.warm_start_prior is False
    run = run_inprocess(target, storage=target.study.storage, trials=4, seed=2)
    study = optuna.load_study(study_name=run.study_name, storage=run.storage)
    warm = study_record(study).warm_start
    assert warm is not None and warm.top and not warm.prior
    assert warm.text().startswith(f"warm start from study source ({target.study.storage}); its top ")
    assert "prior" not in warm.text()
    assert warm_prior(target)(study) == []  # shown nothing, though both baselines are measured
    assert [record_of(t).warm_origin for t in study.trials[1 : 1 + len(warm.top)]] == [
        f"source#{t.number}" for t in warm.top
    ]
    with pytest.raises(ConfigError, match=r"warm_start_top: expected >= 1, or warm_start_prior = true"):
        demo("none", search='warm_start = "source"\nwarm_start_top = 0')


def test_a_warm_start_from_nowhere_or_from_itself_is_one_clear_line(
    demo: Make, capsys: pytest.CaptureFixture[str]
) -> None:
    target = demo("target", search='warm_start = "nightone"')
    with pytest.raises(NoSuchStudy, match=r"^warm start from nightone: no study database at /\S+/studies.db \(name"):
        read_warm_start(target, storage=target.study.storage)
    run_inprocess(demo("other"), storage=target.study.storage, trials=1)
    with pytest.raises(NoSuchStudy, match=r"^warm start from nightone: no study 'nightone' in \S+; studies there: ot"):
        read_warm_start(target, storage=target.study.storage)
    run_inprocess(demo("nightone", search=f"seed_trials = [{_toml(GOOD)}]"), storage=target.study.storage, trials=2)
    itself = demo("nightone", search='warm_start = "nightone"')
    with pytest.raises(TuneError, match="cannot warm-start from itself"):
        read_warm_start(itself, storage=itself.study.storage)
    assert read_warm_start(target, storage=target.study.storage).study == "nightone"
    # The command line's way, shown by a dry run: the other study's best runs right after the baseline.
    cold = demo("cold")
    argv = ["start", "--config", cold.source, "--dry-run", "1", "--warm-start", "nightone"]
    assert main([*argv, "--warm-start-storage", target.study.storage]) == 0
    out = capsys.readouterr().out
    assert "# warm start from study nightone (sqlite:///" in out
    assert "# trial #1 (warm start nightone#1): algorithm=DFLASH block_size=12 " in out
    assert main(["start", "--config", cold.source, "--dry-run", "1", "--warm-start-storage", "sqlite:///x.db"]) == 2
    assert "--warm-start-storage: expected --warm-start STUDY to go with it" in capsys.readouterr().err


def _toml(params: dict[str, object]) -> str:
    return "{" + ", ".join(f"{k} = {v!r}".replace("'", '"') for k, v in params.items()) + "}"


def test_a_warm_start_that_cannot_be_read_leaves_no_study_behind(tmp_path: Path) -> None:
    """`tune start --warm-start NOSUCH`: refused in one line, and the new study it would have started is not
    left behind empty (a later start would otherwise find it 'started already' and skip the warm start)."""
    import subprocess

    from fixtures_study import study_toml

    from tuner.sim.testing import free_port

    path = tmp_path / "w.toml"
    path.write_text(study_toml(name="w", port=free_port(), gate=False))
    run = subprocess.run(
        [sys.executable, "-m", "tuner", "start", "--config", str(path), "--trials", "2", "--warm-start", "nosuch"],
        capture_output=True, text=True, timeout=180, cwd=tmp_path,
    )  # fmt: skip
    assert run.returncode in (1, 2, 3) and "Traceback" not in run.stderr, run.stderr
    assert "nosuch" in run.stderr.splitlines()[-1], run.stderr
    db = tmp_path / "runs" / "w" / "study.db"
    names = [s.study_name for s in optuna.get_all_study_summaries(f"sqlite:///{db}")] if db.exists() else []
    assert "w" not in names
