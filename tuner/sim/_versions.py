"""The SGLang versions the simulator emulates, and what differs between them.

``--sim-sglang-version`` picks one of ``tune``'s known versions (:mod:`tuner.dialects`), whose flag table the
simulator's parser is built from:

* ``ddtree-pr29907`` (the default, which the demo tunes): the DDTree branch of sgl-project/sglang PR #29907, on
  0.5.15.post1. It has ``DDTREE``, ``--speculative-ddtree-budget`` and the ``SGLANG_DDTREE_*`` environment
  knobs; it still logs ``Init torch distributed`` and 0.5.15's capture lines; like 0.5.15.post1's scheduler it
  refuses logprob and grammar requests on the DFlash family.
* ``0.5.23``: mainline SGLang 0.5.23. No DDTREE (``--speculative-algorithm DDTREE`` parses, then fails with
  ``ValueError: Unknown speculative algorithm name: DDTREE``).

``python -m tuner.sim --version`` prints what the version probe of ``tune check`` recognises (``sglang 0.5.23
mainline``); ``/server_info`` reports the package version (``0.5.15.post1`` on the branch).
"""

from __future__ import annotations

from dataclasses import dataclass

from tuner.dialects import DDTREE_BRANCH as _DIALECT_DDTREE
from tuner.dialects import MAINLINE as _DIALECT_MAINLINE
from tuner.dialects import FlagTable
from tuner.dialects import SGLangVersion as DialectVersion

__all__ = ["DDTREE_BRANCH", "DEFAULT_VERSION", "MAINLINE", "VERSIONS", "EmulatedVersion"]


@dataclass(frozen=True, kw_only=True)
class EmulatedVersion:
    """One emulated SGLang build: the dialect's version (flag table, log markers) and what the simulator adds."""

    dialect: DialectVersion
    log_era: str
    """Whose start-up lines it writes: ``0.5.23``, or ``0.5.15`` (``Init torch distributed``, the older capture
    lines)."""
    refuses_logprob_and_grammar: bool
    """0.5.15.post1's ``validate_dflash_request``: the DFlash family refuses logprob and grammar requests."""

    @property
    def name(self) -> str:
        """What ``--sim-sglang-version`` takes (the dialect's name: ``0.5.23``, ``ddtree-pr29907``)."""
        return self.dialect.name

    @property
    def table(self) -> FlagTable:
        table = self.dialect.flags
        assert table is not None, f"{self.name} has no flag table"
        return table

    @property
    def title(self) -> str:
        return self.dialect.label

    @property
    def package_version(self) -> str:
        """``sglang.__version__`` of the build (``/server_info``'s ``version``)."""
        return self.table.version

    @property
    def version_line(self) -> str:
        """What ``--version`` prints: the form of ``tune``'s version probe (``sglang VERSION ddtree|mainline``)."""
        return f"sglang {self.package_version} {'ddtree' if self.has_ddtree else 'mainline'}"

    @property
    def has_ddtree(self) -> bool:
        return self.dialect.has_ddtree

    def canonical_algorithm(self, name: str) -> str | None:
        """The algorithm ``--speculative-algorithm NAME`` selects, or None when this version has no such one."""
        return self.table.canonical_algorithm(name)

    def message(self, key: str) -> str:
        """One of the version's messages as its source spells it (``{...}`` placeholders unfilled)."""
        return self.table.messages[key]


MAINLINE = EmulatedVersion(dialect=_DIALECT_MAINLINE, log_era="0.5.23", refuses_logprob_and_grammar=False)
DDTREE_BRANCH = EmulatedVersion(dialect=_DIALECT_DDTREE, log_era="0.5.15", refuses_logprob_and_grammar=True)
VERSIONS = {v.name: v for v in (MAINLINE, DDTREE_BRANCH)}
DEFAULT_VERSION = DDTREE_BRANCH
