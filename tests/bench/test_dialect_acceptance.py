"""Acceptance from vLLM's Prometheus counters, differenced over a scenario."""

from __future__ import annotations

import pytest

from tuner.bench import acceptance_between, parse_prometheus
from tuner.bench._server import _vllm_snapshot

BEFORE = """# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 100.0
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="m"} 300.0
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="m"} 150.0
"""
AFTER = """vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 300.0
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="m"} 900.0
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="m"} 550.0
"""


def test_vllm_accept_length_is_one_plus_accepted_per_draft() -> None:
    before, after = (_vllm_snapshot(parse_prometheus(t)) for t in (BEFORE, AFTER))
    accept, method = acceptance_between(before, after)
    # 200 drafts in the scenario accepted 400 tokens: 1 + 400 / 200 = 3.0 (the bonus token included).
    assert accept == pytest.approx(3.0) and method == "counters"


def test_vllm_without_spec_counters_reports_nothing() -> None:
    snap = _vllm_snapshot(parse_prometheus("vllm:generation_tokens_total 10\n"))
    assert acceptance_between(snap, snap) == (None, None)
