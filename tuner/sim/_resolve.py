"""SGLang's checks and defaults after parsing (``ServerArgs`` resolution), for the flags the model reads.

Followed from SGLang 0.5.23's ``srt/arg_groups/speculative_hook.py`` (``handle_speculative_decoding``,
``_handle_dflash``) and, for DDTREE, the DDTree branch of PR #29907: the same order, the same messages. An
argument SGLang rejects raises :class:`ServerArgsError` (printed as ``ValueError: ...`` with its traceback, exit
status 1, before any weight loads); what SGLang only warns about is appended to ``resolution_warnings``.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping

__all__ = ["ServerArgsError", "resolve_server_args"]

#: Algorithms whose drafter honours ``--speculative-draft-window-size``.
_WINDOW_ALGORITHMS = ("EAGLE", "EAGLE3", "DFLASH", "DDTREE")
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
    algorithm = args.speculative_algorithm.upper()
    args.speculative_algorithm = "EAGLE" if algorithm == "NEXTN" else algorithm
    window = args.speculative_draft_window_size
    if window is not None:
        if window <= 0:
            raise ServerArgsError(f"--speculative-draft-window-size must be positive, got {window}.")
        if args.speculative_algorithm not in _WINDOW_ALGORITHMS:
            _warn(
                args,
                "--speculative-draft-window-size has no effect with speculative_algorithm="
                f"{args.speculative_algorithm} (honored by DFLASH, Llama EAGLE-3, and the EAGLE/MTP/NEXTN "
                "draft-decode path on the Triton/FlashInfer draft backends).",
            )
    if args.speculative_algorithm not in args.sglang_version.algorithms:
        raise ServerArgsError(f"Unknown speculative algorithm name: {args.speculative_algorithm}")
    if args.speculative_algorithm in _DFLASH_FAMILY:
        _dflash(args)
    if args.speculative_algorithm == "DDTREE":
        _ddtree(args)


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
    if args.speculative_num_draft_tokens is None:
        args.speculative_num_draft_tokens = args.sim_drafter_block_size  # the drafter's config.json block_size
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
    """The DDTree branch's checks: page size 1, and the non-overlap worker."""
    page = 1 if args.page_size is None else args.page_size
    if page != 1:
        raise ServerArgsError(f"DDTREE currently supports only page_size == 1. Got page_size={page}.")
    args.disable_overlap_schedule = True


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
