"""`tune bench` against a running simulator: changes nothing, prints a table or JSON."""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import pytest

from tests.fixtures_rerun import ClientRerun
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


OPEN = """
[[benchmark.scenarios]]
name = "open-easy"
rate = 8.0
prompt_tokens = 64
output_tokens = 16
requests = 24

[benchmark.scenarios.slo]
ttft_s = 30.0
attainment = 0.5

[[benchmark.scenarios]]
name = "open-tight"
rate = 8.0
prompt_tokens = 64
output_tokens = 16
requests = 8

[benchmark.scenarios.slo]
ttft_s = 0.000001
attainment = 0.99
"""


def test_bench_says_the_load_the_interval_and_each_slo_verdict(
    ddtree_sim: SimProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _config(tmp_path, ddtree_sim)
    path.write_text(path.read_text() + OPEN)
    rc = _run(["--config", str(path), "--scenario", "c1-short", "--scenario", "open-easy", "--scenario", "open-tight"])
    lines = capsys.readouterr().out.splitlines()
    assert rc == 4  # open-tight misses its SLO: no answer (docs/faults.md), the table and lines printed all the same
    head = next(line for line in lines if line.startswith("scenario "))
    assert "80% CI" in head and "TPOT p50/p99 ms" in head  # the study's confidence, not a fixed 95%
    rows = {line.split()[0]: line for line in lines if line.split() and line.split()[0] in ("c1-short", "open-easy")}
    assert rows["c1-short"].split()[1] == "1" and "8 req/s poisson" in rows["open-easy"]
    verdicts = [line for line in lines if "the SLO in open-" in line]
    # Every repeat's requests, as the table counts them (its client cell gains " BOUND" on a loaded machine).
    measured = int(rows["open-easy"].removesuffix(" BOUND").split()[-3])
    # The verdict judges the steady ones: each pass's first requests, which met an idle server, left out.
    head = re.match(r"meets the SLO in open-easy: 100% of (\d+) requests within TTFT 30 s \(50%", verdicts[0])
    assert head is not None and 0 < int(head[1]) < measured, verdicts[0]
    assert verdicts[1].startswith("misses the SLO in open-tight: 0% of requests within TTFT"), verdicts
    assert "99% required; 99% of requests within " in verdicts[1] and len(verdicts) == 2


def test_bench_writes_every_measured_request(
    ddtree_sim: SimProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str], client_rerun: ClientRerun
) -> None:
    """``--requests``: one JSON line per measured request, from which the summary's own figures follow."""
    from tuner.stats import percentile

    path = _config(tmp_path, ddtree_sim)
    path.write_text(path.read_text() + OPEN)
    out = tmp_path / "requests.jsonl"
    rc = _run(["--config", str(path), "--scenario", "open-easy", "--scenario", "open-tight", "--json",
               "--requests", str(out)])  # fmt: skip
    doc = json.loads(capsys.readouterr().out)
    assert rc == 4  # open-tight misses its SLO (docs/faults.md); every request is still written
    client_rerun.check(doc["scenarios"][0]["client_reruns"])
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    for result in doc["scenarios"]:
        mine = [r for r in rows if r["scenario"] == result["name"]]
        counted = [r for r in mine if r["counted"]]
        # Every pass's requests, the ones run again marked; the counted ones are the summary's.
        size = 24 if result["name"] == "open-easy" else 8
        assert len(mine) == result["requests"] + size * result["client_reruns"] and len(counted) == result["requests"]
        assert {r["repeat"] for r in counted} == set(range(len(result["repeats_tok_s"])))
        # The percentiles and the verdict are the steady requests' (each pass's queue fill left out).
        steady = [r for r in counted if r["steady"]]
        assert len(steady) == result["slo_requests"] == result["requests"] - result["fill_requests"]
        assert result["e2e_p50_s"] == pytest.approx(percentile([r["e2e_s"] for r in steady], 50))
        assert result["ttft_p99_s"] == pytest.approx(percentile([r["ttft_s"] for r in steady], 99))
        met = sum(r["slo_met"] for r in steady)
        assert result["attainment"] == pytest.approx(met / len(steady))
        for r in counted:
            # Times from the pass's start: arrival, due, sent, first token, end, in that order; e2e from arrival.
            assert 0 <= r["scheduled_s"] <= r["due_s"] <= r["sent_s"] <= r["first_token_s"] <= r["end_s"]
            assert r["e2e_s"] == pytest.approx(r["end_s"] - r["scheduled_s"], abs=1e-5)
            assert r["output_tokens"] == 16 and r["error"] is None and r["pass_client_stall_s"] >= 0
        by_pass: dict[tuple[int, int], list[float]] = {}
        for r in mine:
            by_pass.setdefault((r["repeat"], r["attempt"]), []).append(r["scheduled_s"])
        assert all(times == sorted(times) for times in by_pass.values())  # in the order they arrived
    assert {r["slo_met"] for r in rows if r["scenario"] == "open-tight"} == {False}
    # When and how much, never what: no prompt, no generated text.
    assert set(rows[0]) == {
        "scenario", "repeat", "attempt", "counted", "index", "scheduled_s", "due_s", "sent_s", "first_token_s",
        "end_s", "ttft_s", "tpot_s", "e2e_s", "start_delay_s", "output_tokens", "prompt_tokens", "slo_met", "steady",
        "error", "pass_client_stall_s",
    }  # fmt: skip


def test_bench_requests_to_a_missing_directory_is_one_line(ddtree_sim: SimProcess, tmp_path: Path) -> None:
    from tuner.errors import ConfigError

    with pytest.raises(ConfigError, match=r"--requests: expected a file in an existing directory"):
        _run(["--config", str(_config(tmp_path, ddtree_sim)), "--requests", str(tmp_path / "no" / "r.jsonl")])
