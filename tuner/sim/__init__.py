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

from tuner.sim._args import build_parser
from tuner.sim._model import ServerConfig, acceptance_length, corrupts_code, decode_tok_s, step_time_s, workload_kind
from tuner.sim._server import main

__all__ = [
    "ServerConfig",
    "acceptance_length",
    "build_parser",
    "corrupts_code",
    "decode_tok_s",
    "main",
    "step_time_s",
    "workload_kind",
]
