"""Noise-free performance and failure model of the simulated DFlash/DDTree SGLang server.

Everything the simulator does is derived from the pure functions below (and the batch scheduler of
:mod:`tuner.sim._scheduler`), so tests and benchmarks import them as ground truth. The model describes Kimi K2.6 on
8x RTX PRO 6000 (96 GB each) served by SGLang with DFLASH, or DDTREE on the DDTree branch of PR #29907 (on
0.5.15.post1); it is the same for mainline 0.5.23, whose differences (command line, log lines, request checks) are
the simulator's, not the model's. It is calibrated to the figures of the seed session: the best single-stream
short-context decode is ~170 tok/s, and DDTREE budget=12, top-k cap 6, window=2048, block=8 gives ~149 tok/s with a mean
acceptance length of ~4.8.

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
A DFlash block of ``block_size`` tokens holds the last accepted token and ``block_size - 1`` drafted positions.
The drafter proposes, for every drafted position, a ranked list of candidates; the rank-``i`` candidate at
depth ``d`` is the true token with probability ``RANK_PROB[i] * POSITION_DECAY**(d-1) * quality``.
DFLASH verifies the top-1 chain of the block. DDTREE (``dflash`` worker + ``build_ddtree_tree``) spends a node
``budget`` (``--speculative-ddtree-budget``, unset = ``block_size - 1``) on a best-first tree of depth at most
``block_size - 1``, each node having at most ``min(max(budget // (block_size - 1) + 1, 2), vocab,
SGLANG_DDTREE_MAX_TOPK)`` children (:attr:`ServerConfig.effective_topk`): the cap only matters once ``budget >=
cap x (block_size - 1)``, and ``budget <= block_size - 1`` is a plain chain (the branch's spine fast path).
The expected accepted length is 1 (bonus) + the sum of the selected nodes' path probabilities, so acceptance
rises with budget and block size and saturates.

``quality`` depends on the drafter's view of the context: the drafter was trained on a 2048-token window, so it
degrades when it sees more than 2048 tokens (no window, or a 4096 window, on long contexts) and when a window
truncates the context below ~2048 tokens (512 hurts). It also drops when ``block_size`` differs from the block
the drafter was trained with (its ``config.json`` ``block_size``; SGLang only warns): a little per halving
below it, much more for positions beyond it.

Workload (``workload``)
-----------------------
What is generated matters as much as the tree: code (and copy-heavy text) is predictable, prose much less so.
The calibration above is the seed's coding workload (``workload="code"``, the default). For ``"prose"`` every
candidate's probability is scaled by ``PROSE_QUALITY``: at the seed config acceptance falls from ~4.8 to ~3.1.
The HTTP simulator picks the workload per request from its text (:func:`workload_kind`).

Step time (``step_time_s``)
---------------------------
One step = scheduler overhead (amortised by ``--num-continuous-decode-steps``; DFLASH hides part of it behind the
overlap scheduler, which DDTREE turns off) + drafter forward (grows with block size and batch) + DDTREE's host-side
tree construction (budget x effective top-k heap work and a (budget + 1)^2 attention mask per request) + per-request
attention + target verify. The verify pass processes ``running x verify_width`` tokens (width = ``max(block_size,
budget + 1)`` for DDTREE, block size for DFLASH). The target is a MoE: at one stream a wider verify touches more
experts (more weight traffic, the cost that bounds useful tree size); at high concurrency every expert is read
anyway and per-token compute dominates, so big trees are expensive. Batches larger than the CUDA graphs captured at
start-up run without graphs, ``EAGER_PENALTY`` times slower.

Memory (``startup_failure``, ``kv_pool_gb``, ``request_memory_gb``)
--------------------------------------------------------------------
Per GPU: 96 GB. ``mem_fraction_static`` x 96 GB holds the weights (66 GB) and the KV pool (the rest); a pool
that is empty fails at start-up ("Not enough memory"). The remaining memory holds activations (5 GB) and the
verify CUDA graphs, captured for every batch size up to ``--cuda-graph-max-bs-decode`` (default: the running
limit) at ``verify_width`` tokens per request. Capture does not shrink to fit: graphs that do not fit fail the
start-up with an out-of-memory error. Under load every running request needs target KV for its context plus
drafter KV for ``min(context, window)``; when the running requests outgrow the pool SGLang's scheduler retracts
requests ("KV cache pool is full. Retract requests.") and re-runs them later: slower, never a crash
(:mod:`tuner.sim._scheduler`).

Correctness (``corrupts_code``)
-------------------------------
A simulated "buggy kernel path": DDTREE with ``SGLANG_DDTREE_MAX_TOPK >= 9``, budget >= 24 and trees at least 3
wide (effective top-k) accepts wrong tokens, so code answers come out subtly wrong. It is ~5% of the demo's DDTREE
configs, some of them within ~3% of the optimum (their correct twins have a lower cap): speed alone cannot tell them
apart, only the correctness gate can.
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
    "capture_gb",
    "capture_seconds",
    "corrupts_code",
    "cuda_graph_max_bs",
    "decode_tok_s",
    "kv_pool_gb",
    "kv_pool_tokens",
    "max_concurrent_requests",
    "max_input_tokens",
    "request_memory_gb",
    "startup_failure",
    "startup_seconds",
    "step_time_s",
    "verify_width",
    "warmup_seconds",
    "workload_kind",
]

# --- acceptance -------------------------------------------------------------------------------------------
#: P(true token is the rank-i candidate) at the first drafted position, before context-quality scaling.
RANK_PROB = (0.845, 0.135, 0.011, 0.004, 0.002, 0.001, 0.0006, 0.0003, 0.0002, 0.0001)
#: Multiplicative loss of drafter accuracy per position inside a block (diffusion drafts degrade along it).
POSITION_DECAY = 0.99
#: The DFlash drafter's training window (tokens).
TRAINING_WINDOW = 2048
#: Quality lost per halving of the block below the drafter's trained block size.
SHORT_BLOCK_LOSS = 0.025
#: Candidate probabilities at positions beyond the trained block (the drafter never learned them).
UNTRAINED_POSITION_QUALITY = 0.5
#: SGLang's fallback when the drafter's config has no ``block_size``.
DEFAULT_BLOCK_SIZE = 16

# --- step time (seconds) ----------------------------------------------------------------------------------
SCHED_OVERHEAD_S = 0.0030
OVERLAP_HIDDEN = 0.35  # share of the scheduler overhead the overlap scheduler hides (DFLASH; DDTREE turns it off)
DENSE_READ_S = 0.0210  # attention/shared weights + TP all-reduces: paid once per step
EXPERT_READ_S = 0.0150  # reading every routed expert's weights once
NUM_EXPERTS = 384
EXPERTS_PER_TOKEN = 8
VERIFY_TOKEN_S = 0.00005  # compute per verified token (dominates once the batch is large)
DRAFT_BASE_S = 0.0025
DRAFT_TOKEN_S = 0.00001  # drafter compute per drafted position per request
TREE_NODE_S = 0.00001  # DDTREE tree construction per node x top-k (host-side best-first heap)
TREE_MASK_S = 1.5e-6  # DDTREE tree-attention mask per (budget + 1)**2 entries, built on the host per request
REQ_OVERHEAD_S = 0.0003  # per running request: sampling, KV bookkeeping, detokenisation
ATTN_TOKEN_S = 5.0e-7  # decode attention, per context token per running request
VERIFY_ATTN_S = 1.5e-8  # tree attention, per verified token per context token
EAGER_PENALTY = 1.8  # batches larger than the captured CUDA graphs run without graphs

# --- memory (GB per GPU) ----------------------------------------------------------------------------------
GPU_MEMORY_GB = 96.0
GPU_CAPACITY_GIB = 94.97  # what torch reports for a 96 GB card
WEIGHTS_GB = 66.0
ACTIVATIONS_GB = 5.0
GRAPH_GB_PER_TOKEN = 0.002  # verify CUDA graphs: per captured batch size per verify-width token
KV_TARGET_GB_PER_TOKEN = 60e-6  # MLA latent KV, replicated across TP ranks
KV_DRAFT_GB_PER_TOKEN = 18e-6
#: SGLang's default decode ``max_bs`` on a 96 GB GPU with tp >= 4, clamped to the running limit when not given.
DEFAULT_GRAPH_MAX_BS = 512

#: Warm-up after the port opens, as a share of the weight-load time.
WARMUP_SHARE = 0.05

# --- correctness ------------------------------------------------------------------------------------------
CORRUPT_MIN_TOPK = 9
CORRUPT_MIN_BUDGET = 24
CORRUPT_MIN_WIDTH = 3


@dataclass(frozen=True, kw_only=True)
class ServerConfig:
    """The launch configuration that matters to the model: the server's arguments after SGLang resolved them."""

    algorithm: str | None = "DDTREE"
    block_size: int = DEFAULT_BLOCK_SIZE
    """``speculative_num_draft_tokens`` after resolution (DFLASH family: the block size)."""
    drafter_block_size: int = DEFAULT_BLOCK_SIZE
    """The block size the drafter was trained with (its ``config.json``)."""
    ddtree_budget: int | None = None
    """``--speculative-ddtree-budget``; None: ``block_size - 1`` (a plain chain)."""
    ddtree_topk: int = 6
    """``SGLANG_DDTREE_MAX_TOPK``: the cap on the tree's fan-out (see :attr:`effective_topk`)."""
    draft_window: int | None = None
    max_running_requests: int = 64
    mem_fraction_static: float = 0.85
    context_length: int = 32768
    num_continuous_decode_steps: int = 1
    page_size: int = 1
    tp_size: int = 8
    cuda_graph_max_bs: int | None = None
    """``--cuda-graph-max-bs-decode``; None: SGLang's default (the running limit)."""
    crash_above_tokens: int | None = None
    """Fault injection (``--sim-crash-above-batch-tokens``): the scheduler dies when a batch holds more KV."""

    @classmethod
    def from_namespace(cls, args: argparse.Namespace) -> ServerConfig:
        """Build a config from parsed and resolved server arguments (:func:`tuner.sim.parse_server_args`)."""
        return cls(
            algorithm=args.speculative_algorithm,
            block_size=args.speculative_num_draft_tokens or args.speculative_dflash_block_size or DEFAULT_BLOCK_SIZE,
            drafter_block_size=args.sim_drafter_block_size or DEFAULT_BLOCK_SIZE,
            ddtree_budget=getattr(args, "sim_budget_given", args.speculative_ddtree_budget),
            ddtree_topk=args.ddtree_max_topk,
            draft_window=args.speculative_draft_window_size,
            max_running_requests=args.max_running_requests,
            mem_fraction_static=args.mem_fraction_static,
            context_length=args.context_length,
            num_continuous_decode_steps=args.num_continuous_decode_steps,
            page_size=args.page_size,
            tp_size=args.tp_size,
            cuda_graph_max_bs=args.cuda_graph_max_bs_decode,
            crash_above_tokens=args.sim_crash_above_batch_tokens,
        )

    @classmethod
    def from_argv(cls, argv: Sequence[str], env: Mapping[str, str] | None = None) -> ServerConfig:
        """Parse and resolve a server command line (without the program name) exactly as the simulator does.

        Exits like the real parser (status 2) on a flag its version does not have; raises
        :class:`tuner.sim.ServerArgsError` where SGLang rejects the arguments after parsing.
        """
        args = parse_server_args(argv, os.environ if env is None else env)
        return cls.from_namespace(args)

    @property
    def is_dflash_family(self) -> bool:
        return self.algorithm in ("DFLASH", "DDTREE")

    @property
    def depth(self) -> int:
        """Drafted positions per block (the block's first slot holds the last accepted token)."""
        return max(1, self.block_size - 1)

    @property
    def budget(self) -> int:
        """The DDTree node budget in effect (unset: one node per drafted position)."""
        return self.depth if self.ddtree_budget is None else self.ddtree_budget

    @property
    def effective_topk(self) -> int:
        """Children per DDTree node: ``min(max(budget // depth + 1, 2), SGLANG_DDTREE_MAX_TOPK)``, 1 on a chain."""
        if self.algorithm != "DDTREE" or self.budget <= self.depth:
            return 1
        return max(1, min(max(self.budget // self.depth + 1, 2), self.ddtree_topk))


def verify_width(cfg: ServerConfig) -> int:
    """Tokens the target verifies per request per step (the verify CUDA graph's tokens per request)."""
    if cfg.algorithm == "DDTREE":
        return max(cfg.block_size, cfg.budget + 1)
    if cfg.algorithm is None:
        return 1
    return cfg.block_size


def _drafter_quality(cfg: ServerConfig, context_tokens: int) -> float:
    seen = context_tokens if cfg.draft_window is None else min(context_tokens, cfg.draft_window)
    quality = 1.0
    if seen > TRAINING_WINDOW:
        # Beyond its training window the drafter's attention drifts.
        quality -= 0.045 * math.log2(seen / TRAINING_WINDOW)
    if cfg.draft_window is not None and context_tokens > cfg.draft_window and cfg.draft_window < TRAINING_WINDOW:
        # A window narrower than the training window hides context the drafter learned to use.
        quality -= 0.035 * math.log2(TRAINING_WINDOW / cfg.draft_window)
    if cfg.block_size < cfg.drafter_block_size:
        # Fewer mask slots than in training: each position sees a block shape it was not trained on.
        quality -= SHORT_BLOCK_LOSS * math.log2(cfg.drafter_block_size / cfg.block_size)
    return max(0.5, quality)


def _expected_accepted(probs: Sequence[Sequence[float]], *, budget: int, topk: int) -> float:
    """Best-first tree over ``probs[depth][rank]``: the path probabilities of the ``budget`` best nodes.

    A node's children are the candidates of the next position; its siblings the next ranks of its own
    position, at most ``topk`` of them. ``topk == 1`` is the top-1 chain.
    """
    depth = len(probs)
    if budget <= 0 or depth <= 0:
        return 0.0
    k = max(1, min(topk, len(probs[0])))
    # Heap of candidate nodes: (-path_prob, depth index, rank, parent_path_prob).
    heap: list[tuple[float, int, int, float]] = [(-probs[0][0], 0, 0, 1.0)]
    total = 0.0
    taken = 0
    while heap and taken < budget:
        neg_p, d, rank, parent_p = heapq.heappop(heap)
        p = -neg_p
        total += p
        taken += 1
        if rank + 1 < k:  # next sibling becomes a candidate
            heapq.heappush(heap, (-parent_p * probs[d][rank + 1], d, rank + 1, parent_p))
        if d + 1 < depth:  # first child becomes a candidate
            heapq.heappush(heap, (-p * probs[d + 1][0], d + 1, 0, p))
    return total


def _position_probs(cfg: ServerConfig, quality: float) -> list[list[float]]:
    rows = []
    for d in range(cfg.depth):
        scale = quality * POSITION_DECAY**d
        if d + 1 >= cfg.drafter_block_size:  # the drafter was never trained to fill this slot
            scale *= UNTRAINED_POSITION_QUALITY
        rows.append([p * scale for p in RANK_PROB])
    return rows


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
    if cfg.algorithm == "DDTREE":
        return 1.0 + _expected_accepted(_position_probs(cfg, q), budget=cfg.budget, topk=cfg.effective_topk)
    if cfg.algorithm == "DFLASH":
        return 1.0 + _expected_accepted(_position_probs(cfg, q), budget=cfg.depth, topk=1)
    # Other algorithms are outside this model's calibration; give them a plain, weaker chain.
    return 1.0 + _expected_accepted(_position_probs(cfg, q * 0.85), budget=cfg.depth, topk=1)


def cuda_graph_max_bs(cfg: ServerConfig) -> int:
    """Largest batch the verify CUDA graphs are captured for (SGLang never shrinks it to fit memory)."""
    wanted = DEFAULT_GRAPH_MAX_BS if cfg.cuda_graph_max_bs is None else cfg.cuda_graph_max_bs
    return max(1, min(wanted, cfg.max_running_requests))


def capture_gb(cfg: ServerConfig) -> float:
    """Memory the verify CUDA graphs take per GPU (outside the static fraction)."""
    return GRAPH_GB_PER_TOKEN * cuda_graph_max_bs(cfg) * verify_width(cfg)


def step_time_s(cfg: ServerConfig, *, running: int, context_tokens: int) -> float:
    """Wall time of one engine step with ``running`` requests of ``context_tokens`` context each."""
    n = max(1, running)
    width = verify_width(cfg)
    overhead = SCHED_OVERHEAD_S / math.sqrt(max(1, cfg.num_continuous_decode_steps))
    if cfg.algorithm != "DDTREE":
        overhead *= 1.0 - OVERLAP_HIDDEN
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
        # Host-side tree construction (a best-first heap per request) and its (budget+1)^2 attention mask,
        # paid serially because DDTREE runs without the overlap scheduler; partly batched across requests.
        tree = TREE_NODE_S * cfg.budget * cfg.effective_topk + TREE_MASK_S * (cfg.budget + 1) ** 2
        draft += tree * (1 + n / 16)
    attention = n * (REQ_OVERHEAD_S + ATTN_TOKEN_S * context_tokens) + VERIFY_ATTN_S * verified * context_tokens
    t = overhead + verify + draft + attention
    if n > cuda_graph_max_bs(cfg):
        t *= EAGER_PENALTY
    return t


def decode_tok_s(cfg: ServerConfig, *, concurrency: int, context_tokens: int, workload: str = "code") -> float:
    """Noise-free steady decode speed of one stream with ``concurrency`` streams offered.

    Streams beyond ``--max-running-requests`` (or beyond what the KV pool holds at ``context_tokens``) queue, so
    a stream's *average* pace is scaled by the share of time it runs. Retraction costs are not in this figure
    (the scheduler's :func:`tuner.sim.simulate_scenario` has them).
    """
    running = max(
        1, min(concurrency, cfg.max_running_requests, max_concurrent_requests(cfg, context_tokens=context_tokens))
    )
    per_running = acceptance_length(cfg, context_tokens=context_tokens, workload=workload) / step_time_s(
        cfg, running=running, context_tokens=context_tokens
    )
    return per_running * min(running, concurrency) / max(1, concurrency)


def aggregate_tok_s(cfg: ServerConfig, *, concurrency: int, context_tokens: int, workload: str = "code") -> float:
    """Noise-free total decode throughput with ``concurrency`` streams offered (0 if the config fails to start)."""
    if startup_failure(cfg) is not None:
        return 0.0
    return decode_tok_s(cfg, concurrency=concurrency, context_tokens=context_tokens, workload=workload) * concurrency


def _spare_gb(cfg: ServerConfig) -> float:
    return (1.0 - cfg.mem_fraction_static) * GPU_MEMORY_GB - ACTIVATIONS_GB


def kv_pool_gb(cfg: ServerConfig) -> float:
    """KV-cache pool per GPU: the static fraction minus the weights (may be <= 0)."""
    return cfg.mem_fraction_static * GPU_MEMORY_GB - WEIGHTS_GB * 8 / max(1, cfg.tp_size)


def request_memory_gb(cfg: ServerConfig, *, context_tokens: int) -> float:
    """KV-pool memory one running request needs at ``context_tokens`` of context."""
    mem = KV_TARGET_GB_PER_TOKEN * context_tokens
    if cfg.is_dflash_family:
        drafted = context_tokens if cfg.draft_window is None else min(context_tokens, cfg.draft_window)
        mem += KV_DRAFT_GB_PER_TOKEN * drafted
    return mem


def kv_pool_tokens(cfg: ServerConfig) -> int:
    """The pool's size in tokens, as SGLang logs it (``#tokens``) at start-up."""
    per_token = KV_TARGET_GB_PER_TOKEN + (KV_DRAFT_GB_PER_TOKEN if cfg.is_dflash_family else 0.0)
    return max(0, int(kv_pool_gb(cfg) / per_token))


def max_input_tokens(cfg: ServerConfig) -> int:
    """SGLang's ``max_req_input_len``: a longer prompt is refused (the pool, or the context, cannot hold it)."""
    return min(cfg.context_length - 1, kv_pool_tokens(cfg) - 1) - 5


def startup_failure(cfg: ServerConfig) -> str | None:
    """Why the server fails at start-up for lack of memory (the exception line it prints), or ``None``.

    Argument errors (SGLang's ``ServerArgs`` checks) are the parser's: :func:`tuner.sim.parse_server_args`.
    """
    pool = kv_pool_gb(cfg)
    if pool <= 0.05:
        return (
            "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. "
            f"Current value: mem_fraction_static={cfg.mem_fraction_static}"
        )
    spare = _spare_gb(cfg)
    need = capture_gb(cfg)
    if need > spare:
        free = max(0.0, spare) + ACTIVATIONS_GB * 0.1
        return (
            "Exception: Capture cuda graph failed: CUDA out of memory. Tried to allocate "
            f"{need - max(0.0, spare) + 0.5:.2f} GiB. GPU 0 has a total capacity of {GPU_CAPACITY_GIB:.2f} GiB "
            f"of which {free:.2f} GiB is free."
        )
    return None


def max_concurrent_requests(cfg: ServerConfig, *, context_tokens: int) -> int:
    """How many requests of ``context_tokens`` context the KV pool holds at once."""
    per_req = request_memory_gb(cfg, context_tokens=context_tokens)
    return max(0, int(kv_pool_gb(cfg) / per_req)) if per_req > 0 else cfg.max_running_requests


def corrupts_code(cfg: ServerConfig) -> bool:
    """Whether the config hits the simulated buggy kernel path (wrong code answers)."""
    return (
        cfg.algorithm == "DDTREE"
        and cfg.ddtree_topk >= CORRUPT_MIN_TOPK
        and cfg.budget >= CORRUPT_MIN_BUDGET
        and cfg.effective_topk >= CORRUPT_MIN_WIDTH
    )


def capture_seconds(cfg: ServerConfig, *, load_time: float) -> float:
    """Modelled CUDA-graph capture time; wider verify graphs and more batch sizes take longer."""
    bs = cuda_graph_max_bs(cfg)
    return load_time * (0.06 + 0.01 * verify_width(cfg) * (0.5 + bs / 128))


def warmup_seconds(*, load_time: float) -> float:
    """Modelled warm-up (the first generate request, its kernels compiled on first use) after the port opens."""
    return WARMUP_SHARE * load_time


def startup_seconds(cfg: ServerConfig, *, load_time: float) -> float:
    """Modelled time from launch to ready: weight load + CUDA-graph capture + warm-up (unscaled)."""
    return load_time + capture_seconds(cfg, load_time=load_time) + warmup_seconds(load_time=load_time)
