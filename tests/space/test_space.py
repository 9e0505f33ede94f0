from __future__ import annotations

from pathlib import Path

import optuna
import pytest

from tuner.config import base_spec, load_config
from tuner.space import baseline_params, render, suggest
from tuner.spec import LaunchSpec

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cfg():  # type: ignore[no-untyped-def]
    return load_config(ROOT / "studies" / "demo.toml")


def flag_value(argv: tuple[str, ...], flag: str) -> str | None:
    values = [argv[i + 1] for i, a in enumerate(argv) if a == flag]
    assert len(values) <= 1, f"{flag} appears {len(values)} times"
    return values[0] if values else None


def test_render_replaces_flags_and_env(cfg) -> None:  # type: ignore[no-untyped-def]
    base = base_spec(cfg.target)
    params = dict(cfg.baseline, budget=20, topk=3, block_size=12, draft_window=4096, mem_fraction_static=0.8)
    spec = render(cfg.space, base, params)
    assert flag_value(spec.argv, "--speculative-ddtree-budget") == "20"
    assert flag_value(spec.argv, "--speculative-dflash-block-size") == "12"
    assert flag_value(spec.argv, "--speculative-draft-window-size") == "4096"
    assert flag_value(spec.argv, "--mem-fraction-static") == "0.8"
    assert spec.env["SGLANG_DDTREE_MAX_TOPK"] == "3"
    # untouched flags keep their place and value
    assert flag_value(spec.argv, "--tp-size") == "8"
    assert "--trust-remote-code" in spec.argv


def test_absent_choice_removes_the_flag(cfg) -> None:  # type: ignore[no-untyped-def]
    spec = render(cfg.space, base_spec(cfg.target), dict(cfg.baseline, draft_window="none"))
    assert "--speculative-draft-window-size" not in spec.argv
    assert len(spec.argv) == len(base_spec(cfg.target).argv) - 2


def test_inactive_params_are_dropped(cfg) -> None:  # type: ignore[no-untyped-def]
    params = {k: v for k, v in cfg.baseline.items() if k not in ("budget", "topk")}
    params["algorithm"] = "DFLASH"
    spec = render(cfg.space, base_spec(cfg.target), params)
    assert flag_value(spec.argv, "--speculative-algorithm") == "DFLASH"
    assert "--speculative-ddtree-budget" not in spec.argv
    assert "SGLANG_DDTREE_MAX_TOPK" not in spec.env


def test_aliases_and_equals_form_are_replaced(cfg) -> None:  # type: ignore[no-untyped-def]
    base = LaunchSpec(
        argv=("srv", "--speculative-num-draft-tokens", "16", "--speculative-ddtree-budget=9", "--port", "1"),
        env={},
    )
    spec = render(cfg.space, base, dict(cfg.baseline, block_size=4))
    assert "--speculative-num-draft-tokens" not in spec.argv
    assert "--speculative-ddtree-budget=9" not in spec.argv
    assert flag_value(spec.argv, "--speculative-dflash-block-size") == "4"
    assert flag_value(spec.argv, "--port") == "1"


def test_metacharacters_stay_one_argument(cfg) -> None:  # type: ignore[no-untyped-def]
    from dataclasses import replace

    algo = replace(cfg.space.by_name("algorithm"), choices=("DDTREE", "a;rm -rf / $(id) 'x'"))
    space = replace(cfg.space, params=(algo, *cfg.space.params[1:]))
    spec = render(space, base_spec(cfg.target), dict(cfg.baseline, algorithm="a;rm -rf / $(id) 'x'"))
    assert flag_value(spec.argv, "--speculative-algorithm") == "a;rm -rf / $(id) 'x'"


def test_baseline_params_read_back_the_base_command(cfg) -> None:  # type: ignore[no-untyped-def]
    base = base_spec(cfg.target)
    assert baseline_params(cfg.space, base) == cfg.baseline
    again = render(cfg.space, base, cfg.baseline)
    assert sorted(again.argv) == sorted(base.argv)
    assert again.env == base.env


def test_constraints_are_declarative_and_skip_absent_values(cfg) -> None:  # type: ignore[no-untyped-def]
    ok = dict(cfg.baseline, block_size=16, draft_window=2048)
    bad = dict(cfg.baseline, block_size=16, draft_window="none")
    assert cfg.space.violations(ok) == []
    assert cfg.space.violations(bad) == []  # no window: nothing to compare
    small = dict(cfg.baseline, block_size=16)
    small["draft_window"] = 512
    assert cfg.space.violations(small) == []  # 512 >= 16
    tiny = dict(cfg.baseline, block_size=16)
    tiny["draft_window"] = 4  # outside the choices, but the comparison itself must be declarative
    assert [str(c) for c in cfg.space.violations(tiny)] == ["draft_window >= block_size"]


def test_suggest_respects_conditions(cfg) -> None:  # type: ignore[no-untyped-def]
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=1))
    seen = set()
    for _ in range(40):
        trial = study.ask()
        params = suggest(trial, cfg.space)
        seen.add(params["algorithm"])
        if params["algorithm"] == "DFLASH":
            assert "budget" not in params and "topk" not in params
        else:
            assert 2 <= params["budget"] <= 32 and 1 <= params["topk"] <= 10
        study.tell(trial, 0.0)
    assert seen == {"DDTREE", "DFLASH"}
