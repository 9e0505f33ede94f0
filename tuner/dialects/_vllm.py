from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from tuner.dialects._base import BaseServerDialect
from tuner.dialects._capacity import KvCapacity, answer_int
from tuner.dialects._counters import ServerSnapshot, drafts_snapshot


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

    def read_counters(self, metrics: str, info: Mapping[str, Any] | None) -> ServerSnapshot:
        """Accepted = accepted + drafts (the bonus token of every draft), steps = drafts, summed over label sets."""
        return drafts_snapshot(metrics, prefix="vllm", generated="vllm:generation_tokens_total")
    capacity_paths: ClassVar[tuple[str, ...]] = ("/v1/models",)

    def server_capacity(
        self, answers: Mapping[str, Any], argv: Sequence[str], env: Mapping[str, str]
    ) -> KvCapacity | None:
        """``/v1/models``' ``max_model_len``: one request's context (vLLM preempts, rather than fails, requests
        its KV cannot hold at once, so no pool is said)."""
        data = answers.get("/v1/models", {}).get("data") if isinstance(answers.get("/v1/models"), dict) else None
        length = answer_int(data[0], "max_model_len") if isinstance(data, list) and data else None
        return KvCapacity(request=length, source=f"/v1/models: max_model_len {length}") if length else None
