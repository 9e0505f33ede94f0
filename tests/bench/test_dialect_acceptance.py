"""Acceptance from each dialect's counters (SGLang's, vLLM's and llama-server's), differenced over a scenario."""

from __future__ import annotations

import pytest

from tuner.bench._server import acceptance_between
from tuner.dialects import (
    LlamaServerDialect,
    ServerSnapshot,
    SGLangDialect,
    VLLMDialect,
    parse_prometheus,
    prometheus_series,
)

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
    before, after = (VLLMDialect().read_counters(t, None) for t in (BEFORE, AFTER))
    accept, method = acceptance_between(before, after)
    # 200 drafts in the scenario accepted 400 tokens: 1 + 400 / 200 = 3.0 (the bonus token included).
    assert accept == pytest.approx(3.0) and method == "counters"


def test_vllm_without_spec_counters_reports_nothing() -> None:
    snap = VLLMDialect().read_counters("vllm:generation_tokens_total 10\n", None)
    assert acceptance_between(snap, snap) == (None, None)


# SGLang 0.5.23 with --enable-metrics, two ranks (the gauge has one series per rank; counters are summed).
SG_BEFORE = """# TYPE sglang:generation_tokens_total counter
sglang:generation_tokens_total{is_streaming="true",model_name="m"} 1000.0
sglang:generation_tokens_total{is_streaming="false",model_name="m"} 200.0
# TYPE sglang:spec_verify_calls_total counter
sglang:spec_verify_calls_total{model_name="m"} 300.0
# TYPE sglang:spec_accept_length gauge
sglang:spec_accept_length{model_name="m",tp_rank="0"} 3.5
sglang:spec_accept_length{model_name="m",tp_rank="1"} 4.5
"""
SG_AFTER = """sglang:generation_tokens_total{is_streaming="true",model_name="m"} 1900.0
sglang:generation_tokens_total{is_streaming="false",model_name="m"} 300.0
sglang:spec_verify_calls_total{model_name="m"} 500.0
sglang:spec_accept_length{model_name="m",tp_rank="0"} 4.0
sglang:spec_accept_length{model_name="m",tp_rank="1"} 5.0
"""


def _sglang(text: str, avg: float | None = None, *, counters: bool = True) -> ServerSnapshot:
    """What SGLang's dialect reads from ``text`` and a /server_info with ``avg`` (``counters`` False: a server
    without the verify counter)."""
    if not counters:
        text = "\n".join(line for line in text.splitlines() if "spec_verify_calls" not in line)
    info = None if avg is None else {"internal_states": [{"avg_spec_accept_length": avg}]}
    return SGLangDialect().read_counters(text, info)


def test_sglang_reads_its_counters_summed_and_its_gauges_per_rank() -> None:
    snap = _sglang(SG_BEFORE, 4.0)
    assert snap == ServerSnapshot(accepted=1200.0, steps=300.0, avg_accept=4.0, generated=1200.0,
                                  gauge_accept=(3.5, 4.5))
    assert SGLangDialect().read_counters(SG_BEFORE, {"internal_states": {"avg_spec_accept_length": 2.5}}).avg_accept \
        == 2.5  # older servers: one state, not a list


def test_series_keep_their_labels() -> None:
    series = prometheus_series(SG_BEFORE + 'x{path="/a,b",q="say \\"hi\\""} 2 1700000000\n')
    assert [labels["tp_rank"] for labels, _ in series["sglang:spec_accept_length"]] == ["0", "1"]
    assert series["x"] == [({"path": "/a,b", "q": 'say \\"hi\\"'}, 2.0)]
    assert parse_prometheus(SG_BEFORE)["sglang:generation_tokens_total"] == 1200.0  # a counter: summed


def test_sglang_counters_give_the_scenario_exactly() -> None:
    accept, method = acceptance_between(_sglang(SG_BEFORE, 4.0), _sglang(SG_AFTER, 4.1))
    # 1000 tokens over 200 verify calls, whatever the cumulative average or the gauges say.
    assert accept == pytest.approx(5.0) and method == "counters"


def test_without_the_verify_counter_server_info_is_the_labelled_fallback() -> None:
    before, after = _sglang(SG_BEFORE, 4.0, counters=False), _sglang(SG_AFTER, 4.4, counters=False)
    accept, method = acceptance_between(before, after)
    # 1200/4 = 300 steps before, 2200/4.4 = 500 after: 1000 tokens over 200 steps.
    assert accept == pytest.approx(5.0) and method == "server_info: server-wide, lagging"


def test_gauges_are_never_summed() -> None:
    after = ServerSnapshot(gauge_accept=(4.0, 5.0))
    accept, method = acceptance_between(ServerSnapshot(), after)
    assert accept == pytest.approx(4.5) and method == "gauge: last log interval"  # not 9.0
    accept, method = acceptance_between(ServerSnapshot(), ServerSnapshot(avg_accept=3.9))
    assert accept == pytest.approx(3.9) and method == "server_info: server-wide since boot, lagging"


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
    before, after = (LlamaServerDialect().read_counters(t, None) for t in (IDLE, LLAMACPP))
    accept, method = acceptance_between(before, after)
    assert accept == pytest.approx(4.60) and method == "counters"  # 1 + 18 / 5, as the server logged
    assert acceptance_between(after, after) == (None, None)  # no drafts in between: speculation off

