"""The SGLang versions the simulator emulates, and what differs between them.

``--sim-sglang-version`` picks one (default: the DDTree branch, which the demo tunes):

* ``0.5.23``: mainline SGLang 0.5.23, read from its wheel on PyPI. No DDTREE (``--speculative-algorithm DDTREE``
  parses, then fails with ``ValueError: Unknown speculative algorithm name: DDTREE``).
* the DDTree branch of sgl-project/sglang PR #29907: mainline plus the ``DDTREE`` algorithm,
  ``--speculative-ddtree-budget`` and the ``SGLANG_DDTREE_*`` environment knobs.

Each version's command line is its flag table (:mod:`tuner.sim._args` builds the parser from it); this module
holds the rest: the speculative algorithms it knows, its start-up log lines and its error texts.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "DDTREE_BRANCH",
    "DEFAULT_VERSION",
    "MAINLINE",
    "VERSIONS",
    "SGLangVersion",
    "get_version",
]

_MAINLINE_ALGORITHMS = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM", "DFLASH", "DSPARK", "UNO")

#: The hint SGLang 0.5.23 appends to a failed decode/verify CUDA-graph capture
#: (``runner_backend_utils.CUDA_GRAPH_CAPTURE_FAILED_MSG``).
_CAPTURE_HINT = (
    "Possible solutions:\n"
    "1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)\n"
    "2. set --cuda-graph-max-bs-decode to a smaller value (e.g., 16)\n"
    "3. disable decode CUDA graph by --cuda-graph-backend-decode=disabled. "
    "(Not recommended. Huge performance loss)\n"
    "Open an issue on GitHub https://github.com/sgl-project/sglang/issues/new/choose \n"
)


@dataclass(frozen=True, kw_only=True)
class SGLangVersion:
    """One emulated SGLang build."""

    name: str
    """What ``--sim-sglang-version`` takes, ``--version`` prints and ``/server_info`` reports as ``version``."""
    title: str
    """How a person names it (log lines, docs)."""
    algorithms: tuple[str, ...]
    """``--speculative-algorithm`` values it knows (any other name fails after parsing)."""
    capture_hint: str = _CAPTURE_HINT

    @property
    def has_ddtree(self) -> bool:
        return "DDTREE" in self.algorithms


MAINLINE = SGLangVersion(name="0.5.23", title="SGLang 0.5.23", algorithms=_MAINLINE_ALGORITHMS)
DDTREE_BRANCH = SGLangVersion(
    name="0.5.23+ddtree",
    title="SGLang DDTree branch (PR #29907)",
    algorithms=(*_MAINLINE_ALGORITHMS, "DDTREE"),
)
VERSIONS = {v.name: v for v in (MAINLINE, DDTREE_BRANCH)}
DEFAULT_VERSION = DDTREE_BRANCH


def get_version(name: str) -> SGLangVersion:
    """The version called ``name`` (``KeyError`` for one the simulator does not emulate)."""
    return VERSIONS[name]
