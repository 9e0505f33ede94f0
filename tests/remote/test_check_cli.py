"""`tune check` and `tune check --cycle` against sshd + systemd stand-in + the simulator."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
from fixtures_sshd import SimUnit

from tuner.cli._remote import cmd_check, cmd_restore, run_check
from tuner.config import load_config


def _study(unit: SimUnit, tmp_path: Path, *, command: tuple[str, ...] | None = None) -> Path:
    text = f"""
[study]
name = "remote-check"
storage = "sqlite:///{tmp_path / 'study.db'}"

[target]
transport = "ssh"
manager = "systemd"
base_url = "{unit.base_url}"
command = {json.dumps(list(command or unit.argv))}
env = {{ SGLANG_DDTREE_MAX_TOPK = "6" }}
{unit.server.ssh_table()}
[target.systemd]
unit = "{unit.name}"
unit_dir = "{unit.path.parent}"

[target.gpu_wait]
below_mib = 2048
timeout_s = 5
poll_interval_s = 0.1

[readiness]
timeout_s = 30
poll_interval_s = 0.1

[space.budget]
type = "int"
low = 2
high = 32
flag = "--speculative-ddtree-budget"

[space.topk]
type = "int"
low = 1
high = 10
env = "SGLANG_DDTREE_MAX_TOPK"

[benchmark]
[[benchmark.scenarios]]
name = "c1"
concurrency = 1
prompt_tokens = 64
output_tokens = 8
requests = 1
"""
    path = tmp_path / "remote.toml"
    path.write_text(text)
    return path


def test_check_passes_and_cycle_restores(
    sim_unit: SimUnit, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config_path = _study(sim_unit, tmp_path)
    lines: list[str] = []
    assert run_check(load_config(config_path), out=lines.append) == 0, "\n".join(lines)
    text = "\n".join(lines)
    assert "host key SHA256:" in text and "ExecStart matches" in text
    assert "flags of the command and the space are in --help" in text
    before = sim_unit.path.read_bytes()
    assert cmd_check(argparse.Namespace(config=config_path, cycle=True)) == 0
    out = capsys.readouterr().out
    assert "tiny benchmark:" in out and "tok/s" in out
    assert cmd_restore(argparse.Namespace(config=config_path)) == 0
    assert sim_unit.path.read_bytes() == before


def test_check_fails_on_mismatch_and_unknown_flag(sim_unit: SimUnit, tmp_path: Path) -> None:
    wrong = (*sim_unit.argv, "--speculative-ddtree-topk-cap", "4")  # the seed's invented flag
    config_path = _study(sim_unit, tmp_path, command=wrong)
    text = config_path.read_text()
    text = text.replace('flag = "--speculative-ddtree-budget"', 'flag = "--speculative-ddtree-topk-cap"')
    config_path.write_text(text.replace("low = 2\nhigh = 32", "low = 1\nhigh = 32"))
    lines: list[str] = []
    failed = run_check(load_config(config_path), out=lines.append)
    out = "\n".join(lines)
    assert failed >= 2, out
    assert "ExecStart differs" in out
    assert "--speculative-ddtree-topk-cap" in out


def test_check_never_shows_a_secret(sim_unit: SimUnit, tmp_path: Path) -> None:
    # The study's command and environment carry secrets the unit does not: the findings say that they differ,
    # never the values.
    config_path = _study(sim_unit, tmp_path, command=(*sim_unit.argv, "--api-key", "sk-check-secret-1234"))
    text = config_path.read_text().replace(
        'env = { SGLANG_DDTREE_MAX_TOPK = "6" }', 'env = { SGLANG_DDTREE_MAX_TOPK = "6", HF_TOKEN = "hf_check_9876" }'
    )
    config_path.write_text(text)
    lines: list[str] = []
    run_check(load_config(config_path), out=lines.append)
    out = "\n".join(lines)
    assert "ExecStart differs" in out and "--api-key ***" in out, out
    assert "unit Environment HF_TOKEN differs from target.env's" in out, out
    assert "sk-check-secret-1234" not in out and "hf_check_9876" not in out
