"""What the simulated server logs while it starts, by phase, in SGLang 0.5.23's words.

The HTTP simulator writes these lines as its phases pass; the in-process model (:mod:`tuner.sim.inprocess`) writes
the same lines into its log at once, so readiness reads both alike. Texts from SGLang 0.5.23's
``model_runner.py`` (``Load weight begin/end``), ``weight_utils.py`` (the shard progress bar),
``memory_pool.py`` (``KV Cache is allocated``), ``tp_worker.py`` (the small-pool warning),
``dflash_worker_v2.py`` (the block-size mismatch), ``cuda_graph_setup.py`` (``Capture target verify CUDA
graph begin/end``), ``decode_cuda_graph_runner.py`` (``Capture cuda graph failed``) and ``http_server.py``
(``The server is fired up and ready to roll!``).
"""

from __future__ import annotations

from tuner.sim._model import (
    GPU_CAPACITY_GIB,
    WEIGHTS_GB,
    ServerConfig,
    capture_gb,
    cuda_graph_max_bs,
    kv_pool_gb,
    kv_pool_tokens,
    startup_failure,
    verify_width,
)
from tuner.sim._versions import SGLangVersion

__all__ = [
    "READY_LINE",
    "SHARDS",
    "capture_begin_lines",
    "capture_end_lines",
    "capture_failure_text",
    "load_begin_lines",
    "load_end_lines",
]

READY_LINE = "The server is fired up and ready to roll!"
#: Checkpoint shards of a ~590 GB Kimi K2.6 checkpoint.
SHARDS = 64
_SPEC_CAPTURE_BS = [*range(1, 9), *range(10, 33, 2), *range(40, 65, 4), *range(72, 257, 8), *range(272, 513, 16)]


def load_begin_lines() -> list[str]:
    return [
        f"Load weight begin. avail mem={GPU_CAPACITY_GIB:.2f} GB",
        f"Loading safetensors checkpoint shards:   0% Completed | 0/{SHARDS} [00:00<?, ?it/s]",
    ]


def load_end_lines(cfg: ServerConfig, *, load_time: float) -> list[str]:
    minutes, seconds = divmod(int(load_time), 60)
    avail = GPU_CAPACITY_GIB - WEIGHTS_GB
    lines = [
        f"Loading safetensors checkpoint shards: 100% Completed | {SHARDS}/{SHARDS} "
        f"[{minutes:02d}:{seconds:02d}<00:00, {SHARDS / max(load_time, 1e-3):.2f}it/s]",
        f"Load weight end. elapsed={load_time:.2f} s, type=DeepseekV3ForCausalLM, avail mem={avail:.2f} GB, "
        f"mem usage={WEIGHTS_GB:.2f} GB.",
    ]
    pool = kv_pool_gb(cfg)
    if pool > 0:
        tokens = kv_pool_tokens(cfg)
        lines.append(f"KV Cache is allocated. dtype: torch.bfloat16, #tokens: {tokens}, KV size: {pool:.2f} GB")
        if tokens < cfg.context_length:
            lines.append(
                f"KV pool holds {tokens} tokens, fewer than --context-length {cfg.context_length}. One "
                "full-length request cannot fit, so long requests will be refused or truncated at serving time. "
                "Lower --context-length, raise --mem-fraction-static, or free memory taken before the pool is sized."
            )
    if cfg.is_dflash_family and cfg.block_size != cfg.drafter_block_size:
        lines.append(
            f"DFLASH block size mismatch: using speculative_num_draft_tokens={cfg.block_size} but draft config "
            f"block_size={cfg.drafter_block_size}."
        )
    return lines


def _capture_name(cfg: ServerConfig) -> str:
    return "target verify" if cfg.algorithm is not None else "target decode"


def capture_begin_lines(cfg: ServerConfig) -> list[str]:
    avail = GPU_CAPACITY_GIB - cfg.mem_fraction_static * GPU_CAPACITY_GIB
    return [
        f"Capture {_capture_name(cfg)} CUDA graph begin. backend=full, num_tokens_per_req={verify_width(cfg)}, "
        f"avail mem={avail:.2f} GB"
    ]


def capture_end_lines(cfg: ServerConfig, *, seconds: float) -> list[str]:
    top = cuda_graph_max_bs(cfg)
    bs = [b for b in _SPEC_CAPTURE_BS if b < top] + [top]
    used = capture_gb(cfg)
    avail = GPU_CAPACITY_GIB * (1 - cfg.mem_fraction_static) - used
    return [
        f"Capture {_capture_name(cfg)} CUDA graph end. bs={bs}, elapsed={seconds:.2f} s, mem usage={used:.2f} GB, "
        f"avail mem={avail:.2f} GB."
    ]


def capture_failure_text(cfg: ServerConfig, version: SGLangVersion) -> str | None:
    """The exception and hint SGLang prints when start-up fails for memory, or None when it starts.

    A capture that does not fit ends with the version's "Possible solutions" hint.
    """
    failure = startup_failure(cfg)
    if failure is None:
        return None
    if failure.startswith("Exception: Capture cuda graph failed"):
        return f"{failure}\n{version.capture_hint}"
    return failure
