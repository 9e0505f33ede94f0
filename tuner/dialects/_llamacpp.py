from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from tuner.dialects._base import BaseServerDialect


class LlamaCppDialect(BaseServerDialect):
    """llama-cpp-python's server, ``python -m llama_cpp.server`` (0.3.x).

    It has no ``/health``, ``/metrics``, ``/server_info`` or cache flush (all 404), its streams carry no
    ``usage`` even when asked (so output is counted with ``/extras/tokenize/count``), booleans are
    ``--flag true|false`` (a bare ``--flash_attn`` exits 2), and flags use underscores. Speculative decoding is
    prompt lookup: ``--draft_model prompt-lookup-decoding --draft_model_num_pred_tokens N``.
    """

    name = "llama.cpp"
    context_flags: ClassVar[tuple[str, ...]] = ("--n_ctx",)
    draft_lengths: ClassVar[tuple[str, ...]] = ("num_pred_tokens",)
    health_path = None
    phase_markers: ClassVar[tuple[tuple[str, str], ...]] = (
        ("loading model", r"llama_model_load|llama_model_loader|load_tensors"),
        ("creating context", r"llama_context|llama_new_context_with_model|llama_init_from_model"),
        ("starting http server", r"Started server process|Waiting for application startup"),
        ("serving", r"Uvicorn running on|Application startup complete"),
    )
    fatal_patterns: ClassVar[tuple[str, ...]] = (r"error: argument", r"[Ff]ailed to load model")
    flush_path = None
    acceptance = None
    metrics_path = None
    stream_usage = False
    tokenize_path = "/extras/tokenize/count"
    bool_style = "value"
    flag_separator = "_"
    default_port = 8000
    init_concurrency = 1  # llama-cpp-python serves one request at a time
    tunable = (
        {
            "name": "num_pred_tokens",
            "type": "int",
            "low": 1,
            "high": 16,
            "flag": "--draft_model_num_pred_tokens",
            "default": 10,
            "requires": ("--draft_model", None),
        },
    )

    @classmethod
    def matches(cls, argv: Sequence[str]) -> str | None:
        return "llama_cpp.server" if any("llama_cpp.server" in a for a in argv) else None

    def token_count_request(self, text: str, model: str) -> dict[str, Any]:
        return {"input": text, "model": model}
