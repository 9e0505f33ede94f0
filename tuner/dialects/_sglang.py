from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from tuner.dialects._base import BaseServerDialect


def _find(argv: Sequence[str], *needles: str) -> str | None:
    for arg in argv:
        for n in needles:
            if n in arg:
                return n
    return None


class SGLangDialect(BaseServerDialect):
    """``python -m sglang.launch_server`` (and the bundled simulator, which mimics it flag for flag)."""

    name = "sglang"
    health_path = "/health"
    phase_markers: ClassVar[tuple[tuple[str, str], ...]] = (
        ("loading weights", r"Load weight begin|Loading safetensors|Init torch distributed"),
        ("capturing cuda graphs", r"Load weight end"),
        ("warming up", r"Capture cuda graph end"),
        ("serving", r"The server is fired up and ready to roll"),
    )
    flush_path = "/flush_cache"
    acceptance = "server_info"
    metrics_path = "/metrics"
    stream_usage = True
    bool_style = "switch"
    flag_separator = "-"
    default_port = 30000
    tunable = (
        {
            "name": "budget",
            "type": "int",
            "low": 4,
            "high": 32,
            "flag": "--speculative-ddtree-budget",
            "requires": ("--speculative-algorithm", "DDTREE"),
        },
        {
            "name": "topk",
            "type": "int",
            "low": 1,
            "high": 10,
            "env": "SGLANG_DDTREE_MAX_TOPK",
            "default": 6,
            "requires": ("--speculative-algorithm", "DDTREE"),
        },
        {
            "name": "block_size",
            "type": "int",
            "low": 4,
            "high": 16,
            "step": 4,
            "flag": "--speculative-dflash-block-size",
            "aliases": ["--speculative-num-draft-tokens"],
            "default": 16,
            "requires": ("--speculative-algorithm", None),
        },
        {
            "name": "window",
            "type": "categorical",
            "choices": ["none", 1024, 2048, 4096],
            "flag": "--speculative-dflash-draft-window-size",
            "absent": "none",
            "requires": ("--speculative-algorithm", None),
        },
    )

    @classmethod
    def matches(cls, argv: Sequence[str]) -> str | None:
        found = _find(argv, "sglang.launch_server", "tuner.sim")
        if found:
            return found
        for i, arg in enumerate(argv[:-1]):
            if arg.rsplit("/", 1)[-1] in ("sglang", "tune") and argv[i + 1] in ("serve", "sim"):
                return f"{arg.rsplit('/', 1)[-1]} {argv[i + 1]}"
        return None
