"""Acceptance from vLLM's and llama-server's Prometheus counters, differenced over a scenario."""

from __future__ import annotations

import pytest

from tuner.bench import acceptance_between, parse_prometheus
from tuner.bench._server import _llamacpp_snapshot, _vllm_snapshot

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


# llama-server's /metrics (with --metrics) after one 24-token request drafted by SmolLM2-135M for itself; its log
# said "draft acceptance = 1.00000 (18 accepted / 18 generated), mean len = 4.60".
LLAMACPP = """# HELP llamacpp:tokens_predicted_total Number of generation tokens processed
# TYPE llamacpp:tokens_predicted_total counter
llamacpp:tokens_predicted_total 24
llamacpp:spec_decode_num_draft_tokens_total 18
llamacpp:spec_decode_num_accepted_tokens_total 18
llamacpp:spec_decode_num_drafts_total 5
llamacpp:requests_processing 0
llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="0"} 5
llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="1"} 5
"""
IDLE = LLAMACPP.replace(" 24\n", " 0\n").replace(" 18\n", " 0\n").replace(" 5\n", " 0\n")


def test_llama_server_accept_length_is_its_own_mean_len() -> None:
    before, after = (_llamacpp_snapshot(parse_prometheus(t)) for t in (IDLE, LLAMACPP))
    accept, method = acceptance_between(before, after)
    assert accept == pytest.approx(4.60) and method == "counters"  # 1 + 18 / 5, as the server logged
    assert acceptance_between(after, after) == (None, None)  # no drafts in between: speculation off

