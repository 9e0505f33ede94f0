"""A simulated SGLang server with DFlash/DDTree speculative decoding, for tests, benchmarks and demos.

It speaks the real server's command line (``python -m tuner.sim`` accepts exactly the flags of the emulated
SGLang version, mainline 0.5.23 or the DDTree branch of PR #29907, chosen with ``--sim-sglang-version``, plus
``--sim-*`` knobs) and HTTP API, reproduces its start-up phases, log lines and failure modes, and paces its token
streams from a documented performance model (:mod:`tuner.sim._model`) and batch scheduler
(:mod:`tuner.sim._scheduler`) whose noise-free functions are exported here as ground truth.

Token accounting: a token is one whitespace-separated word, so the prompt-token count of a request is the
number of words in all its message contents (or its completion prompt), and a benchmark builds an N-token
prompt from N words.
"""

from tuner.sim._answers import Answer, count_prompt_tokens, find_problem, humaneval_answer, split_tokens
from tuner.sim._args import (
    DDTREE_TOPK_ENV,
    DEFAULT_DDTREE_TOPK,
    ServerArgsError,
    build_parser,
    parse_server_args,
    select_version,
)
from tuner.sim._model import (
    ServerConfig,
    acceptance_length,
    aggregate_tok_s,
    capture_gb,
    capture_seconds,
    corrupts_code,
    cuda_graph_max_bs,
    decode_tok_s,
    kv_pool_gb,
    kv_pool_tokens,
    max_concurrent_requests,
    max_input_tokens,
    request_memory_gb,
    startup_failure,
    startup_seconds,
    step_time_s,
    verify_width,
    warmup_seconds,
    workload_kind,
)
from tuner.sim._scheduler import (
    CTX_BUCKET,
    INIT_NEW_TOKEN_RATIO,
    PREFILL_S_PER_TOKEN,
    BatchScheduler,
    OpenRequestTimes,
    Retraction,
    SimulatedOpen,
    SimulatedScenario,
    simulate_open,
    simulate_scenario,
)
from tuner.sim._server import main
from tuner.sim._startup import (
    READY_LINE,
    capture_begin_lines,
    capture_end_lines,
    capture_failure_text,
    load_begin_lines,
    load_end_lines,
)
from tuner.sim._versions import DEFAULT_VERSION, VERSIONS, EmulatedVersion

__all__ = [
    "CTX_BUCKET",
    "DDTREE_TOPK_ENV",
    "DEFAULT_DDTREE_TOPK",
    "DEFAULT_VERSION",
    "INIT_NEW_TOKEN_RATIO",
    "PREFILL_S_PER_TOKEN",
    "READY_LINE",
    "VERSIONS",
    "Answer",
    "BatchScheduler",
    "EmulatedVersion",
    "OpenRequestTimes",
    "Retraction",
    "ServerArgsError",
    "ServerConfig",
    "SimulatedOpen",
    "SimulatedScenario",
    "acceptance_length",
    "aggregate_tok_s",
    "build_parser",
    "capture_begin_lines",
    "capture_end_lines",
    "capture_failure_text",
    "capture_gb",
    "capture_seconds",
    "corrupts_code",
    "count_prompt_tokens",
    "cuda_graph_max_bs",
    "decode_tok_s",
    "find_problem",
    "humaneval_answer",
    "kv_pool_gb",
    "kv_pool_tokens",
    "load_begin_lines",
    "load_end_lines",
    "main",
    "max_concurrent_requests",
    "max_input_tokens",
    "parse_server_args",
    "request_memory_gb",
    "select_version",
    "simulate_open",
    "simulate_scenario",
    "split_tokens",
    "startup_failure",
    "startup_seconds",
    "step_time_s",
    "verify_width",
    "warmup_seconds",
    "workload_kind",
]
