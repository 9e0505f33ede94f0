"""Server dialects: what differs between SGLang, vLLM, llama-cpp-python and a generic OpenAI server.

``[target] server = "sglang" | "vllm" | "llama.cpp" | "generic" | "auto"`` chooses one; ``auto`` (the default)
detects it from the launch command (``sglang.launch_server`` and the bundled ``tuner.sim`` are SGLang,
``vllm serve`` / ``vllm.entrypoints`` vLLM, ``llama_cpp.server`` llama-cpp-python) and falls back to
``generic``.
"""

from __future__ import annotations

from collections.abc import Sequence

from tuner.dialects._base import BaseServerDialect
from tuner.dialects._flagtable import FlagOption, FlagTable, known_tables, server_argv, sglang_table
from tuner.dialects._generic import GenericDialect
from tuner.dialects._llamacpp import LlamaCppDialect
from tuner.dialects._sglang import SGLangDialect, replace_version
from tuner.dialects._sglang_check import Verdict, check_command, flag_spellings, metrics_verdict, spelling_verdict
from tuner.dialects._sglang_versions import (
    DDTREE_BRANCH,
    KNOWN_VERSIONS,
    LEGACY,
    MAINLINE,
    SGLangVersion,
    probe_command,
    renamed_flags,
    renamed_in,
    sglang_version,
    version_from_help,
    version_from_output,
)
from tuner.dialects._vllm import VLLMDialect

__all__ = [
    "DDTREE_BRANCH",
    "DIALECTS",
    "KNOWN_VERSIONS",
    "LEGACY",
    "MAINLINE",
    "SERVER_CHOICES",
    "BaseServerDialect",
    "FlagOption",
    "FlagTable",
    "GenericDialect",
    "LlamaCppDialect",
    "SGLangDialect",
    "SGLangVersion",
    "VLLMDialect",
    "Verdict",
    "check_command",
    "detect_dialect",
    "flag_spellings",
    "get_dialect",
    "known_tables",
    "metrics_verdict",
    "probe_command",
    "renamed_flags",
    "renamed_in",
    "replace_version",
    "server_argv",
    "sglang_table",
    "sglang_version",
    "spelling_verdict",
    "version_from_help",
    "version_from_output",
]

DIALECTS: dict[str, type[BaseServerDialect]] = {
    cls.name: cls for cls in (SGLangDialect, VLLMDialect, LlamaCppDialect, GenericDialect)
}
SERVER_CHOICES = ("auto", *DIALECTS)


def detect_dialect(argv: Sequence[str]) -> BaseServerDialect:
    """The dialect a launch command shows, or :class:`GenericDialect` when none does."""
    for cls in DIALECTS.values():
        found = cls.matches(argv)
        if found:
            return cls(reason=f"detected from the launch command: {found}")
    return GenericDialect(reason="no known server in the launch command; set [target] server to choose one")


def get_dialect(server: str, argv: Sequence[str]) -> BaseServerDialect:
    """The dialect ``[target] server`` names (``auto``: detected from ``argv``)."""
    if server == "auto":
        return detect_dialect(argv)
    try:
        cls = DIALECTS[server]
    except KeyError:
        raise ValueError(f"unknown server dialect {server!r}; expected one of {', '.join(SERVER_CHOICES)}") from None
    return cls(reason="[target] server")
