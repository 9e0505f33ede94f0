"""The contract against SGLang's own code: every SGLang study file's launches parse with its version's flags.

Each shipped study file that runs SGLang names the version it targets (``[target] server_version``); its
baseline and the trials a start would sample (``tune start --dry-run``'s machinery) must parse with that
version's flag table, which scripts/sglang_flags.py read from the released wheel. The same launches are also
fed to a plain argparse parser rebuilt from the table's JSON, as an independent check of the rule.
"""

from __future__ import annotations

import argparse
import json
import shlex
from pathlib import Path

import pytest

from tuner.cli import main
from tuner.config import StudyConfig, load_config
from tuner.dialects import FlagTable, SGLangDialect
from tuner.dialects._flagtable import server_argv
from tuner.study import planned_launches

STUDIES = sorted((Path(__file__).resolve().parents[2] / "studies").glob("*.toml"))
SAMPLED = 20


def _sglang_studies() -> list[Path]:
    return [p for p in STUDIES if isinstance(load_config(p).dialect, SGLangDialect)]


def _table(config: StudyConfig) -> FlagTable:
    dialect = config.dialect
    assert isinstance(dialect, SGLangDialect)
    assert dialect.version is not None, f"{config.source}: set [target] server_version (the version it targets)"
    assert dialect.version.flags is not None and dialect.version.exact, f"{config.source}: no flag table of its own"
    return dialect.version.flags


def _plain_parser(table: FlagTable) -> argparse.ArgumentParser:
    """argparse straight from the table's JSON: SGLang's registrations, nothing of FlagTable's."""
    parser = argparse.ArgumentParser(prog="independent", add_help=True, exit_on_error=False)
    for o in table.data["options"]:
        if o["nargs"] == 0:
            parser.add_argument(*o["flags"], dest=o["dest"], action="store_true")
        else:
            choices = o["choices"] if o["type"] == "str" else None
            parser.add_argument(*o["flags"], dest=o["dest"], nargs=o["nargs"], choices=choices)
    return parser


def _independently_parses(table: FlagTable, argv: list[str], own_prefix: str | None) -> list[str]:
    _, extras = _plain_parser(table).parse_known_args(list(server_argv(argv)))
    wrapper = own_prefix is not None and any(e.startswith(own_prefix) for e in extras)
    return [e for e in extras if not (wrapper and (e.startswith(own_prefix or "") or not e.startswith("-")))]


def test_the_sglang_studies_are_there() -> None:
    names = {p.name for p in _sglang_studies()}
    assert {"dflash.toml", "kimi-k26-ddtree.toml", "demo.toml"} <= names


@pytest.mark.parametrize("path", _sglang_studies(), ids=lambda p: p.name)
def test_baseline_and_sampled_trials_parse_with_the_targeted_version(path: Path) -> None:
    config = load_config(path)
    table = _table(config)
    dialect = config.dialect
    assert isinstance(dialect, SGLangDialect)
    prefix = dialect.own_flag_prefix(config.target.command)
    launches = planned_launches(config, SAMPLED)
    assert launches[0].label == "baseline" and len(launches) == SAMPLED + 1
    for launch in launches:
        argv = list(launch.spec.argv)
        assert table.parse_errors(argv, ignore_prefix=prefix) == [], (path.name, launch.number, launch.params)
        assert _independently_parses(table, argv, prefix) == [], (path.name, launch.number)


def test_dry_run_prints_commands_that_parse_with_0_5_23(capsys: pytest.CaptureFixture[str]) -> None:
    """The acceptance: `tune start --dry-run 20 --config studies/dflash.toml`, each printed line re-parsed."""
    path = next(p for p in STUDIES if p.name == "dflash.toml")
    assert main(["start", "--dry-run", str(SAMPLED), "--config", str(path)]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line and not line.startswith("#")]
    assert len(lines) == SAMPLED + 1
    table = _table(load_config(path))
    assert table.name == "0.5.23"
    for line in lines:
        argv = shlex.split(line)
        assert argv[0] != "env"  # DFLASH on mainline: no DDTree environment
        assert table.parse_errors(argv) == [], line
        assert _independently_parses(table, argv, None) == [], line


def test_the_seed_flag_would_not_parse_on_mainline() -> None:
    """The check can fail: the seed's window spelling, in the same commands, is refused by 0.5.23's table."""
    path = next(p for p in STUDIES if p.name == "dflash.toml")
    config = load_config(path)
    table = _table(config)
    launch = planned_launches(config, 1)[0]
    old = [a.replace("--speculative-draft-window-size", "--speculative-dflash-draft-window-size")
           for a in launch.spec.argv]
    assert table.parse_errors(old) == ["unrecognized arguments: --speculative-dflash-draft-window-size 2048"]
    assert _independently_parses(table, old, None) == ["--speculative-dflash-draft-window-size", "2048"]


def test_dry_run_contacts_nothing_and_stores_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A study file for an unreachable GPU box: the plan is printed, no host is asked, no storage appears."""
    text = (next(p for p in STUDIES if p.name == "kimi-k26-ddtree.toml")).read_text()
    storage = tmp_path / "never.db"
    text = text.replace('[study]\n', f'[study]\nstorage = "sqlite:///{storage}"\n', 1)
    path = tmp_path / "box.toml"
    path.write_text(text)
    assert main(["start", "--dry-run", "3", "--config", str(path)]) == 0
    out = capsys.readouterr().out
    assert "root@gpu-box.example" in out and "env SGLANG_DDTREE_MAX_TOPK=6 " in out
    assert not storage.exists() and not (tmp_path / "runs").exists()
    assert json.dumps(out)  # printable as is
