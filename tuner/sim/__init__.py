"""A simulated SGLang server with DFlash/DDTree speculative decoding, for tests, benchmarks and demos.

It speaks the real server's command line (``python -m tuner.sim`` accepts the ``sglang.launch_server`` flags
``tune`` edits, plus ``--sim-*`` knobs) and HTTP API, reproduces its startup phases and failure modes, and
paces its token streams from a documented performance model (:mod:`tuner.sim._model`) whose noise-free
functions are exported here as ground truth.

Token accounting: a token is one whitespace-separated word, so the prompt-token count of a request is the
number of words in all its message contents (or its completion prompt), and a benchmark builds an N-token
prompt from N words.
"""

from tuner.sim._answers import Answer, count_prompt_tokens, find_problem, humaneval_answer, split_tokens
from tuner.sim._args import DDTREE_TOPK_ENV, DEFAULT_DDTREE_TOPK, build_parser, parse_server_args
from tuner.sim._model import (
    ServerConfig,
    acceptance_length,
    aggregate_tok_s,
    capture_seconds,
    corrupts_code,
    cuda_graph_max_bs,
    decode_tok_s,
    kv_pool_gb,
    max_concurrent_requests,
    request_memory_gb,
    startup_failure,
    startup_seconds,
    step_time_s,
    verify_width,
    workload_kind,
)
from tuner.sim._server import main

__all__ = [
    "DDTREE_TOPK_ENV",
    "DEFAULT_DDTREE_TOPK",
    "Answer",
    "ServerConfig",
    "acceptance_length",
    "aggregate_tok_s",
    "build_parser",
    "capture_seconds",
    "corrupts_code",
    "count_prompt_tokens",
    "cuda_graph_max_bs",
    "decode_tok_s",
    "find_problem",
    "humaneval_answer",
    "kv_pool_gb",
    "main",
    "max_concurrent_requests",
    "parse_server_args",
    "request_memory_gb",
    "split_tokens",
    "startup_failure",
    "startup_seconds",
    "step_time_s",
    "verify_width",
    "workload_kind",
]
