"""The report's score map draws the dialect's paired knobs when the space has both, the two most important
parameters otherwise; which knobs pair is the dialect's to say (no server's names in the report)."""

from __future__ import annotations

from pathlib import Path

from tuner.config import StudyConfig, parse_config
from tuner.report._map import map_view  # the module under test

_CONFIG = """
[study]
name = "map"
[target]
command = ["python", "-m", "tuner.sim", "--port", "30999", "--speculative-ddtree-budget", "8",
           "--chunked-prefill-size", "2048", "--mem-fraction-static", "0.8"]
env = {{ SGLANG_DDTREE_MAX_TOPK = "4" }}
base_url = "http://127.0.0.1:30999"
{server}
[space.budget]
type = "int"
low = 4
high = 32
flag = "--speculative-ddtree-budget"
[space.topk]
type = "int"
low = 1
high = 8
env = "SGLANG_DDTREE_MAX_TOPK"
[space.chunk]
type = "int"
low = 1024
high = 8192
flag = "--chunked-prefill-size"
[space.fraction]
type = "float"
low = 0.7
high = 0.9
flag = "--mem-fraction-static"
[[benchmark.scenarios]]
name = "c1"
concurrency = 1
prompt_tokens = 16
output_tokens = 16
requests = 1
"""

# What the importances say: the paired knobs matter least.
RANKING = {"chunk": 0.5, "fraction": 0.3, "budget": 0.1, "topk": 0.1}


def _config(server: str = "") -> StudyConfig:
    return parse_config(_CONFIG.format(server=server), source="map.toml", base_dir=Path("."))


def test_sglang_pairs_ddtree_budget_with_top_k_whatever_the_importances() -> None:
    config = _config()
    assert config.dialect.name == "sglang"
    view = map_view(config, [], None, RANKING)
    assert view is not None and (view.x, view.y) == ("budget", "topk")


def test_a_server_without_paired_knobs_maps_the_two_most_important() -> None:
    config = _config('server = "generic"')
    assert config.dialect.map_axes is None
    view = map_view(config, [], None, RANKING)
    assert view is not None and (view.x, view.y) == ("chunk", "fraction")


def test_the_pair_needs_both_knobs_in_the_space() -> None:
    config = _config()
    only_budget = [p for p in config.space.params if p.name != "topk"]
    assert config.dialect.map_axes_for(only_budget) is None
    assert config.dialect.map_axes_for(config.space.params) == ("budget", "topk")
