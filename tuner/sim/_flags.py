"""Each emulated SGLang version's flag table, as the simulator's parser needs it.

Interim: the flags the simulator's studies and tests use, by hand. Replaced by the committed tables read from
SGLang's own code once they exist.
"""

from __future__ import annotations

from dataclasses import dataclass

from tuner.sim._versions import SGLangVersion

__all__ = ["FlagSpec", "version_flags"]


@dataclass(frozen=True, kw_only=True)
class FlagSpec:
    """One command-line flag: its spellings, destination and shape."""

    names: tuple[str, ...]
    dest: str
    kind: str = "value"
    """``value`` (one argument), ``switch`` (``store_true``) or ``list`` (``nargs``)."""
    nargs: str | None = None
    hidden: bool = False
    help: str | None = None


def _v(*names: str, dest: str | None = None, hidden: bool = False) -> FlagSpec:
    return FlagSpec(names=names, dest=dest or names[0].lstrip("-").replace("-", "_"), hidden=hidden)


def _s(*names: str) -> FlagSpec:
    return FlagSpec(names=names, dest=names[0].lstrip("-").replace("-", "_"), kind="switch")


_COMMON = (
    _v("--model-path", "--model"),
    _v("--served-model-name"),
    _v("--host"),
    _v("--port"),
    _v("--tp-size", "--tp"),
    _v("--pp-size", "--pp"),
    _v("--mem-fraction-static"),
    _v("--context-length"),
    _v("--max-running-requests"),
    _v("--page-size"),
    _v("--num-continuous-decode-steps"),
    _v("--decode-log-interval"),
    _v("--attention-backend"),
    _s("--trust-remote-code"),
    _v("--grammar-backend"),
    _v("--speculative-algorithm"),
    _v("--speculative-draft-model-path", "--speculative-draft-model"),
    _v("--speculative-num-steps"),
    _v("--speculative-eagle-topk"),
    _v("--speculative-num-draft-tokens"),
    _v("--speculative-dflash-block-size"),
    _v("--speculative-draft-window-size"),
    _v("--speculative-draft-attention-backend"),
    _v("--speculative-draft-kv-cache-dtype"),
    _s("--enable-metrics"),
    _s("--disable-overlap-schedule"),
    _v("--cuda-graph-max-bs-decode"),
    _v("--cuda-graph-max-bs-prefill"),
    _v("--log-level"),
)


def version_flags(version: SGLangVersion) -> tuple[FlagSpec, ...]:
    """The flags ``version``'s parser accepts."""
    if not version.has_ddtree:
        return _COMMON
    return (
        *_COMMON,
        _v("--speculative-ddtree-budget"),
        _v("--speculative-dflash-draft-window-size", dest="speculative_draft_window_size", hidden=True),
    )
