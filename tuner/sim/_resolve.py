"""SGLang's checks and defaults after parsing (``ServerArgs`` resolution), for the flags the model reads.

Followed from ``srt/arg_groups/speculative_hook.py`` (``handle_speculative_decoding``, ``_handle_dflash``) of
SGLang 0.5.23 and 0.5.15.post1, and the ``_handle_ddtree`` that the DDTree branch (PR #29907) adds to the latter:
the same order, the same messages (each is in the version's flag table, :attr:`FlagTable.messages`). An argument
SGLang rejects raises :class:`ServerArgsError` (printed as ``ValueError: ...`` with its traceback, exit status 1,
before any weight loads); what SGLang only logs is appended to ``resolution_warnings``.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping

__all__ = ["ServerArgsError", "resolve_server_args"]

_DFLASH_FAMILY = ("DFLASH", "DDTREE")
#: What the simulator runs when neither SGLang nor the command line sets a running limit.
_DEFAULT_MAX_RUNNING = 64


class ServerArgsError(ValueError):
    """A launch configuration SGLang rejects after parsing; ``str()`` is SGLang's message."""


# Tracebacks name it as SGLang's own raise does: ``ValueError: ...``.
ServerArgsError.__module__ = "builtins"
ServerArgsError.__qualname__ = "ValueError"


def resolve_server_args(args: argparse.Namespace, env: Mapping[str, str], *, topk_env: str, default_topk: int) -> None:
    """Resolve ``args`` in place, as SGLang's ``ServerArgs`` does (see the module docstring)."""
    args.resolution_warnings = []
    _speculative(args)
    if args.page_size is None:
        args.page_size = 1
    if args.max_running_requests is None:
        args.max_running_requests = _DEFAULT_MAX_RUNNING
    args.ddtree_max_topk = _ddtree_topk(args, env, topk_env=topk_env, default=default_topk)


def _warn(args: argparse.Namespace, message: str) -> None:
    args.resolution_warnings.append(message)


def _speculative(args: argparse.Namespace) -> None:
    if args.speculative_algorithm is None:
        return
    version = args.sglang_version
    name = args.speculative_algorithm.upper()
    args.speculative_algorithm = version.canonical_algorithm(name) or name  # NEXTN is EAGLE
    _window(args)
    if version.canonical_algorithm(name) is None:
        raise ServerArgsError(f"Unknown speculative algorithm name: {args.speculative_algorithm}")
    if args.speculative_algorithm in _DFLASH_FAMILY:
        _dflash(args)
    if args.speculative_algorithm == "DDTREE":
        _ddtree(args)


def _window(args: argparse.Namespace) -> None:
    """``--speculative-draft-window-size`` is checked once, whatever the algorithm."""
    window = args.speculative_draft_window_size
    if window is None:
        return
    if window <= 0:
        raise ServerArgsError(f"--speculative-draft-window-size must be positive, got {window}.")
    honoured = ("EAGLE", "EAGLE3", "DFLASH") if args.sglang_version.log_era == "0.5.23" else ("EAGLE3", "DFLASH")
    algorithm = args.speculative_algorithm
    if algorithm not in honoured and algorithm != "DDTREE":  # DDTree drafts with the DFlash worker
        who = (
            "DFLASH, Llama EAGLE-3, and the EAGLE/MTP/NEXTN draft-decode path on the Triton/FlashInfer draft backends"
            if args.sglang_version.log_era == "0.5.23"
            else "Llama EAGLE-3 and DFLASH only"
        )
        _warn(
            args,
            f"--speculative-draft-window-size has no effect with speculative_algorithm={algorithm} (honored by {who}).",
        )


def _dflash(args: argparse.Namespace) -> None:
    """``_handle_dflash``: one step, top-1, the block size, the window, the running limit."""
    if args.pp_size != 1:
        raise ServerArgsError("Currently DFLASH speculative decoding only supports pp_size == 1.")
    if args.speculative_draft_model_path is None:
        raise ServerArgsError("DFLASH speculative decoding requires setting --speculative-draft-model-path.")
    for name in ("speculative_num_steps", "speculative_eagle_topk"):
        value = getattr(args, name)
        if value is not None and value != 1:
            _warn(args, f"DFLASH only supports {name} == 1; overriding {name}={value} to 1.")
        setattr(args, name, 1)
    block = args.speculative_dflash_block_size
    if block is not None:
        if block <= 0:
            raise ServerArgsError(f"DFLASH requires --speculative-dflash-block-size to be positive, got {block}.")
        drafts = args.speculative_num_draft_tokens
        if drafts is not None and drafts != block:
            raise ServerArgsError(
                "Both --speculative-num-draft-tokens and --speculative-dflash-block-size are set but they differ. "
                f"For DFLASH they must match. speculative_num_draft_tokens={drafts}, "
                f"speculative_dflash_block_size={block}."
            )
        args.speculative_num_draft_tokens = block
    if args.speculative_num_draft_tokens is None:  # the drafter's config.json block_size, else 16
        args.speculative_num_draft_tokens = args.sim_drafter_block_size or 16
        if not args.sim_drafter_block_size:
            _warn(args, "speculative_num_draft_tokens is not set; defaulting to 16 for DFLASH.")
    window = args.speculative_draft_window_size
    if window is not None and window < args.speculative_num_draft_tokens:
        raise ServerArgsError(
            "--speculative-draft-window-size must be >= --speculative-num-draft-tokens (block_size). "
            f"window_size={window}, block_size={args.speculative_num_draft_tokens}."
        )
    if args.max_running_requests is None:
        args.max_running_requests = 48
        _warn(
            args,
            "Max running requests is reset to 48 for speculative decoding. You can override this by "
            "explicitly setting --max-running-requests.",
        )


def _ddtree(args: argparse.Namespace) -> None:
    """The DDTree branch's ``_handle_ddtree``: the budget, rejection sampling, page size 1, the attention backend
    of a full tree, and the non-overlap worker."""
    drafts = args.speculative_num_draft_tokens
    args.sim_budget_given = args.speculative_ddtree_budget  # the model keeps "unset": one node per drafted position
    if args.speculative_ddtree_budget is None:
        args.speculative_ddtree_budget = drafts - 1
        _warn(
            args,
            f"Inferred speculative_ddtree_budget={drafts - 1} from speculative_num_draft_tokens={drafts} for DDTREE.",
        )
    elif args.speculative_ddtree_budget < 1:
        raise ServerArgsError(f"--speculative-ddtree-budget must be >= 1, got {args.speculative_ddtree_budget}.")
    if getattr(args, "speculative_use_rejection_sampling", False):
        raise ServerArgsError(
            "DDTREE does not support --speculative-use-rejection-sampling yet. Use the default target-only sampling "
            "path or disable DDTREE."
        )
    page = 1 if args.page_size is None else args.page_size
    if page != 1:
        raise ServerArgsError(f"DDTREE currently supports only page_size == 1. Got page_size={page}.")
    _ddtree_backend(args)
    args.disable_overlap_schedule = True


def _ddtree_backend(args: argparse.Namespace) -> None:
    """A full tree (budget above the block's drafted positions) verifies budget + 1 tokens: triton only.

    Only a backend the command line names is checked: what SGLang picks when none is named depends on the GPU.
    """
    if args.speculative_ddtree_budget <= args.speculative_num_draft_tokens - 1:
        return
    base = getattr(args, "attention_backend", None)
    prefill = getattr(args, "prefill_attention_backend", None) or base
    decode = getattr(args, "decode_attention_backend", None) or base
    if any(b not in (None, "triton") for b in (prefill, decode)):
        raise ServerArgsError(
            "DDTREE full-tree mode currently supports only the triton attention backend because it forwards "
            "tree_budget + 1 verify tokens per request. Please set --attention-backend triton, or use "
            "--speculative-ddtree-budget <= --speculative-num-draft-tokens - 1. "
            f"Got prefill_attention_backend={prefill!r}, decode_attention_backend={decode!r}."
        )


def _ddtree_topk(args: argparse.Namespace, env: Mapping[str, str], *, topk_env: str, default: int) -> int:
    """``SGLANG_DDTREE_MAX_TOPK`` as SGLang's ``EnvInt`` reads it: an invalid value warns and means the default.

    A cap below 1 makes the real branch crash on its first tree; the simulator refuses it at start-up instead.
    """
    raw = env.get(topk_env)
    if raw is None:
        return default
    try:
        topk = int(raw)
    except ValueError:
        _warn(args, f'Invalid value for {topk_env}: "{raw}" is not a valid integer value, using default "{default}"')
        return default
    if topk < 1 and args.speculative_algorithm == "DDTREE":
        raise ServerArgsError(f"{topk_env} must be >= 1, got {topk}")
    return topk
