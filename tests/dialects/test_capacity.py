"""A server's token capacity from its launch flags and its own answers, and whether a request fits it.

The llama-server rules are those of the llama.cpp tree llama-cpp-python 0.3.36 vendors: no ``-np`` is 4 slots
over one unified pool (server.cpp forces it), ``-np N`` alone gives each slot ``c / N`` of its own, and
llama_context rounds the context up to a multiple of 256.
"""

from __future__ import annotations

import pytest

from tuner.dialects import KvCapacity, LlamaServerDialect, RequestSize, SGLangDialect, VLLMDialect

LS = ["llama-server", "-m", "M", "-c", "2048"]


@pytest.mark.parametrize(
    ("extra", "env", "request_", "pool", "slots"),
    [
        ([], {}, 2048, 2048, 4),
        (["--no-kv-unified"], {}, 2048, 2048, 4),  # no -np: unified whatever the flag says
        (["-np", "2"], {}, 1024, 2048, 2),
        (["-np", "2", "--kv-unified"], {}, 2048, 2048, 2),
        (["-np", "2", "-kvu", "-no-kvu"], {}, 1024, 2048, 2),  # the last one wins
        (["-np", "2"], {"LLAMA_ARG_KV_UNIFIED": "true"}, 2048, 2048, 2),
        (["-np", "3"], {}, 768, 2304, 3),  # 2048 / 3 = 682, rounded up to 768 a slot
        (["-c", "2000"], {}, 2048, 2048, 4),  # the last -c, rounded up to 2048
    ],
)
def test_llama_server_capacity_from_its_flags(
    extra: list[str], env: dict[str, str], request_: int, pool: int, slots: int
) -> None:
    cap = LlamaServerDialect().command_capacity([*LS, *extra], env)
    assert cap is not None and (cap.request, cap.pool, cap.slots) == (request_, pool, slots), cap


def test_no_context_flag_says_nothing() -> None:
    assert LlamaServerDialect().command_capacity(["llama-server", "-m", "M"], {}) is None
    assert LlamaServerDialect().command_capacity(["llama-server", "-c", "0"], {}) is None
    assert VLLMDialect().command_capacity(["vllm", "serve", "m"], {}) is None


def test_llama_server_capacity_from_props_reads_the_pool_layout_from_the_command() -> None:
    props = {"/props": {"default_generation_settings": {"n_ctx": 2048}, "total_slots": 4}}
    unified = LlamaServerDialect().server_capacity(props, LS, {})
    assert unified is not None and (unified.request, unified.pool, unified.slots) == (2048, 2048, 4)
    props = {"/props": {"default_generation_settings": {"n_ctx": 1024}, "total_slots": 2}}
    own = LlamaServerDialect().server_capacity(props, [*LS, "-np", "2"], {})
    assert own is not None and (own.request, own.pool, own.slots) == (1024, 2048, 2)
    assert LlamaServerDialect().server_capacity({"/props": {"total_slots": 2}}, LS, {}) is None


def test_sglang_and_vllm_say_one_request_s_context() -> None:
    info = {"/get_server_info": {"context_length": 4096, "max_total_num_tokens": 3000, "max_running_requests": 8}}
    cap = SGLangDialect().server_capacity(info, [], {})
    assert cap is not None and (cap.request, cap.pool) == (3000, None)  # SGLang queues what its pool cannot hold
    models = {"/v1/models": {"data": [{"id": "m", "max_model_len": 1024}]}}
    cap = VLLMDialect().server_capacity(models, [], {})
    assert cap is not None and cap.request == 1024 and cap.pool is None
    assert VLLMDialect().server_capacity({"/v1/models": {"data": []}}, [], {}) is None


def test_a_request_fits_or_the_problem_has_the_numbers() -> None:
    cap = KvCapacity(request=2048, pool=2048, slots=4, source="-c 2048")
    size = RequestSize(prompt=412, output=124, drafts=9)
    assert cap.problem(size, concurrency=3) is None  # 3 x 545 = 1635
    said = cap.problem(size, concurrency=16)  # 16 streams, 4 slots: 4 hold KV at once
    assert said is not None and "4 streams x 545 tokens" in said and "= 2180 > the 2048-token KV pool" in said
    assert cap.per_stream(16) == 512 and cap.per_stream(1) == 2048
    own = KvCapacity(request=512, pool=2048, slots=4, source="-np 4")
    too_long = own.problem(RequestSize(prompt=500, output=100, drafts=0), concurrency=1)
    assert too_long is not None and "a request holds 600 tokens" in too_long and "> the 512" in too_long
