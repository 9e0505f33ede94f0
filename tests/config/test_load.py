from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest

from tuner.config import load_config
from tuner.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
DEMO = (ROOT / "studies" / "demo.toml").read_text()


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "study.toml"
    p.write_text(text)
    return p


def test_demo_loads_into_typed_sections() -> None:
    cfg = load_config(ROOT / "studies" / "demo.toml")
    assert cfg.study.name == "demo"
    assert cfg.study.storage.startswith("sqlite:///")
    assert [p.name for p in cfg.space.params][:3] == ["algorithm", "budget", "topk"]
    assert cfg.space.by_name("topk").env == "SGLANG_DDTREE_MAX_TOPK"
    assert cfg.benchmark.scenarios[0].name == "c1-short"
    assert cfg.baseline["budget"] == 12 and cfg.baseline["topk"] == 6 and cfg.baseline["draft_window"] == 2048
    assert cfg.readiness.verify_settle_s == 3.0


@pytest.mark.parametrize(
    ("old", "new", "key", "expected"),
    [
        ("concurrency = 8", "concurency = 8", "benchmark.scenarios[1].concurency", "a known key"),
        ("concurrency = 8", 'concurrency = "8"', "benchmark.scenarios[1].concurrency", "an integer"),
        ("low = 2\n", "low = 40\n", "space.budget.high", "a value >= low (40)"),
        ('on_exit = "stop"', 'on_exit = "reboot"', "study.on_exit", "one of 'baseline'"),
        ('op = ">="', 'op = "=>"', "constraints[0].op", "one of '>='"),
        ('right = "block_size"', 'right = "blok_size"', "constraints[0].right", "a parameter name"),
        (
            'when = { algorithm = "DDTREE" }\n\n[space.topk]',
            'when = { algorithm = "EAGLE" }\n\n[space.topk]',
            "space.budget.when.algorithm",
            "values that algorithm can take",
        ),
        (
            'base_url = "http://127.0.0.1:30123"',
            'base_url = "127.0.0.1:30123"',
            "target.base_url",
            "an http://",
        ),
        ('absent = "none"', 'absent = "off"', "space.draft_window.absent", "one of this categorical"),
        ("[readiness]\n", "[readiness]\nverify_settle_s = -1\n", "readiness.verify_settle_s", "a value >= 0"),
        (
            '"--speculative-ddtree-budget", "12",',
            '"--speculative-ddtree-budget", "99",',
            "space.budget",
            "the search space to contain the base command's value",
        ),
        ("[search]\n", '[search]\nimport_best_from = "night-1"\n', "search.import_best_from", "`warm_start`"),
        ("[search]\n", '[search]\nwarm_start_storage = "sqlite:///n.db"\n', "search.warm_start_storage", "warm_start"),
        ("[search]\n", '[search]\nwarm_start = "n"\nwarm_start_top = -1\n', "search.warm_start_top", "a value >= 0"),
    ],
)
def test_errors_name_file_key_and_expectation(tmp_path: Path, old: str, new: str, key: str, expected: str) -> None:
    assert old in DEMO, old
    path = write(tmp_path, DEMO.replace(old, new, 1))
    with pytest.raises(ConfigError) as info:
        load_config(path)
    message = str(info.value)
    assert str(path) in message
    assert info.value.key == key
    assert expected in message


def test_toml_syntax_error_names_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, DEMO + "\n[study\n")
    with pytest.raises(ConfigError, match="valid TOML") as info:
        load_config(path)
    assert str(path) in str(info.value)


def test_missing_section_and_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"target: expected a value \(this key is required\)"):
        load_config(write(tmp_path, "[study]\nname = 'x'\n"))
    with pytest.raises(ConfigError, match="readable TOML file"):
        load_config(tmp_path / "nope.toml")


def test_command_as_string_is_split_like_a_shell(tmp_path: Path) -> None:
    text = DEMO.replace("[target]\n", "[target]\n", 1)
    start = text.index("command = [")
    end = text.index("]\n", start) + 2
    text = (
        text[:start]
        + (
            'command = "python -m tuner.sim --port 30123 --speculative-algorithm DDTREE '
            "--speculative-dflash-block-size 8 --speculative-ddtree-budget 12 "
            "--speculative-dflash-draft-window-size 2048 --max-running-requests 64 --mem-fraction-static 0.85 "
            "--model-path '/models/with space'\"\n"
        )
        + text[end:]
    )
    cfg = load_config(write(tmp_path, text))
    assert cfg.target.command[-2:] == ("--model-path", "/models/with space")


def test_fingerprint_changes_with_the_space_not_with_study_settings(tmp_path: Path) -> None:
    a = load_config(write(tmp_path, DEMO))
    b = load_config(write(tmp_path, DEMO.replace("trials = 30", "trials = 50")))
    c = load_config(write(tmp_path, DEMO.replace("high = 32", "high = 30")))
    assert a.fingerprint() == b.fingerprint()
    assert a.fingerprint() != c.fingerprint()


def with_repeats(keys: str, *, warmup: str = "warmup_requests = 1\n") -> str:
    """The demo study with its [benchmark] keys (everything before the scenarios) replaced by ``warmup + keys``."""
    head, rest = DEMO.split("[benchmark]\n", 1)
    return head + "[benchmark]\n" + warmup + keys + "\n\n[[benchmark.scenarios]]" + rest.split(
        "[[benchmark.scenarios]]", 1
    )[1]


def test_warmup_modes(tmp_path: Path) -> None:
    assert load_config(ROOT / "studies" / "demo.toml").benchmark.warmup == "auto"
    auto = load_config(write(tmp_path, with_repeats('warmup = "auto"', warmup=""))).benchmark
    assert auto.warmup == "auto"
    always = load_config(write(tmp_path, with_repeats("", warmup="warmup_requests = 3\n"))).benchmark
    assert (always.warmup, always.warmup_requests) == ("always", 3)


@pytest.mark.parametrize(
    ("keys", "key", "expected"),
    [
        ('warmup = "auto"\nwarmup_requests = 0', "benchmark.warmup_requests", 'at least 1 with warmup = "auto"'),
        ('warmup = "sometimes"', "benchmark.warmup", "one of 'always', 'auto'"),
    ],
)
def test_bad_warmup_settings_name_key_and_expectation(tmp_path: Path, keys: str, key: str, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, with_repeats(keys, warmup="")))
    assert info.value.key == key and expected in str(info.value)


def test_sequential_repeats_keys_and_the_fixed_repeats_alias(tmp_path: Path) -> None:
    seq = with_repeats("min_repeats = 3\nmax_repeats = 5\nprecision = 0.03")
    b = load_config(write(tmp_path, seq)).benchmark
    assert (b.min_repeats, b.max_repeats, b.precision, b.repeats) == (3, 5, 0.03, None)
    # Old study files: `repeats = N` is fixed repeats (min = max = N), and `mad_k` still loads (deprecated).
    old = load_config(write(tmp_path, with_repeats("repeats = 4\nmad_k = 1.0"))).benchmark
    assert (old.min_repeats, old.max_repeats, old.mad_k) == (4, 4, 1.0)
    defaults = load_config(write(tmp_path, with_repeats(""))).benchmark
    assert (defaults.min_repeats, defaults.max_repeats, defaults.precision, defaults.confidence) == (1, 6, 0.02, 0.8)


@pytest.mark.parametrize(
    ("new", "key", "expected"),
    [
        ("repeats = 2\nmax_repeats = 4", "benchmark.max_repeats", "either `repeats` (fixed) or min_repeats"),
        ("min_repeats = 4\nmax_repeats = 3", "benchmark.max_repeats", "an integer >= min_repeats (4)"),
        ("min_repeats = 0", "benchmark.min_repeats", ">= 1"),
        ("precision = 0.0", "benchmark.precision", "a relative half-width in (0, 1)"),
        ("precision = 2", "benchmark.precision", "a relative half-width in (0, 1)"),
        ("confidence = 1.0", "benchmark.confidence", "a probability in (0, 1)"),
    ],
)
def test_bad_repeat_settings_name_key_and_expectation(tmp_path: Path, new: str, key: str, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, with_repeats(new)))
    assert info.value.key == key and expected in str(info.value)


def test_each_scenario_gets_its_share_of_the_objectives_precision() -> None:
    cfg = load_config(ROOT / "studies" / "demo.toml")
    b = cfg.benchmark
    weights = b.objective_weights()
    assert weights == {"c1-short": 0.5, "c8-short": 0.25, "c32-long": 0.25}
    assert b.scenario_precision == pytest.approx(b.precision / math.sqrt(0.375))
    # Derived, not stored: a changed precision changes every scenario's (bench_search's sequential:P relies on it).
    assert replace(b, precision=0.01).scenario_precision == pytest.approx(0.01 / math.sqrt(0.375))
