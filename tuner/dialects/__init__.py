"""Server dialects: what differs between SGLang, vLLM, llama.cpp's servers and a generic OpenAI server.

``[target] server = "sglang" | "vllm" | "llama-server" | "llama.cpp" | "generic" | "auto"`` chooses one;
``auto`` (the default) detects it from the launch command (``sglang.launch_server`` and the bundled
``tuner.sim`` are SGLang, ``vllm serve`` / ``vllm.entrypoints`` vLLM, ``llama-server`` llama.cpp's C++ server,
``llama_cpp.server`` llama-cpp-python's Python server) and falls back to ``generic``.
"""

from __future__ import annotations

from collections.abc import Sequence

from tuner.dialects._base import BaseServerDialect, Run, Verdict, VersionedFlags
from tuner.dialects._capacity import KvCapacity, RequestSize, int_value
from tuner.dialects._counters import ServerSnapshot, parse_prometheus, prometheus_series
from tuner.dialects._flagtable import FlagOption, FlagTable, sglang_table
from tuner.dialects._generic import GenericDialect
from tuner.dialects._llamacpp import LlamaCppDialect
from tuner.dialects._llamaserver import LlamaServerDialect, spec_types
from tuner.dialects._sglang import SGLangDialect
from tuner.dialects._sglang_check import spelling_verdict
from tuner.dialects._sglang_versions import (
    DDTREE_BRANCH,
    KNOWN_VERSIONS,
    MAINLINE,
    SGLangVersion,
    probe_command,
    renamed_flags,
    sglang_version,
    version_from_help,
    version_from_output,
)
from tuner.dialects._vllm import VLLMDialect

__all__ = [
    "DDTREE_BRANCH",
    "DIALECTS",
    "KNOWN_VERSIONS",
    "MAINLINE",
    "SERVER_CHOICES",
    "BaseServerDialect",
    "FlagOption",
    "FlagTable",
    "KvCapacity",
    "LlamaCppDialect",
    "LlamaServerDialect",
    "RequestSize",
    "Run",
    "SGLangDialect",
    "SGLangVersion",
    "ServerSnapshot",
    "VLLMDialect",
    "Verdict",
    "VersionedFlags",
    "default_dialect",
    "detect_dialect",
    "get_dialect",
    "int_value",
    "parse_prometheus",
    "probe_command",
    "prometheus_series",
    "renamed_flags",
    "sglang_table",
    "sglang_version",
    "spec_types",
    "spelling_verdict",
    "version_from_help",
    "version_from_output",
]

DIALECTS: dict[str, type[BaseServerDialect]] = {
    cls.name: cls for cls in (SGLangDialect, VLLMDialect, LlamaServerDialect, LlamaCppDialect, GenericDialect)
}
SERVER_CHOICES = ("auto", *DIALECTS)


def default_dialect() -> BaseServerDialect:
    """The dialect a part speaks when it was given none (a benchmark or readiness built without a study file):
    SGLang's, the server `tune` was made for and the one the bundled simulator mimics."""
    return SGLangDialect(reason="the default")


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
