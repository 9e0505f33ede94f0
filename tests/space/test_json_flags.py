"""Space parameters that live inside a JSON-valued flag (vLLM's --speculative-config)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tuner.config import parse_config
from tuner.errors import ConfigError
from tuner.space import baseline_params, render
from tuner.spec import LaunchSpec

BASE = """
[target]
base_url = "http://127.0.0.1:8000"
command = ["vllm", "serve", "m", "--speculative-config", '{base_json}']

[space.k]
type = "int"
low = 1
high = 8
json_flag = "--speculative-config"
key = "num_speculative_tokens"

[space.method]
type = "categorical"
choices = ["ngram", "eagle3"]
json_flag = "--speculative-config"
key = "method"

[space.lookup_max]
type = "int"
low = 2
high = 6
json_flag = "--speculative-config"
key = "prompt_lookup_max"
when = {{ method = "ngram" }}
default = 5
{extra}
[benchmark]
[[benchmark.scenarios]]
name = "c1"
concurrency = 1
prompt_tokens = 16
output_tokens = 16
requests = 1
"""


def _config(tmp_path: Path, base_json: str = '{"method": "ngram", "num_speculative_tokens": 4}', extra: str = ""):
    return parse_config(BASE.format(base_json=base_json, extra=extra), source="s.toml", base_dir=tmp_path)


def _json_of(spec: LaunchSpec) -> dict:
    i = spec.argv.index("--speculative-config")
    assert spec.argv.count("--speculative-config") == 1
    return json.loads(spec.argv[i + 1])


def test_baseline_reads_the_base_commands_json(tmp_path: Path) -> None:
    cfg = _config(tmp_path)
    assert cfg.baseline == {"k": 4, "method": "ngram", "lookup_max": 5}


def test_several_params_share_one_flag_and_untuned_keys_stay(tmp_path: Path) -> None:
    cfg = _config(tmp_path, base_json='{"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 1}')
    base = LaunchSpec(argv=cfg.target.command)
    spec = render(cfg.space, base, {"k": 7, "method": "ngram", "lookup_max": 3})
    assert _json_of(spec) == {
        "method": "ngram",
        "num_speculative_tokens": 7,
        "prompt_lookup_min": 1,
        "prompt_lookup_max": 3,
    }
    # An inactive parameter's key is removed (the server's own default applies), not left stale.
    spec = render(cfg.space, base, {"k": 2, "method": "eagle3"})
    assert _json_of(spec) == {"method": "eagle3", "num_speculative_tokens": 2, "prompt_lookup_min": 1}
    # What render writes, baseline_params reads back.
    assert baseline_params(cfg.space, spec) == {"k": 2, "method": "eagle3"}


def test_the_flag_is_added_when_the_base_command_lacks_it(tmp_path: Path) -> None:
    cfg = _config(tmp_path, extra="")
    spec = render(cfg.space, LaunchSpec(argv=("vllm", "serve", "m")), {"k": 3, "method": "eagle3"})
    assert _json_of(spec) == {"num_speculative_tokens": 3, "method": "eagle3"}


@pytest.mark.parametrize(
    ("base_json", "extra", "match"),
    [
        ("{not json", "", r"target.command: expected --speculative-config to be followed by a JSON object"),
        ("[1, 2]", "", r"target.command: expected --speculative-config to hold a JSON object"),
        ('{"method": "ngram", "num_speculative_tokens": 12}', "", r"space.k: expected the search space to contain"),
        ('{"method": "ngram", "num_speculative_tokens": {"a": 1}}', "", r"space.k: expected --speculative-config's"),
        (
            "{}",
            '[space.dup]\ntype = "int"\nlow = 1\nhigh = 2\njson_flag = "--speculative-config"\nkey = "method"\n',
            r"space.dup.key: expected a key not already set by \[space.method\]",
        ),
        (
            "{}",
            '[space.x]\ntype = "int"\nlow = 1\nhigh = 2\njson_flag = "--speculative-config"\n',
            r"space.x.key: expected the key inside --speculative-config's JSON object",
        ),
        (
            "{}",
            '[space.x]\ntype = "int"\nlow = 1\nhigh = 2\nflag = "--x"\njson_flag = "--y"\nkey = "z"\n',
            r"space.x.json_flag: expected either json_flag \+ key or flag/env, not both",
        ),
        (
            "{}",
            '[space.x]\ntype = "int"\nlow = 1\nhigh = 2\nflag = "--x"\nkey = "z"\n',
            r"space.x.key: expected no key without json_flag",
        ),
    ],
)
def test_clear_config_errors(tmp_path: Path, base_json: str, extra: str, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        _config(tmp_path, base_json=base_json, extra=extra)
