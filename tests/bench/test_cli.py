"""`tune bench` against a running simulator: changes nothing, prints a table or JSON."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from tuner.cli import _bench
from tuner.sim.testing import SimProcess

ROOT = Path(__file__).resolve().parents[2]


def _config(tmp_path: Path, sim: SimProcess) -> Path:
    text = (ROOT / "studies" / "demo.toml").read_text().replace("30123", str(sim.port))
    path = tmp_path / "study.toml"
    path.write_text(text)
    return path


def _run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="tune")
    _bench.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["bench", *argv])
    return int(args.func(args))


def test_bench_prints_a_table(ddtree_sim: SimProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = _run(["--config", str(_config(tmp_path, ddtree_sim)), "--scenario", "c1-short"])
    out = capsys.readouterr().out
    assert rc == 0
    assert "c1-short" in out and "out tok/s" in out and "TTFT" in out
    assert "client" in out and "c/1p" in out  # the load generator's own CPU, per scenario
    assert "c8-short" not in out


def test_bench_json(ddtree_sim: SimProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = _run(["--config", str(_config(tmp_path, ddtree_sim)), "--scenario", "c1-short", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 0 and doc["failure"] is None
    (row,) = doc["scenarios"]
    assert row["name"] == "c1-short" and row["output_tok_s"] > 0 and row["accept_length"] > 1


def test_bench_unknown_scenario(ddtree_sim: SimProcess, tmp_path: Path) -> None:
    from tuner.errors import ConfigError

    with pytest.raises(ConfigError, match="--scenario"):
        _run(["--config", str(_config(tmp_path, ddtree_sim)), "--scenario", "nope"])
