from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from tuner.dialects._base import BaseServerDialect


class VLLMDialect(BaseServerDialect):
    """``vllm serve MODEL`` / ``python -m vllm.entrypoints.openai.api_server``.

    Speculative decoding is one JSON flag (``--speculative-config``); acceptance comes from the Prometheus
    counters ``vllm:spec_decode_num_accepted_tokens_total`` and ``vllm:spec_decode_num_drafts_total``
    (accept length = 1 + accepted / drafts). Boolean flags are argparse ``BooleanOptionalAction``s
    (``--enable-x`` / ``--no-enable-x``), and ``--help`` only lists groups unless asked for ``--help=all``.
    """

    name = "vllm"
    context_flags: ClassVar[tuple[str, ...]] = ("--max-model-len",)
    batch_cap_flags: ClassVar[tuple[str, ...]] = ("--max-num-seqs",)
    draft_lengths: ClassVar[tuple[str, ...]] = ("num_speculative_tokens",)
    health_path = "/health"
    phase_markers: ClassVar[tuple[tuple[str, str], ...]] = (
        ("loading weights", r"Starting to load model|Loading weights"),
        ("profiling memory", r"Loading weights took|Model loading took"),
        ("capturing cuda graphs", r"Capturing CUDA graph|Capturing cudagraphs"),
        ("starting api server", r"Graph capturing finished|Starting vLLM API server"),
        ("serving", r"Application startup complete"),
    )
    fatal_patterns: ClassVar[tuple[str, ...]] = (r"EngineCore failed to start", r"Engine core initialization failed")
    flush_path = "/reset_prefix_cache"
    acceptance = "prometheus"
    metrics_path = "/metrics"
    stream_usage = True
    tokenize_path = "/tokenize"
    bool_style = "negatable"
    help_args = ("--help=all",)
    default_port = 8000
    flag_separator = "-"
    # vllm.config.SpeculativeConfig's fields (the ones a user sets; the rest are derived).
    json_keys: ClassVar[dict[str, frozenset[str]]] = {
        "--speculative-config": frozenset(
            {
                "method",
                "model",
                "num_speculative_tokens",
                "draft_tensor_parallel_size",
                "quantization",
                "max_model_len",
                "revision",
                "code_revision",
                "disable_by_batch_size",
                "disable_padded_drafter_batch",
                "prompt_lookup_min",
                "prompt_lookup_max",
                "speculative_token_tree",
                "parallel_drafting",
                "enforce_eager",
            }
        ),
        "--compilation-config": frozenset({"level", "mode", "cudagraph_capture_sizes", "cudagraph_mode"}),
    }
    tunable = (
        {
            "name": "num_speculative_tokens",
            "type": "int",
            "low": 1,
            "high": 8,
            "json_flag": "--speculative-config",
            "key": "num_speculative_tokens",
        },
    )

    @classmethod
    def matches(cls, argv: Sequence[str]) -> str | None:
        for i, arg in enumerate(argv):
            if "vllm.entrypoints" in arg:
                return "vllm.entrypoints"
            if arg.rsplit("/", 1)[-1] == "vllm" and i + 1 < len(argv) and argv[i + 1] == "serve":
                return "vllm serve"
        return None
