"""Every shipped study file loads and validates (a typo in one would waste someone's night)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tuner.config import base_spec, load_config

STUDIES = sorted((Path(__file__).resolve().parents[2] / "studies").glob("*.toml"))


def test_there_are_studies() -> None:
    assert {p.name for p in STUDIES} >= {"demo.toml", "kimi-k26-ddtree.toml", "dflash.toml", "openai-generic-ssh.toml"}


@pytest.mark.parametrize("path", STUDIES, ids=lambda p: p.name)
def test_study_loads(path: Path) -> None:
    config = load_config(path)
    assert config.space.params
    assert base_spec(config.target).argv


def test_kimi_mirrors_the_seed_deployment() -> None:
    config = load_config(Path(__file__).resolve().parents[2] / "studies" / "kimi-k26-ddtree.toml")
    t = config.target
    assert (t.transport, t.manager) == ("ssh", "systemd")
    assert t.systemd is not None and t.systemd.unit == "sglang-k26-ddtree.service"
    assert t.ssh is not None and t.ssh.host == "gpu-box.example"
    assert t.gpu_wait is not None
    assert config.readiness.timeout_s == 900
    assert t.env == {"SGLANG_DDTREE_MAX_TOPK": "6"}
    assert "--speculative-ddtree-topk-cap" not in t.command  # the seed's invented flag
    assert config.baseline["budget"] == 12 and config.baseline["topk"] == 6
