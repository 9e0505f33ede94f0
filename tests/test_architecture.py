"""ARCHITECTURE.md's import rules, enforced: every `import` in tuner/ (function-level ones included)."""

from __future__ import annotations

import ast
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "tuner"

# The parts of tuner/ (top-level module or package name -> part).
PARTS = {
    "cli": "face", "__main__": "face",
    "config": "config",
    "errors": "base", "spec": "base", "metrics": "base", "wait": "base", "trials": "base", "endpoint": "base",
    "space": "space",
    "dialects": "dialects",
    "target": "target", "hosts": "target", "services": "target", "readiness": "target", "lock": "target",
    "bench": "bench",
    "gate": "gate",
    "search": "search",
    "study": "study",
    "report": "report",
    "sim": "sim",
}  # fmt: skip

# What each part may import (besides itself). Anything else is a violation.
ALLOWED = {
    "base": {"base"},
    "config": {"base", "space", "dialects"},
    "space": {"base"},
    "dialects": {"base", "space"},
    "target": {"base", "config", "gate", "dialects"},
    "bench": {"base", "config", "dialects"},
    "gate": {"base", "config"},
    "search": {"base", "config", "bench"},
    "report": {"base", "config", "space", "target"},
    "study": {"base", "config", "space", "target", "bench", "gate", "search", "report"},
    "sim": {"base", "config", "space", "dialects", "target", "bench", "gate", "search", "study"},
    "face": set(PARTS.values()),
}


def _imports() -> dict[str, set[tuple[str, str]]]:
    """Module name -> {(imported tuner top-level name, file:line)}."""
    found: dict[str, set[tuple[str, str]]] = defaultdict(set)
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT.parent).with_suffix("")
        me = rel.parts[1]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                bits = name.split(".")
                if bits[0] == "tuner" and len(bits) > 1:
                    found[me].add((bits[1], f"{rel}.py:{node.lineno}"))
    return found


def test_every_module_belongs_to_a_part() -> None:
    names = {p.stem if p.is_file() else p.name for p in ROOT.iterdir() if p.suffix == ".py" or p.is_dir()}
    names -= {"__init__", "__pycache__", "py"}
    assert names <= set(PARTS), f"add {sorted(names - set(PARTS))} to PARTS and to ARCHITECTURE.md"


def test_parts_import_only_what_architecture_allows() -> None:
    bad = []
    for me, imported in _imports().items():
        mine = PARTS[me]
        for other, where in imported:
            theirs = PARTS[other]
            if theirs != mine and theirs not in ALLOWED[mine]:
                bad.append(f"{where}: {mine} ({me}) imports {theirs} (tuner.{other})")
    assert not bad, "\n".join(sorted(bad))


def test_no_import_cycles_between_top_level_modules() -> None:
    graph = {me: {o for o, _ in imported if o != me} for me, imported in _imports().items()}
    seen: dict[str, int] = {}

    def visit(node: str, path: list[str]) -> None:
        seen[node] = 1
        for nxt in graph.get(node, ()):
            assert seen.get(nxt) != 1, "import cycle: " + " -> ".join([*path, node, nxt])
            if nxt not in seen:
                visit(nxt, [*path, node])
        seen[node] = 2

    for node in graph:
        if node not in seen:
            visit(node, [])


def test_the_tuner_never_loads_the_simulator() -> None:
    code = (
        "import sys, tuner.study, tuner.cli, tuner.report; "
        "print(sorted(m for m in sys.modules if m.startswith(('tuner.sim', 'aiohttp'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]", out
