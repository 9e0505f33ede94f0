"""Noise-free performance and failure model of the simulated DFlash/DDTree server.

Everything the simulator does is derived from the pure functions below, so tests and benchmarks import them as
ground truth. The model describes Kimi K2.6 on 8x RTX PRO 6000 (96 GB each), calibrated to the figures in the
seed session: the best single-stream short-context decode is ~170 tok/s, and DDTREE budget=12, top-k=6,
window=2048, block=8 gives ~149 tok/s with a mean acceptance length of ~4.8.

Units and conventions
---------------------
* A *token* is one whitespace-separated word. ``context_tokens`` is the length of a request's context at the
  moment considered (prompt + tokens generated so far). The simulator counts prompt tokens as the number of
  whitespace-separated words in all message contents, so a benchmark builds an N-token prompt from N words.
* Acceptance length includes the bonus token (what SGLang reports as ``avg_spec_accept_length``).
* Per-stream decode speed is ``acceptance_length / step_time_s``: every running request advances once per
  engine step.

Acceptance (``acceptance_length``)
----------------------------------
The drafter proposes, for every position of a block of ``block_size`` tokens, a ranked list of candidates; the
rank-``i`` candidate is the true token with probability ``RANK_PROB[i] * POSITION_DECAY**depth * quality``.
DFLASH verifies the top-1 chain of the block. DDTREE grows a tree best-first: it keeps the ``budget`` nodes of
highest path probability, each node having at most ``top-k`` children and depth at most ``block_size``. The
expected accepted length is 1 (bonus) + the sum of the selected nodes' path probabilities. So acceptance rises
with budget, top-k and block size and saturates. ``quality`` depends on the drafter's view of the context:
the drafter was trained on a 2048-token window, so it degrades when it sees more than 2048 tokens (no window,
or a 4096 window, on long contexts) and when a window truncates the context below ~2048 tokens (512 hurts).

Workload (``workload``)
-----------------------
What is generated matters as much as the tree: code (and copy-heavy text) is predictable, prose much less so.
The calibration above is the seed's coding workload (``workload="code"``, the default). For ``"prose"`` every
candidate's probability is scaled by ``PROSE_QUALITY``: at the seed config acceptance falls from ~4.8 to ~3.1.
The HTTP simulator picks the workload per request from its text (:func:`workload_kind`).

Step time (``step_time_s``)
---------------------------
One step = scheduler overhead (amortised by ``--num-continuous-decode-steps``) + drafter forward (grows
with block size and batch) + tree construction (DDTREE: grows with budget x top-k) + per-request attention
+ target verify. The verify pass processes ``running x verify_width`` tokens (width = budget+1 for DDTREE,
block size for DFLASH). The target is a MoE: at one stream a wider verify touches more experts (more weight
traffic, the cost that bounds useful tree size); at high concurrency every expert is read anyway and
per-token compute dominates, so big trees are expensive. Batches larger than the CUDA graphs captured at
startup run eagerly (slower); the captured size is limited by the memory left outside
``--mem-fraction-static``.

Memory (``startup_failure``, ``max_concurrent_requests``)
--------------------------------------------------------
Per GPU: 96 GB. ``mem_fraction_static`` x 96 GB holds the weights (66 GB) and the KV pool (the rest). The
remaining memory holds activations (5 GB) and per-request speculative buffers sized for
``max_running_requests x verify_width x tree fan-out``; if those do not fit the server raises
``torch.OutOfMemoryError`` at startup. Under load every running request needs target KV for its context plus
drafter KV for ``min(context, window)`` plus its tree buffers; when the running requests need more than the KV
pool the server dies with an OOM mid-stream (a failed config, not a slow one).

Correctness (``corrupts_code``)
-------------------------------
The "buggy kernel path": DDTREE with top-k >= 9 and budget >= 24 accepts wrong tokens in wide trees, so code
answers come out subtly wrong. It is ~3% of the demo search space and far from the optimum.
"""

from __future__ import annotations

import argparse
import heapq
import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tuner.sim._args import parse_server_args

#: Candidate probabilities on prose relative to code (the calibrated workload).
PROSE_QUALITY = 0.8
_CODE_LINE = re.compile(r"^(?:\s{4,}\S|\s*(?:def|class|return|import|from)\b)", re.MULTILINE)

__all__ = [
    "ServerConfig",
    "acceptance_length",
    "aggregate_tok_s",
    "capture_seconds",
    "corrupts_code",
    "cuda_graph_max_bs",
    "decode_tok_s",
    "kv_pool_gb",
    "max_concurrent_requests",
    "request_memory_gb",
    "startup_failure",
    "startup_seconds",
    "step_time_s",
    "verify_width",
    "workload_kind",
]

# --- acceptance -------------------------------------------------------------------------------------------
#: P(true token is the rank-i candidate) at the first draft position, before context-quality scaling.
RANK_PROB = (0.82, 0.12, 0.03, 0.012, 0.006, 0.004, 0.003, 0.002, 0.0015, 0.001)
#: Multiplicative loss of drafter accuracy per position inside a block (diffusion drafts degrade along it).
POSITION_DECAY = 0.99
#: The DFlash drafter's training window (tokens).
TRAINING_WINDOW = 2048

# --- step time (seconds) ----------------------------------------------------------------------------------
SCHED_OVERHEAD_S = 0.0030
DENSE_READ_S = 0.0178  # attention/shared weights + TP all-reduces: paid once per step
EXPERT_READ_S = 0.0150  # reading every routed expert's weights once
NUM_EXPERTS = 384
EXPERTS_PER_TOKEN = 8
VERIFY_TOKEN_S = 0.00005  # compute per verified token (dominates once the batch is large)
DRAFT_BASE_S = 0.0025
DRAFT_TOKEN_S = 0.00001  # drafter compute per drafted position per request
TREE_NODE_S = 0.00002  # DDTREE tree construction per node x top-k**1.5 (launch-bound kernels)
REQ_OVERHEAD_S = 0.0003  # per running request: sampling, KV bookkeeping, detokenisation
ATTN_TOKEN_S = 5.0e-7  # decode attention, per context token per running request
VERIFY_ATTN_S = 1.5e-8  # tree attention, per verified token per context token
EAGER_PENALTY = 1.35  # batches larger than the captured CUDA graphs run eagerly

# --- memory (GB per GPU) ----------------------------------------------------------------------------------
GPU_MEMORY_GB = 96.0
WEIGHTS_GB = 66.0
ACTIVATIONS_GB = 5.0
TREE_BUFFER_GB = 0.0009  # per request per (verify width x fan-out) unit
GRAPH_GB_PER_BS = 0.012  # CUDA-graph pool per captured batch size per verify-width token
KV_TARGET_GB_PER_TOKEN = 60e-6  # MLA latent KV, replicated across TP ranks
KV_DRAFT_GB_PER_TOKEN = 18e-6

# --- correctness ------------------------------------------------------------------------------------------
CORRUPT_MIN_TOPK = 9
CORRUPT_MIN_BUDGET = 24


@dataclass(frozen=True, kw_only=True)
class ServerConfig:
    """The launch configuration that matters to the model (a subset of the server's arguments)."""

    algorithm: str | None = "DDTREE"
    block_size: int = 16
    ddtree_budget: int = 12
    ddtree_topk: int = 6
    draft_window: int | None = None
    max_running_requests: int = 64
    mem_fraction_static: float = 0.85
    context_length: int = 32768
    num_continuous_decode_steps: int = 1
    page_size: int = 1
    tp_size: int = 8

    @classmethod
    def from_namespace(cls, args: argparse.Namespace, *, ddtree_topk: int) -> ServerConfig:
        """Build a config from parsed server arguments."""
        return cls(
            algorithm=args.speculative_algorithm,
            block_size=args.speculative_dflash_block_size,
            ddtree_budget=args.speculative_ddtree_budget,
            ddtree_topk=ddtree_topk,
            draft_window=args.speculative_dflash_draft_window_size,
            max_running_requests=args.max_running_requests,
            mem_fraction_static=args.mem_fraction_static,
            context_length=args.context_length,
            num_continuous_decode_steps=args.num_continuous_decode_steps,
            page_size=args.page_size,
            tp_size=args.tp_size,
        )

    @classmethod
    def from_argv(cls, argv: Sequence[str], env: Mapping[str, str] | None = None) -> ServerConfig:
        """Parse a server command line (without the program name) exactly as the simulator does."""
        args, topk = parse_server_args(argv, os.environ if env is None else env)
        return cls.from_namespace(args, ddtree_topk=topk)

    @property
    def is_dflash_family(self) -> bool:
        return self.algorithm in ("DFLASH", "DDTREE")


def verify_width(cfg: ServerConfig) -> int:
    """Tokens the target verifies per request per step."""
    if cfg.algorithm == "DDTREE":
        return cfg.ddtree_budget + 1
    if cfg.algorithm == "DFLASH":
        return cfg.block_size
    if cfg.algorithm is None:
        return 1
    # EAGLE/NGRAM-style chains: modelled as a chain of block-size drafts.
    return cfg.block_size


def _drafter_quality(cfg: ServerConfig, context_tokens: int) -> float:
    seen = context_tokens if cfg.draft_window is None else min(context_tokens, cfg.draft_window)
    quality = 1.0
    if seen > TRAINING_WINDOW:
        # Beyond its training window the drafter's attention drifts.
        quality -= 0.045 * math.log2(seen / TRAINING_WINDOW)
    if (
        cfg.draft_window is not None
        and context_tokens > cfg.draft_window
        and cfg.draft_window < TRAINING_WINDOW
    ):
        # A window narrower than the training window hides context the drafter learned to use.
        quality -= 0.035 * math.log2(TRAINING_WINDOW / cfg.draft_window)
    return max(0.5, quality)


def _tree_expected_accept(rank_prob: Sequence[float], *, budget: int, topk: int, depth: int) -> float:
    """Best-first tree: sum of path probabilities of the ``budget`` best nodes (depth/top-k limited)."""
    if budget <= 0 or depth <= 0:
        return 0.0
    k = max(1, min(topk, len(rank_prob)))
    # Heap of candidate nodes: (-path_prob, depth, rank, parent_path_prob).
    heap: list[tuple[float, int, int, float]] = [(-rank_prob[0], 1, 0, 1.0)]
    total = 0.0
    taken = 0
    while heap and taken < budget:
        neg_p, d, rank, parent_p = heapq.heappop(heap)
        p = -neg_p
        total += p
        taken += 1
        decay = POSITION_DECAY**d
        if rank + 1 < k:  # next sibling becomes a candidate
            heapq.heappush(
                heap, (-parent_p * rank_prob[rank + 1] * POSITION_DECAY ** (d - 1), d, rank + 1, parent_p)
            )
        if d < depth:  # first child becomes a candidate
            heapq.heappush(heap, (-p * rank_prob[0] * decay, d + 1, 0, p))
    return total


def workload_kind(text: str) -> str:
    """``code`` when a request's text looks like code (fences, definitions, indented or symbol-dense lines),
    else ``prose``. Random benchmark words have no code markers at all."""
    if "```" in text or _CODE_LINE.search(text):
        return "code"
    symbols = sum(text.count(c) for c in "()[]{}=_:;")
    return "code" if symbols > 0.03 * max(1, len(text)) else "prose"


def acceptance_length(cfg: ServerConfig, *, context_tokens: int, workload: str = "code") -> float:
    """Expected accepted tokens per verify step, bonus token included (1.0 without speculation)."""
    if cfg.algorithm is None:
        return 1.0
    q = _drafter_quality(cfg, context_tokens) * (PROSE_QUALITY if workload == "prose" else 1.0)
    probs = [p * q for p in RANK_PROB]
    if cfg.algorithm == "DDTREE":
        return 1.0 + _tree_expected_accept(
            probs, budget=cfg.ddtree_budget, topk=cfg.ddtree_topk, depth=cfg.block_size
        )
    if cfg.algorithm == "DFLASH":
        return 1.0 + _tree_expected_accept(probs, budget=cfg.block_size, topk=1, depth=cfg.block_size)
    # Other algorithms are outside this model's calibration; give them a plain, weaker chain.
    weaker = [p * 0.85 for p in probs]
    return 1.0 + _tree_expected_accept(weaker, budget=cfg.block_size, topk=1, depth=cfg.block_size)


def cuda_graph_max_bs(cfg: ServerConfig) -> int:
    """Largest batch captured in CUDA graphs, limited by memory left outside the static fraction."""
    spare = _spare_gb(cfg) - cfg.max_running_requests * _tree_buffer_gb(cfg)
    per_bs = GRAPH_GB_PER_BS * verify_width(cfg)
    return max(0, min(cfg.max_running_requests, int(spare / per_bs)))


def step_time_s(cfg: ServerConfig, *, running: int, context_tokens: int) -> float:
    """Wall time of one engine step with ``running`` requests of ``context_tokens`` context each."""
    n = max(1, running)
    width = verify_width(cfg)
    overhead = SCHED_OVERHEAD_S / math.sqrt(max(1, cfg.num_continuous_decode_steps))
    verified = n * width
    # Kimi K2.6 is a MoE: a verify pass reads every expert that any verified token routes to, so wider
    # trees cost memory traffic even at one stream; at high concurrency all experts are read anyway and
    # the per-token compute dominates.
    experts_touched = 1.0 - (1.0 - EXPERTS_PER_TOKEN / NUM_EXPERTS) ** verified
    tp_scale = (8 / max(1, cfg.tp_size)) ** 0.8
    verify = tp_scale * (DENSE_READ_S + EXPERT_READ_S * experts_touched) + VERIFY_TOKEN_S * verified
    draft = 0.0
    if cfg.algorithm is not None:
        draft = DRAFT_BASE_S + DRAFT_TOKEN_S * n * cfg.block_size
    if cfg.algorithm == "DDTREE":
        # Tree construction: per-node top-k kernels (launch-bound), growing slowly with the batch.
        draft += TREE_NODE_S * cfg.ddtree_budget * cfg.ddtree_topk**1.5 * (1 + n / 16)
    attention = (
        n * (REQ_OVERHEAD_S + ATTN_TOKEN_S * context_tokens) + VERIFY_ATTN_S * verified * context_tokens
    )
    t = overhead + verify + draft + attention
    if n > cuda_graph_max_bs(cfg):
        t *= EAGER_PENALTY
    return t


def decode_tok_s(cfg: ServerConfig, *, concurrency: int, context_tokens: int, workload: str = "code") -> float:
    """Noise-free decode speed of one stream with ``concurrency`` streams offered.

    Streams beyond ``--max-running-requests`` queue, so a stream's *average* pace is scaled by the share of
    time it runs (``max_running_requests / concurrency``).
    """
    running = min(concurrency, cfg.max_running_requests)
    per_running = acceptance_length(cfg, context_tokens=context_tokens, workload=workload) / step_time_s(
        cfg, running=running, context_tokens=context_tokens
    )
    return per_running * running / max(1, concurrency)


def aggregate_tok_s(cfg: ServerConfig, *, concurrency: int, context_tokens: int, workload: str = "code") -> float:
    """Noise-free total decode throughput with ``concurrency`` streams offered (0 if the config fails)."""
    if startup_failure(cfg) is not None:
        return 0.0
    if min(concurrency, cfg.max_running_requests) > max_concurrent_requests(
        cfg, context_tokens=context_tokens
    ):
        return 0.0
    return decode_tok_s(cfg, concurrency=concurrency, context_tokens=context_tokens, workload=workload) * concurrency


def _spare_gb(cfg: ServerConfig) -> float:
    return (1.0 - cfg.mem_fraction_static) * GPU_MEMORY_GB - ACTIVATIONS_GB


def _tree_buffer_gb(cfg: ServerConfig) -> float:
    fan_out = cfg.ddtree_topk if cfg.algorithm == "DDTREE" else 1
    return TREE_BUFFER_GB * verify_width(cfg) * fan_out


def kv_pool_gb(cfg: ServerConfig) -> float:
    """KV-cache pool per GPU: the static fraction minus the weights (may be <= 0)."""
    return cfg.mem_fraction_static * GPU_MEMORY_GB - WEIGHTS_GB * 8 / max(1, cfg.tp_size)


def request_memory_gb(cfg: ServerConfig, *, context_tokens: int) -> float:
    """KV-pool memory one running request needs at ``context_tokens`` of context."""
    mem = KV_TARGET_GB_PER_TOKEN * context_tokens
    if cfg.is_dflash_family:
        drafted = context_tokens if cfg.draft_window is None else min(context_tokens, cfg.draft_window)
        mem += KV_DRAFT_GB_PER_TOKEN * drafted
        mem += _tree_buffer_gb(cfg) * 0.5  # tree KV of the verify pass lives in the pool too
    return mem


def startup_failure(cfg: ServerConfig) -> str | None:
    """Why the server fails at startup (the exception line it prints), or ``None`` if it starts."""
    if cfg.is_dflash_family and cfg.draft_window is not None and cfg.draft_window < cfg.block_size:
        return (
            "AssertionError: speculative_dflash_draft_window_size "
            f"({cfg.draft_window}) must be >= block size ({cfg.block_size})"
        )
    pool = kv_pool_gb(cfg)
    if pool <= 0.05:
        return (
            "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. "
            f"(kv pool {pool:.2f} GB)"
        )
    spare = _spare_gb(cfg)
    need = cfg.max_running_requests * _tree_buffer_gb(cfg)
    if need > spare:
        tried = need - max(0.0, spare) + 0.5
        free = max(0.0, spare) + ACTIVATIONS_GB * 0.1
        return (
            f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {tried:.2f} GiB. "
            f"GPU 0 has a total capacity of 94.97 GiB of which {free:.2f} GiB is free."
        )
    return None


def max_concurrent_requests(cfg: ServerConfig, *, context_tokens: int) -> int:
    """How many requests of ``context_tokens`` context can run at once before the server dies of OOM."""
    per_req = request_memory_gb(cfg, context_tokens=context_tokens)
    return max(0, int(kv_pool_gb(cfg) / per_req))


def corrupts_code(cfg: ServerConfig) -> bool:
    """Whether the config hits the simulated buggy kernel path (wrong code answers)."""
    return (
        cfg.algorithm == "DDTREE"
        and cfg.ddtree_topk >= CORRUPT_MIN_TOPK
        and cfg.ddtree_budget >= CORRUPT_MIN_BUDGET
    )


def capture_seconds(cfg: ServerConfig, *, load_time: float) -> float:
    """Modelled CUDA-graph capture time; wider verify graphs and more batch sizes take longer."""
    bs = max(1, cuda_graph_max_bs(cfg))
    return load_time * (0.06 + 0.01 * verify_width(cfg) * (0.5 + bs / 128))


def startup_seconds(cfg: ServerConfig, *, load_time: float) -> float:
    """Modelled time from launch to ready: weight load + CUDA-graph capture (unscaled)."""
    return load_time + capture_seconds(cfg, load_time=load_time)
