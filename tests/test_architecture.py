"""ARCHITECTURE.md's rules, enforced on every `import` in tuner/ (function-level and type-only ones included):
which part may import which (read from the document's own table), no module reaching into another package's
private module, no import cycle between parts or inside a package (its subpackages included), Optuna's internals and
a trial's user attrs each behind their one adapter, every seam implementation listed, and functions people can read
(at most 60 lines). Each check runs on a planted violation too (test_the_rules_catch_what_they_forbid and after)."""

from __future__ import annotations

import ast
import inspect
import re
import subprocess
import sys
import types
from collections import defaultdict
from collections.abc import Collection, Iterator, Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "tuner"
MAX_FUNCTION_LINES = 60

DOC = ROOT.parent / "ARCHITECTURE.md"


def parts_table(text: str) -> tuple[dict[str, str], dict[str, set[str]], dict[str, set[str]]]:
    """ARCHITECTURE.md's parts table: (top-level module or package -> part, part -> the parts it may import,
    part -> the parts it must never import). Its "may import" column lists parts by name ("every part": all);
    a parenthesis says why and is not a part."""
    rows = [line for line in text.split("## The parts", 1)[1].split("\n\n", 2)[1].splitlines() if line.startswith("|")]
    parts: dict[str, str] = {}
    cells = [[c.strip() for c in row.strip("|").split("|")] for row in rows[2:]]
    for part, modules, *_ in cells:
        for m in re.findall(r"`([\w.]+)`", modules.split(" (")[0]):
            parts[m] = part
    for part, modules, *_ in cells:  # a part's subpackages, named in brackets (`target.hosts`), are the part's
        for m in re.findall(r"`([\w]+)\.[\w.]+`", modules):
            assert parts.get(m) == part, f"{m} is named under {part} but is not {part}'s module"

    def named(cell: str) -> set[str]:
        cell = re.sub(r"\([^)]*\)", "", cell)
        if cell.strip() in ("every part", "everything"):
            return set(parts.values())
        if cell.strip() in ("everything else", "—", "-"):
            return set()
        return {w.strip() for w in cell.split(",") if w.strip()}

    allowed = {part: named(may) for part, _, _, may, _ in cells}
    never = {part: named(never) for part, _, _, _, never in cells}
    return parts, allowed, never


PARTS, ALLOWED, NEVER = parts_table(DOC.read_text())


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in ROOT.rglob("*.py")}
PACKAGES = {_module_name(p) for p in ROOT.rglob("__init__.py")}


def private_owner(imported: str) -> str | None:
    """The package whose private module (or name) ``imported`` reaches into, if any (``tuner.x._y`` -> ``tuner.x``)."""
    bits = imported.split(".")
    for k, bit in enumerate(bits[1:], start=1):
        if _private(bit):
            return ".".join(bits[:k])
    return None


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")  # ``__version__`` is public


def imports_of(module: str, source: str, *, is_package: bool) -> Iterator[tuple[str, int]]:
    """``(imported tuner module, line)`` for every import in ``source``: ``from P import name`` is the module
    ``P.name`` when that is a module (or a private name: it reaches into ``P``), else ``P``."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found = [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                here = module.split(".") if is_package else module.split(".")[:-1]
                base = ".".join([*here[: len(here) - node.level + 1], *([node.module] if node.module else [])])
            else:
                base = node.module or ""
            found = [
                (f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES or _private(a.name) else base, node.lineno)
                for a in node.names
            ]
        else:
            continue
        yield from ((name, line) for name, line in found if name.startswith("tuner."))


def _imports() -> dict[str, list[tuple[str, int]]]:
    return {
        m: list(imports_of(m, p.read_text(), is_package=p.name == "__init__.py")) for m, p in MODULES.items()
    }


IMPORTS = _imports()


def test_every_module_belongs_to_a_part() -> None:
    names = {p.stem if p.is_file() else p.name for p in ROOT.iterdir() if p.suffix == ".py" or p.is_dir()}
    names -= {"__init__", "__pycache__", "py"}
    assert names <= set(PARTS), f"add {sorted(names - set(PARTS))} to PARTS and to ARCHITECTURE.md"


def test_parts_import_only_what_architecture_allows() -> None:
    bad = []
    for me, imported in IMPORTS.items():
        if me == "tuner":
            continue  # the package itself: its version, nothing else
        mine = PARTS[me.split(".")[1]]
        for name, line in imported:
            theirs = PARTS[name.split(".")[1]]
            if theirs != mine and theirs not in ALLOWED[mine]:
                bad.append(f"{me}:{line}: {mine} imports {theirs} ({name})")
    assert not bad, "\n".join(sorted(bad))


def test_no_module_imports_another_package_s_private_module() -> None:
    bad = [
        f"{me}:{line} imports {name}: import it from {owner}"
        for me, imported in IMPORTS.items()
        for name, line in imported
        if (owner := private_owner(name)) is not None and not (me == owner or me.startswith(owner + "."))
    ]
    assert not bad, "\n".join(sorted(bad))


def test_no_import_cycles_between_top_level_modules() -> None:
    graph: dict[str, set[str]] = defaultdict(set)
    for me, imported in IMPORTS.items():
        if me != "tuner":
            graph[me.split(".")[1]] |= {name.split(".")[1] for name, _ in imported} - {me.split(".")[1]}
    assert not find_cycles(graph)


def _package_of(module: str) -> str:
    return module if module in PACKAGES else module.rsplit(".", 1)[0]


def _nearest_module(name: str, modules: Collection[str] = MODULES) -> str:
    while name not in modules and "." in name:
        name = name.rsplit(".", 1)[0]
    return name


def package_cycles(
    imports: Mapping[str, Collection[tuple[str, int]]], modules: Collection[str], packages: Collection[str]
) -> list[str]:
    """Import cycles inside each package, a subpackage counted as one member: ``P._a -> P.sub -> P`` is a cycle
    of ``P`` (``P.sub``'s modules stand for ``P.sub``), as ``P._a -> P._b -> P._a`` is."""
    cycles = []
    for package in sorted(packages):

        def member(name: str, package: str = package) -> str | None:
            if name == package:
                return name
            if not name.startswith(package + "."):
                return None
            return package + "." + name[len(package) + 1 :].split(".")[0]

        graph: dict[str, set[str]] = defaultdict(set)
        for m in modules:
            if (me := member(m)) is not None:
                graph[me] |= {t for n, _ in imports[m] if (t := member(_nearest_module(n, modules))) not in (None, me)}
        cycles += find_cycles(graph)
    return cycles


def test_no_import_cycles_inside_a_package_or_with_its_subpackages() -> None:
    cycles = package_cycles(IMPORTS, MODULES, PACKAGES)
    assert not cycles, "\n".join(cycles)


def find_cycles(graph: dict[str, set[str]]) -> list[str]:
    """Every cycle a depth-first walk of ``graph`` meets, as ``a -> b -> a``."""
    state: dict[str, int] = {}
    cycles: list[str] = []

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                cycles.append(" -> ".join([*path[path.index(nxt) :], node, nxt] if nxt in path else [node, nxt]))
            elif nxt not in state:
                visit(nxt, [*path, node])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [])
    return cycles


def test_functions_are_at_most_60_lines() -> None:
    long = [
        f"{m}.{node.name}: {node.end_lineno - node.lineno + 1} lines"
        for m, path in MODULES.items()
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.end_lineno is not None
        and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES
    ]
    assert not long, "\n".join(sorted(long))


OPTUNA_ADAPTER = "tuner.trials.adapter"
#: Optuna's private attributes `tune` needs: only its adapter may touch them.
OPTUNA_PRIVATE = {"_storage", "_study_id", "_trial_id", "_thread_local", "_backend", "_cached_frozen_trial"}


def optuna_internals(source: str) -> list[str]:
    """Uses of Optuna's private modules (``optuna.x._y``) and attributes (:data:`OPTUNA_PRIVATE`) in ``source``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "optuna":
            names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            found += [f"line {node.lineno}: {n}" for n in names if private_owner(n) is not None][:1]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names if a.name.split(".")[0] == "optuna"]
            found += [f"line {node.lineno}: {n}" for n in names if private_owner(n) is not None]
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "setattr", "hasattr", "delattr")
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and node.args[1].value in OPTUNA_PRIVATE
        ):
            found.append(f"line {node.lineno}: {node.func.id}(..., {node.args[1].value!r})")
        elif isinstance(node, ast.Attribute) and node.attr in OPTUNA_PRIVATE:
            mine = isinstance(node.value, ast.Name) and node.value.id == "self"  # an object's own attribute
            if not mine:
                found.append(f"line {node.lineno}: .{node.attr}")
    return sorted(found)


def test_optuna_internals_only_behind_their_adapter() -> None:
    bad = [
        f"{m}: {use}"
        for m, path in MODULES.items()
        if m != OPTUNA_ADAPTER
        for use in optuna_internals(path.read_text())
    ]
    assert not bad, "\n".join(bad) + "\n(add what you need to tuner/trials/adapter.py and its test)"


TRIAL_FACTS = "tuner.trials"
#: How Optuna stores a trial's (or a study's) facts: only tuner/trials/ reads or writes them (TrialRecord, write...).
USER_ATTRS = {"user_attrs", "set_user_attr", "set_trial_user_attr"}


def user_attr_uses(source: str) -> list[str]:
    """Reads and writes of user attrs in ``source``: ``x.user_attrs``, ``x.set_user_attr(...)``,
    ``enqueue_trial(..., user_attrs=...)`` and the key names (``attrs.BASELINE``)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr in USER_ATTRS:
            found.append(f"line {node.lineno}: .{node.attr}")
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "attrs":
            found.append(f"line {node.lineno}: attrs.{node.attr}")
        elif isinstance(node, ast.keyword) and node.arg in USER_ATTRS:
            found.append(f"line {node.lineno}: {node.arg}=")
    return sorted(found)


def test_trial_facts_are_read_and_written_only_in_trials() -> None:
    bad = [
        f"{m}: {use}"
        for m, path in MODULES.items()
        if m != TRIAL_FACTS and not m.startswith(TRIAL_FACTS + ".")
        for use in user_attr_uses(path.read_text())
    ]
    assert not bad, "\n".join(bad) + "\n(read a trial through tuner.trials.record_of, write through tuner.trials.write)"


def test_the_rules_catch_what_they_forbid() -> None:
    """The checks above are only as good as their parsing: each catches a planted violation."""
    source = "from tuner.study._confirm import x\nfrom tuner.target import _lock\nimport tuner.stats._estimate\n"
    found = [name for name, _ in imports_of("tuner.cli._x", source, is_package=False)]
    assert [private_owner(n) for n in found] == ["tuner.study", "tuner.target", "tuner.stats"]
    assert private_owner("tuner.target.hosts") is None
    relative = "from ._confirm import y\nfrom . import _fleet\n"
    found = [name for name, _ in imports_of("tuner.study._loop", relative, is_package=False)]
    assert found == ["tuner.study._confirm", "tuner.study._fleet"]
    assert find_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a -> b -> c -> a"]
    planted = (
        "from optuna.storages._rdb import models\nx = study._study_id\ny = self._study_id\n"
        "import optuna.storages._rdb.models\nz = getattr(study, '_storage')\nw = getattr(study, 'study_name')\n"
    )
    assert sorted(optuna_internals(planted)) == [
        "line 1: optuna.storages._rdb", "line 2: ._study_id", "line 4: optuna.storages._rdb.models",
        "line 5: getattr(..., '_storage')",
    ]  # fmt: skip
    assert find_cycles({"a": {"b"}, "b": set()}) == []
    facts = (
        "x = t.user_attrs.get('baseline')\ntrial.set_user_attr('gate', '5/5')\nstudy.enqueue_trial({}, user_attrs={})\n"
        "y = attrs.BASELINE\n# user_attrs in a comment is no use\n"
    )
    assert sorted(user_attr_uses(facts)) == [
        "line 1: .user_attrs", "line 2: .set_user_attr", "line 3: user_attrs=", "line 4: attrs.BASELINE"
    ]  # fmt: skip


def test_a_cycle_through_a_subpackage_is_caught() -> None:
    """``P -> P._a -> P.sub -> P``: no two modules of one package import each other, yet it is a cycle."""
    planted = {
        "tuner.p": "from tuner.p._a import f\n",
        "tuner.p._a": "from tuner.p.sub import g\n",
        "tuner.p.sub": "from tuner.p.sub._b import g\n",
        "tuner.p.sub._b": "from tuner.p import f\n",
    }
    packages = {"tuner.p", "tuner.p.sub"}
    imports = {m: list(imports_of(m, src, is_package=m in packages)) for m, src in planted.items()}
    assert package_cycles(imports, planted, packages) == ["tuner.p -> tuner.p._a -> tuner.p.sub -> tuner.p"]
    del planted["tuner.p.sub._b"], imports["tuner.p.sub._b"]
    assert package_cycles(imports, planted, packages) == []


def test_the_document_s_parts_table_is_consistent() -> None:
    """What the test enforces is ARCHITECTURE.md's table itself (:func:`parts_table`): each row names parts that
    exist, and no part is both allowed and forbidden."""
    known = set(PARTS.values())
    for part in known:
        assert ALLOWED[part] <= known, f"{part}: may import {ALLOWED[part] - known}, which are no parts"
        assert NEVER[part] <= known, f"{part}: must never import {NEVER[part] - known}, which are no parts"
        assert not ALLOWED[part] & NEVER[part], f"{part}: both allowed and forbidden: {ALLOWED[part] & NEVER[part]}"


def test_every_seam_implementation_is_in_the_document() -> None:
    import tuner.sim.inprocess  # noqa: F401  # its implementations of the seams
    from tuner.bench import STREAM_CLIENTS, BaseBenchmark, BaseStreamClient, stream_client
    from tuner.dialects import BaseServerDialect
    from tuner.gate import BaseGate, BaseJudge
    from tuner.target.hosts import BaseHost
    from tuner.target.services import BaseService

    for name in STREAM_CLIENTS:
        stream_client(name)  # each imported when chosen
    seams = DOC.read_text().split("## Seams", 1)[1].split("\n\n## ", 1)[0]
    rows = {row.split("|")[2]: row.split("|")[3] for row in seams.splitlines() if row.startswith("| ")}

    def implementations(base: type) -> set[str]:
        found = set()
        for sub in base.__subclasses__():
            found |= implementations(sub)
            if not getattr(sub, "__abstractmethods__", None):
                found.add(sub.__name__)
        return found

    bases = (BaseHost, BaseService, BaseBenchmark, BaseStreamClient, BaseGate, BaseJudge, BaseServerDialect)
    missing = [
        f"{base.__name__}: {name}"
        for base in bases
        for name in sorted(implementations(base))
        if not any(f"`{base.__name__}`" in k or f".{base.__name__}`" in k for k in rows)
        or not any(f"`{name}`" in v or f".{name}`" in v for k, v in rows.items() if base.__name__ in k)
    ]
    assert not missing, "add to ARCHITECTURE.md's seams table:\n" + "\n".join(missing)


#: A package's door (its ``__all__``) names what other packages use, at most this many, unless ARCHITECTURE.md's
#: "Wide doors" says why.
MAX_DOOR = 25


def wide_doors(text: str) -> set[str]:
    """The packages ARCHITECTURE.md's "Wide doors" list lets export more than :data:`MAX_DOOR` names."""
    section = text.split("## Wide doors", 1)[1].split("\n## ", 1)[0] if "## Wide doors" in text else ""
    return set(re.findall(r"^- `([\w.]+)`", section, flags=re.M))


def door_problems(doors: Mapping[str, types.ModuleType], wide: Collection[str]) -> list[str]:
    """Doors wider than :data:`MAX_DOOR` without a reason, and classes or functions with two doors."""
    out = [
        f"{name}: {len(mod.__all__)} names (at most {MAX_DOOR}, or say why under ARCHITECTURE.md's Wide doors)"
        for name, mod in sorted(doors.items())
        if len(mod.__all__) > MAX_DOOR and name.removeprefix("tuner.") not in wide
    ]
    owners: dict[int, list[str]] = defaultdict(list)
    for name, mod in sorted(doors.items()):
        for n in mod.__all__:
            if inspect.isclass(obj := getattr(mod, n)) or inspect.isfunction(obj):
                owners[id(obj)].append(f"{name}.{n}")
    return out + [" and ".join(v) + ": one name, two doors" for v in owners.values() if len(v) > 1]


def test_package_doors_are_narrow_and_each_name_has_one() -> None:
    import importlib

    public = [m for m in MODULES if private_owner(m) is None and not m.endswith("__main__")]
    doors = {m: mod for m in public if hasattr(mod := importlib.import_module(m), "__all__")}
    problems = door_problems(doors, wide_doors(DOC.read_text()))
    assert not problems, "\n".join(problems)


def test_the_door_rules_catch_what_they_forbid() -> None:
    def door(name: str, **names: object) -> types.ModuleType:
        mod = types.ModuleType(name)
        mod.__dict__.update(names)
        mod.__all__ = list(names)  # type: ignore[attr-defined]
        return mod

    def f() -> None: ...

    wide = door("tuner.wide", **{f"c{i}": i for i in range(MAX_DOOR + 1)})
    doors = {"tuner.a": door("tuner.a", f=f), "tuner.b": door("tuner.b", g=f), "tuner.wide": wide}
    assert door_problems(doors, wide=()) == [
        f"tuner.wide: {MAX_DOOR + 1} names (at most {MAX_DOOR}, or say why under ARCHITECTURE.md's Wide doors)",
        "tuner.a.f and tuner.b.g: one name, two doors",
    ]
    assert door_problems(doors, wide={"wide"}) == ["tuner.a.f and tuner.b.g: one name, two doors"]
    assert wide_doors("## Wide doors\n\n- `trials` (52): why\n- `x`: too\n\n## Next\n- `y`: no\n") == {"trials", "x"}


def test_the_tuner_never_loads_the_simulator() -> None:
    code = (
        "import sys, tuner.study, tuner.cli, tuner.report; "
        "print(sorted(m for m in sys.modules if m.startswith(('tuner.sim', 'aiohttp'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]", out
