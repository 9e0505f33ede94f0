"""Open-loop scenarios in a study file: ``rate`` with its arrivals, ``max_concurrency``, ``trace`` replays."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict
from pathlib import Path

import pytest

from tuner.config import load_config, load_trace
from tuner.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
DEMO = (ROOT / "studies" / "demo.toml").read_text()
C32 = 'name = "c32-long"\nconcurrency = 32\nprompt_tokens = 1024\noutput_tokens = 16\nrequests = 32\n'


def study(tmp_path: Path, scenario: str) -> Path:
    assert C32 in DEMO
    path = tmp_path / "study.toml"
    path.write_text(DEMO.replace(C32, scenario, 1))
    return path


def test_rate_scenario_is_open_loop_with_its_arrivals(tmp_path: Path) -> None:
    text = 'name = "chat-6rps"\nrate = 6.0\narrival = "gamma"\nburstiness = 0.5\nmax_concurrency = 16\n'
    text += "prompt_tokens = 256\noutput_tokens = 64\nrequests = 60\n"
    sc = load_config(study(tmp_path, text)).benchmark.scenarios[2]
    assert sc.open_loop and sc.rate == 6.0 and sc.arrival == "gamma" and sc.burstiness == 0.5
    assert sc.max_concurrency == 16 and sc.concurrency == 16  # the cap is what may be in flight
    assert sc.cost > 50 * 60 / 6.0  # lasts its schedule: about requests / rate seconds


def test_uncapped_rate_scenario_may_have_every_request_in_flight(tmp_path: Path) -> None:
    text = 'name = "r"\nrate = 2\nprompt_tokens = 8\noutput_tokens = 8\nrequests = 10\n'
    sc = load_config(study(tmp_path, text)).benchmark.scenarios[2]
    assert sc.arrival == "poisson" and sc.max_concurrency is None and sc.concurrency == 10


def test_trace_scenario_takes_its_lengths_and_count_from_the_file(tmp_path: Path) -> None:
    (tmp_path / "t.jsonl").write_text(
        '{"timestamp": 10.5, "input_length": 100, "output_length": 20}\n'
        '{"timestamp": 10.0, "messages": [{"role": "user", "content": "hi"}]}\n\n'
        '{"timestamp": 12.0, "input_length": 300, "output_length": 40}\n'
    )
    sc = load_config(study(tmp_path, 'name = "t"\ntrace = "t.jsonl"\ntrace_speed = 2\noutput_tokens = 30\n'))
    s = sc.benchmark.scenarios[2]
    assert s.trace == str((tmp_path / "t.jsonl").resolve()) and s.requests == 3 and s.trace_speed == 2.0
    assert s.prompt_tokens == 200 and s.output_tokens == 30
    lines = load_trace(s.trace)
    assert [x.offset_s for x in lines] == [0.0, 0.5, 2.0]  # sorted, from the first arrival
    assert lines[0].messages == (("user", "hi"),) and lines[0].output_length is None


def test_closed_loop_fingerprint_is_the_one_before_open_loop_existed() -> None:
    """A study file written before open loop existed resumes its study: its scenarios hash as they did."""
    cfg = load_config(ROOT / "studies" / "demo.toml")
    old_keys = ("name", "concurrency", "prompt_tokens", "output_tokens", "requests", "weight", "prompts")
    material = {
        "space": [asdict(p) for p in cfg.space.params],
        "constraints": [asdict(c) for c in cfg.space.constraints],
        "objective": asdict(cfg.objective),
        "scenarios": [{k: asdict(s)[k] for k in old_keys} for s in cfg.benchmark.scenarios],
        "score": ["t-lower-bound", cfg.benchmark.confidence],
        "gate": asdict(cfg.gate) if cfg.gate else None,
    }
    blob = json.dumps(material, sort_keys=True, default=str).encode()
    assert cfg.fingerprint() == hashlib.sha256(blob).hexdigest()[:16]


KEY = "benchmark.scenarios[2]"


@pytest.mark.parametrize(
    ("scenario", "key", "expected"),
    [
        ('name = "x"\nconcurrency = 2\nrate = 3\n', f"{KEY}.rate", "exactly one of"),
        ('name = "x"\nrate = 0\nprompt_tokens = 8\noutput_tokens = 8\nrequests = 4\n', f"{KEY}.rate", "> 0"),
        (
            'name = "x"\nrate = 1\nburstiness = 2\nprompt_tokens = 8\noutput_tokens = 8\nrequests = 4\n',
            f"{KEY}.burstiness",
            'arrival = "gamma"',
        ),
        (
            'name = "x"\nrate = 1\narrival = "uniform"\nprompt_tokens = 8\noutput_tokens = 8\nrequests = 4\n',
            f"{KEY}.arrival",
            "one of 'poisson'",
        ),
        (
            'name = "x"\nconcurrency = 2\nmax_concurrency = 4\nprompt_tokens = 8\noutput_tokens = 8\nrequests = 4\n',
            f"{KEY}.max_concurrency",
            "no open-loop key",
        ),
        ('name = "x"\ntrace = "t.csv"\n', f"{KEY}.trace", ".jsonl"),
        ('name = "x"\ntrace = "t.jsonl"\nrequests = 9\n', f"{KEY}.requests", "a value <= 2"),
        ('name = "x"\ntrace = "t.jsonl"\n', f"{KEY}.output_tokens", "some trace lines have no output_length"),
        ('name = "x"\ntrace = "t.jsonl"\narrival = "gamma"\noutput_tokens = 4\n', f"{KEY}.arrival", "with a trace"),
    ],
)
def test_open_loop_errors_name_file_key_and_expectation(tmp_path: Path, scenario: str, key: str, expected: str) -> None:
    (tmp_path / "t.jsonl").write_text('{"timestamp": 0, "input_length": 4}\n{"timestamp": 1, "input_length": 4}\n')
    path = study(tmp_path, scenario)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert info.value.key == key and expected in info.value.expected, str(info.value)
    assert str(path) in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("line", "key", "expected"),
    [
        ('{"input_length": 4}', "line 2: timestamp", "seconds >= 0"),
        ('{"timestamp": 1}', "line 2", 'either "input_length" or "messages"'),
        ('{"timestamp": 1, "input_length": 0}', "line 2: input_length", ">= 1"),
        ('{"timestamp": 1, "messages": "hi"}', "line 2: messages", "turns"),
        ("not json", "line 2", "a JSON object per line"),
    ],
)
def test_a_bad_trace_line_names_the_file_and_line(tmp_path: Path, line: str, key: str, expected: str) -> None:
    """One line: the study file and the scenario's key, then the trace file, its line and what was wrong there."""
    trace = tmp_path / f"bad-{abs(hash(line))}.jsonl"
    trace.write_text('{"timestamp": 0, "input_length": 4}\n' + line + "\n")
    path = study(tmp_path, f'name = "x"\ntrace = "{trace.name}"\noutput_tokens = 4\n')
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert info.value.file == str(path) and info.value.key.endswith("].trace"), str(info.value)
    assert f"for scenario x ({trace.name} {key}: " in info.value.expected and expected in info.value.expected
    assert "(file)" not in str(info.value) and "\n" not in str(info.value)


def test_a_scenario_says_how_its_requests_come(tmp_path: Path) -> None:
    text = 'name = "r"\nrate = 6\nmax_concurrency = 16\nprompt_tokens = 8\noutput_tokens = 8\nrequests = 10\n'
    assert load_config(study(tmp_path, text)).benchmark.scenarios[2].load == "6 req/s poisson (max 16)"
    assert load_config(ROOT / "studies" / "demo.toml").benchmark.scenarios[2].load == "32"
