"""What the simulated server logs while it starts, by phase, in the emulated version's words.

The HTTP simulator writes these lines as its phases pass; the in-process model (:mod:`tuner.sim.inprocess`) writes
the same lines into its log at once, so readiness reads both alike. Texts from SGLang 0.5.23's (and, for the
DDTree branch, 0.5.15.post1's) ``model_runner.py`` (``Init torch distributed``, ``Load weight begin/end``; the
capture lines in 0.5.15), ``weight_utils.py`` (the shard progress bar), ``memory_pool.py`` (``KV Cache is
allocated``), ``tp_worker.py`` (the small-pool warning), ``dflash_worker_v2.py`` (the block-size mismatch), PR
#29907's ``ddtree_worker.py`` (``Initialized DDTree worker``), 0.5.23's ``cuda_graph_setup.py`` (``Capture target
verify CUDA graph begin/end. bs=...``), ``decode_cuda_graph_runner.py`` (``Capture cuda graph failed``) and
``http_server.py`` (``The server is fired up and ready to roll!``).
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
from tuner.sim._versions import EmulatedVersion

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


def load_begin_lines(version: EmulatedVersion) -> list[str]:
    distributed = ["Init torch distributed begin.", "Init torch distributed ends. elapsed=1.21 s, mem usage=0.63 GB"]
    return [
        *(distributed if version.log_era == "0.5.15" else []),
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
    if cfg.algorithm == "DDTREE":
        lines.append(
            f"Initialized DDTree worker. block_size={cfg.block_size}, tree_budget={cfg.budget}, "
            f"max_tree_nodes={cfg.budget + 1}"
        )
    return lines


def _capture_name(cfg: ServerConfig) -> str:
    return "target verify" if cfg.algorithm is not None else "target decode"


def _capture_bs(cfg: ServerConfig) -> list[int]:
    top = cuda_graph_max_bs(cfg)
    return [b for b in _SPEC_CAPTURE_BS if b < top] + [top]


def capture_begin_lines(cfg: ServerConfig, version: EmulatedVersion) -> list[str]:
    avail = GPU_CAPACITY_GIB - cfg.mem_fraction_static * GPU_CAPACITY_GIB
    head = f"Capture {_capture_name(cfg)} CUDA graph begin. backend=full"
    if version.log_era == "0.5.15":
        return [f"{head}, num_tokens_per_bs={verify_width(cfg)}, bs={_capture_bs(cfg)}, avail mem={avail:.2f} GB"]
    return [f"{head}, num_tokens_per_req={verify_width(cfg)}, avail mem={avail:.2f} GB"]


def capture_end_lines(cfg: ServerConfig, version: EmulatedVersion, *, seconds: float) -> list[str]:
    used = capture_gb(cfg)
    avail = GPU_CAPACITY_GIB * (1 - cfg.mem_fraction_static) - used
    tail = f"elapsed={seconds:.2f} s, mem usage={used:.2f} GB, avail mem={avail:.2f} GB."
    if version.log_era == "0.5.15":
        return [f"Capture {_capture_name(cfg)} CUDA graph end. {tail}"]
    return [f"Capture {_capture_name(cfg)} CUDA graph end. bs={_capture_bs(cfg)}, {tail}"]


def capture_failure_text(cfg: ServerConfig, version: EmulatedVersion) -> str | None:
    """The exception and hint SGLang prints when start-up fails for memory, or None when it starts.

    A capture that does not fit ends with the version's "Possible solutions" hint.
    """
    failure = startup_failure(cfg)
    if failure is None:
        return None
    if failure.startswith("Exception: Capture cuda graph failed"):
        return f"{failure}\n{version.message('cuda_graph_capture_hint')}"
    return failure
