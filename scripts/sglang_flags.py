"""Make an SGLang flag table from a released ``sglang`` wheel, without importing it.

``import sglang`` needs torch, so the wheel is read as source: the annotated fields that
``add_cli_args_from_dataclass`` turns into options (``A[T, "help"]`` / ``A[T, Arg(...)]`` in
``srt/arg_groups/fields/*.py``, or in ``ServerArgs`` itself before the fields moved there) and the
``parser.add_argument`` calls of ``ServerArgs.add_cli_args`` in ``srt/server_args.py``, both read with ``ast``
and turned into options exactly the way SGLang's own code would register them. The table also carries the
``--speculative-algorithm`` names, the Prometheus metric names, the HTTP endpoints, and the real texts of the
errors and log lines `tune` and the simulator care about, each with the file and line it was read from.

    python scripts/sglang_flags.py 0.5.23              # pip download sglang==0.5.23, write the table
    python scripts/sglang_flags.py 0.5.23 --wheel W    # read a wheel already on disk
    python scripts/sglang_flags.py --ddtree            # the DDTree branch (PR #29907): base + the PR's additions

Tables go to ``tuner/dialects/sglang_flags/<name>.json`` (package data); ``--out -`` prints instead.
Only this script touches the network (``pip download --no-deps``); the tests read the committed tables.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import re
import subprocess
import sys
import tempfile
import tomllib
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TABLES = ROOT / "tuner" / "dialects" / "sglang_flags"
FORMAT = 1

# The messages a user (and the simulator) meets, found by text in the wheel: id -> (literal fragments of the
# source, at least one must occur in the file; regex the rendered string must match). Not found = not in that
# version (recorded as null, and printed).
MESSAGES: dict[str, tuple[tuple[str, ...], str]] = {
    "unknown_algorithm": (("Unknown speculative algorithm name",), r"Unknown speculative algorithm name"),
    "dflash_block_size_mismatch": (("For DFLASH they must match",), r"For DFLASH they must match"),
    "dflash_block_size_positive": (("to be positive",), r"^DFLASH requires --speculative-dflash-block-size"),
    "dflash_window_below_block": (("--speculative-draft-window-size must be >= ",), r"window-size must be >="),
    "draft_window_positive": (("--speculative-draft-window-size must be positive",), r"must be positive"),
    "dflash_pp_size": (("DFLASH speculative decoding only supports pp_size",), r"pp_size == 1"),
    "dflash_needs_draft_model": (("DFLASH speculative decoding requires setting",), r"draft-model-path"),
    "dflash_num_steps_override": (("DFLASH only supports speculative_num_steps == 1",), r"num_steps == 1"),
    "dflash_topk_override": (("DFLASH only supports speculative_eagle_topk == 1",), r"^DFLASH only .*eagle_topk"),
    "dflash_block_size_default": (("defaulting to %d for DFLASH",), r"defaulting to %d for DFLASH"),
    "max_running_requests_reset": (("Max running requests is reset to 48",), r"reset to 48"),
    "kv_pool_full": (("KV cache pool is full. Retract requests.",), r"^KV cache pool is full\. Retract requests\."),
    "cuda_graph_capture_failed": (("Capture cuda graph failed",), r"^Capture cuda graph failed"),
    "cuda_graph_capture_hint": (
        ("Possible solutions:",),
        r"^Possible solutions:\n1\. set --mem-fraction-static[^\n]*\n2\. set --cuda-graph-max-bs",
    ),
    "load_weight_begin": (("Load weight begin",), r"^Load weight begin"),
    "load_weight_end": (("Load weight end",), r"^Load weight end\. (elapsed|Time)"),
    "loading_shards": (("Loading safetensors checkpoint shards",), r"^Loading safetensors checkpoint shards$"),
    # The decode / target-verify graph (its device name comes from a dict; the prefill graph's is a literal).
    "capture_graph_begin": (("Capture {capture_name}",), r"^Capture \{capture_name\} \{graph_backend\[.*?\} begin\. "),
    "capture_graph_end": (("Capture {capture_name}",), r"^Capture \{capture_name\} \{graph_backend\[.*?\} end\. "),
    "server_ready": (("The server is fired up and ready to roll",), r"fired up and ready to roll"),
    "init_torch_distributed": (("Init torch distributed",), r"^Init torch distributed"),
}
ENDPOINTS = ("/health", "/health_generate", "/server_info", "/get_server_info", "/metrics", "/flush_cache")
ENV_PATTERN = re.compile(r"^SGLANG_(DDTREE|DFLASH)_")

# The DDTree branch: sgl-project/sglang PR #29907 (open), head 93e9850e430035f8a363fd881a6a0c5436b95108. Its
# server_args.py / fields were not retrievable; its speculative_hook.py at that head is 0.5.15.post1's plus
# `_handle_ddtree`, so the branch table is 0.5.15.post1's plus what the PR adds (texts verbatim from the PR's
# python/sglang/srt/arg_groups/speculative_hook.py, environ.py and speculative/ddtree_worker.py at that head).
DDTREE_BASE = "0.5.15.post1"
DDTREE_NAME = "ddtree-pr29907"
DDTREE_HEAD = "93e9850e430035f8a363fd881a6a0c5436b95108"
DDTREE_SOURCE = (
    f"sglang {DDTREE_BASE} wheel (the PR's base: its speculative_hook.py at head {DDTREE_HEAD[:12]} equals "
    f"{DDTREE_BASE}'s plus _handle_ddtree; {DDTREE_BASE} is the newest release it matches, 0.5.16 already "
    "differs) + the additions of sgl-project/sglang PR #29907 (open) read from that head "
    "(arg_groups/speculative_hook.py, environ.py, speculative/ddtree_worker.py). The branch's own "
    "server_args.py and arg_groups/fields were not retrievable, so the help text and registration of "
    "--speculative-ddtree-budget are inferred (an Optional[int] field: the hook compares it with < 1 and "
    "defaults it to block size - 1)."
)
DDTREE_OPTION = {
    "flags": ["--speculative-ddtree-budget"],
    "dest": "speculative_ddtree_budget",
    "nargs": None,
    "type": "int",
    "choices": None,
    "default": None,
    "required": False,
    "hidden": False,
    "replaced_by": None,
    "action": "store",
    "help": "DDTREE only. Number of draft-tree nodes verified per step (default: block size - 1, a plain chain).",
    "where": f"PR #29907 @ {DDTREE_HEAD[:12]} (--speculative-ddtree-budget; help text inferred)",
}
DDTREE_ENV = {
    "SGLANG_DDTREE_MAX_TOPK": {"type": "int", "default": 6},
    "SGLANG_DDTREE_DEPTH_BONUS": {"type": "float", "default": 0.2},
    "SGLANG_DDTREE_RANK_PROBE": {"type": "bool", "default": False},
}
_HOOK = f"PR #29907 @ {DDTREE_HEAD[:12]}: python/sglang/srt/arg_groups/speculative_hook.py (_handle_ddtree)"
_WORKER = f"PR #29907 @ {DDTREE_HEAD[:12]}: python/sglang/srt/speculative/ddtree_worker.py"
DDTREE_MESSAGES = {
    "ddtree_budget_inferred": (
        "Inferred speculative_ddtree_budget=%d from speculative_num_draft_tokens=%d for DDTREE.",
        _HOOK,
    ),
    "ddtree_budget_min": (
        "--speculative-ddtree-budget must be >= 1, got {server_args.speculative_ddtree_budget}.",
        _HOOK,
    ),
    "ddtree_rejection_sampling": (
        "DDTREE does not support --speculative-use-rejection-sampling yet. "
        "Use the default target-only sampling path or disable DDTREE.",
        _HOOK,
    ),
    "ddtree_page_size": (
        "DDTREE currently supports only page_size == 1. Got page_size={server_args.page_size}.",
        _HOOK,
    ),
    "ddtree_full_tree_backend": (
        "DDTREE full-tree mode currently supports only the triton attention backend because it forwards "
        "tree_budget + 1 verify tokens per request. Please set --attention-backend triton, or use "
        "--speculative-ddtree-budget <= --speculative-num-draft-tokens - 1. "
        "Got prefill_attention_backend={prefill_backend!r}, decode_attention_backend={decode_backend!r}.",
        _HOOK,
    ),
    "ddtree_grammar": (
        "DDTREE batch has grammar constraints, but scheduler should have rejected this request.",
        _WORKER,
    ),
    "ddtree_logprob": (
        "DDTREE batch requested return_logprob, but scheduler should have rejected this request.",
        _WORKER,
    ),
    "ddtree_worker_init": (
        "Initialized DDTree worker. block_size=%s, tree_budget=%s, max_tree_nodes=%s",
        _WORKER,
    ),
}
DDTREE_REQUIRES = {
    "page_size": 1,
    "overlap_schedule": "disabled (the hook sets disable_overlap_schedule = True)",
    "full_tree_attention_backend": "triton (when budget > block size - 1)",
    "budget_default": "speculative_num_draft_tokens - 1 (a plain chain)",
    "verify_tokens_per_request": "budget + 1",
    "effective_topk": "min(max(budget // (block_size - 1) + 1, 2), vocab, SGLANG_DDTREE_MAX_TOPK)",
}


class Unresolved(Exception):
    """An expression whose value is only known at run time (kept as source text in the table)."""


@dataclass
class Wheel:
    """The ``.py`` files of a wheel, parsed on demand."""

    path: Path
    _zip: zipfile.ZipFile = field(init=False)
    _trees: dict[str, ast.Module] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._zip = zipfile.ZipFile(self.path)

    def names(self) -> list[str]:
        return self._zip.namelist()

    def text(self, rel: str) -> str | None:
        try:
            return self._zip.read(rel).decode()
        except KeyError:
            return None

    def module(self, dotted: str) -> tuple[str, ast.Module] | None:
        """(path, tree) of a module (``a.b.c`` -> ``a/b/c.py`` or ``a/b/c/__init__.py``)."""
        for rel in (dotted.replace(".", "/") + ".py", dotted.replace(".", "/") + "/__init__.py"):
            if rel in self._trees:
                return rel, self._trees[rel]
            source = self.text(rel)
            if source is not None:
                self._trees[rel] = ast.parse(source)
                return rel, self._trees[rel]
        return None


class Resolver:
    """Evaluates the constant parts of SGLang's source: literals, module-level lists, imported names."""

    def __init__(self, wheel: Wheel) -> None:
        self.wheel = wheel

    def lookup(self, module: str, name: str, depth: int = 0) -> ast.expr:
        """The expression assigned to ``name`` at module level, following ``from X import name``."""
        found = self.wheel.module(module)
        if found is None or depth > 6:
            raise Unresolved(name)
        _, tree = found
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
                return node.value
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == name:
                if node.value is None:
                    raise Unresolved(name)
                return node.value
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    if (alias.asname or alias.name) == name:
                        return self.lookup(node.module, alias.name, depth + 1)
        raise Unresolved(name)

    def value(self, node: ast.expr, module: str, local: dict[str, ast.expr] | None = None) -> Any:
        """The constant value of ``node`` (raises :class:`Unresolved` when it is only known at run time)."""
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.List | ast.Tuple | ast.Set):
            return [self.value(e, module, local) for e in node.elts]
        if isinstance(node, ast.Dict):
            pairs = zip(node.keys, node.values, strict=True)
            return {self.value(k, module, local): self.value(v, module, local) for k, v in pairs if k is not None}
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -self.value(node.operand, module, local)
        if isinstance(node, ast.BinOp):
            left, right = self.value(node.left, module, local), self.value(node.right, module, local)
            ops = {ast.Add: lambda a, b: a + b, ast.Mult: lambda a, b: a * b, ast.Sub: lambda a, b: a - b,
                   ast.Pow: lambda a, b: a**b, ast.FloorDiv: lambda a, b: a // b, ast.Div: lambda a, b: a / b}
            op = ops.get(type(node.op))
            if op is None:
                raise Unresolved(ast.unparse(node))
            return op(left, right)
        if isinstance(node, ast.Name):
            if local and node.id in local:
                return self.value(local[node.id], module, None)
            return self.value(self.lookup(module, node.id), module)
        if _is_collection_call(node):
            assert isinstance(node, ast.Call)
            return sorted(self.value(node.args[0], module, local), key=str)
        raise Unresolved(ast.unparse(node))

    def maybe(self, node: ast.expr | None, module: str, local: dict[str, ast.expr] | None = None) -> Any:
        """``value`` or, for a run-time expression, ``{"expr": source}``."""
        if node is None:
            return None
        try:
            return _jsonable(self.value(node, module, local))
        except (Unresolved, TypeError, ValueError):
            return {"expr": ast.unparse(node)}


def _is_collection_call(node: ast.expr) -> bool:
    """``list(X)`` / ``set(X)`` / ``frozenset(X)`` / ``tuple(X)`` / ``sorted(X)``."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ("list", "set", "frozenset", "tuple", "sorted")
        and len(node.args) == 1
        and not node.keywords
    )


def _jsonable(value: Any) -> Any:
    json.dumps(value)
    return value


def _name(node: ast.expr | None) -> str | None:
    """``x`` / ``a.b.x`` as text (a type or action given by name)."""
    if node is None:
        return None
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return ast.unparse(node)


def _is_suppress(node: ast.expr | None) -> bool:
    return node is not None and ast.unparse(node) in ("argparse.SUPPRESS", "SUPPRESS")


# --- the action classes: how many values each takes, read from its __init__ -------------------------------------

_BUILTIN_NARGS = {"store_true": 0, "store_false": 0, "store_const": 0, "count": 0, "help": 0, "version": 0,
                  "append_const": 0, "BooleanOptionalAction": 0, "argparse.BooleanOptionalAction": 0}


def action_nargs(wheel: Wheel, action: str | None, given: Any) -> Any:
    """argparse nargs of an option with this action (``given``: nargs passed explicitly, or ``...``)."""
    if given is not ...:
        return given
    if action is None or action in ("store", "append", "extend"):
        return None
    if action in _BUILTIN_NARGS:
        return 0
    found = wheel.module("sglang.srt.arg_groups.argparse_actions")
    cls = next((n for n in found[1].body if isinstance(n, ast.ClassDef) and n.name == action.rsplit(".", 1)[-1]),
               None) if found else None
    init = next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None) if cls else None
    if init is None:
        return None  # a plain argparse.Action: one value unless told otherwise
    args = init.args.args[-len(init.args.defaults):] if init.args.defaults else []
    defaults = {a.arg: d for a, d in zip(args, init.args.defaults, strict=True)}
    return ast.literal_eval(defaults["nargs"]) if "nargs" in defaults else None


# --- options from annotated fields (add_cli_args_from_dataclass) ------------------------------------------------


@dataclass
class FieldType:
    inner: ast.expr
    literal: list[Any] | None = None
    list_of: str | None = None
    scalar: str = "str"


def _unwrap(node: ast.expr) -> ast.expr:
    """``Optional[X]`` / ``X | None`` / ``Union[X, None]`` -> ``X``."""
    if isinstance(node, ast.Subscript) and _name(node.value) in ("Optional", "typing.Optional"):
        return node.slice
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        sides = [s for s in (node.left, node.right) if not (isinstance(s, ast.Constant) and s.value is None)]
        if len(sides) == 1:
            return sides[0]
    if isinstance(node, ast.Subscript) and _name(node.value) in ("Union", "typing.Union"):
        elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        rest = [e for e in elts if not (isinstance(e, ast.Constant) and e.value is None)]
        if len(rest) == 1:
            return rest[0]
    return node


def field_type(node: ast.expr) -> FieldType:
    inner = _unwrap(node)
    out = FieldType(inner=inner)
    if isinstance(inner, ast.Subscript) and _name(inner.value) in ("Literal", "typing.Literal"):
        elts = inner.slice.elts if isinstance(inner.slice, ast.Tuple) else [inner.slice]
        out.literal = [ast.literal_eval(e) for e in elts]
    elif isinstance(inner, ast.Subscript) and _name(inner.value) in ("list", "List", "typing.List"):
        out.list_of = _name(inner.slice) or "str"
    elif isinstance(inner, ast.Name):
        out.scalar = inner.id
    return out


def _py_type(name: str) -> str:
    """What ``_infer_type_func`` maps an annotation to: int, float, else str."""
    return name if name in ("int", "float") else "str"


def _arg_meta(meta: ast.expr) -> dict[str, ast.expr] | None:
    if isinstance(meta, ast.Constant) and isinstance(meta.value, str):
        return {"help": meta}
    if isinstance(meta, ast.Call) and _name(meta.func) in ("Arg", "arg_utils.Arg"):
        return {k.arg: k.value for k in meta.keywords if k.arg}
    return None


def field_option(wheel: Wheel, res: Resolver, module: str, rel: str, node: ast.AnnAssign) -> dict[str, Any] | None:
    """The option ``add_cli_args_from_dataclass`` registers for one annotated field (None: no CLI)."""
    ann = node.annotation
    if not (isinstance(ann, ast.Subscript) and _name(ann.value) in ("A", "Annotated", "typing.Annotated")):
        return None
    if not isinstance(ann.slice, ast.Tuple) or not isinstance(node.target, ast.Name):
        return None
    raw_type, *metas = ann.slice.elts
    meta = next((m for m in (_arg_meta(x) for x in metas) if m is not None), None)
    if meta is None or ("no_cli" in meta and res.value(meta["no_cli"], module)):
        return None
    name = node.target.id
    cli = res.value(meta["cli_name"], module) if "cli_name" in meta else "--" + name.replace("_", "-")
    aliases = res.value(meta["aliases"], module) if "aliases" in meta else []
    default = _field_default(res, module, node.value)
    opt: dict[str, Any] = {"flags": [cli, *(aliases or [])], "dest": name, "default": default, "required": False}
    ftype = field_type(raw_type)
    type_parser = _name(meta.get("type_parser"))
    choices = res.maybe(meta.get("choices"), module)
    nargs = res.value(meta["nargs"], module) if "nargs" in meta else ...
    if "action" in meta:
        action = _name(meta["action"])
        kw = meta.get("action_kwargs")
        pairs = zip(kw.keys, kw.values, strict=True) if isinstance(kw, ast.Dict) else ()
        kwargs = {res.value(k, module): v for k, v in pairs if k is not None}
        given = res.value(kwargs["nargs"], module) if "nargs" in kwargs else ...
        opt.update(action=action, nargs=action_nargs(wheel, action, given), type=_name(kwargs.get("type")),
                   choices=res.maybe(kwargs.get("choices"), module))
    elif ftype.literal is not None:
        opt.update(action="store", nargs=None, choices=choices or ftype.literal,
                   type=type_parser or _py_type(type(ftype.literal[0]).__name__ if ftype.literal else "str"))
    elif ftype.list_of is not None and type_parser is None:
        opt.update(action="store", nargs=nargs if nargs is not ... else "+", type=_py_type(ftype.list_of),
                   choices=choices)
    elif ftype.scalar == "bool" and type_parser is None:
        opt.update(action="store_true", nargs=0, type=None, choices=None)
    else:
        opt.update(action="store", nargs=None if nargs is ... else nargs, choices=choices,
                   type=type_parser or _py_type(ftype.scalar))
        required = res.value(meta["required"], module) if "required" in meta else None
        opt["required"] = bool(required is True or (required is None and default == {"expr": "<no default>"}))
    opt["hidden"] = _is_suppress(meta.get("help"))
    opt["help"] = None if opt["hidden"] else _help(res, module, meta.get("help"))
    opt["replaced_by"] = None
    opt["where"] = f"{rel}:{node.lineno}"
    return _boolean_optional(opt)


def _field_default(res: Resolver, module: str, node: ast.expr | None) -> Any:
    if node is None:
        return {"expr": "<no default>"}
    if isinstance(node, ast.Call) and _name(node.func) in ("msgspec.field", "dataclasses.field", "field"):
        kw = {k.arg: k.value for k in node.keywords if k.arg}
        factory = _name(kw.get("default_factory"))
        if factory in ("list", "dict"):
            return [] if factory == "list" else {}
        if "default" in kw:
            return res.maybe(kw["default"], module)
        return {"expr": ast.unparse(node)}
    return res.maybe(node, module)


def _help(res: Resolver, module: str, node: ast.expr | None) -> str | None:
    value = res.maybe(node, module)
    if isinstance(value, str):
        return value
    return render_string(node) if node is not None else None


def _boolean_optional(opt: dict[str, Any]) -> dict[str, Any]:
    """``BooleanOptionalAction`` registers ``--no-X`` beside every ``--X``."""
    if (opt.get("action") or "").endswith("BooleanOptionalAction"):
        opt["flags"] = [*opt["flags"], *("--no-" + f[2:] for f in opt["flags"] if f.startswith("--"))]
    return opt


def namespace_classes(wheel: Wheel, res: Resolver) -> list[tuple[str, str, ast.ClassDef]]:
    """(module, path, class) of every class whose fields ``ServerArgs`` registers as options."""
    found = wheel.module("sglang.srt.server_args")
    assert found is not None, "no sglang/srt/server_args.py in the wheel"
    rel, tree = found
    out = [("sglang.srt.server_args", rel, n) for n in tree.body
           if isinstance(n, ast.ClassDef) and n.name == "ServerArgs"]
    try:
        spaces = res.lookup("sglang.srt.server_args", "_INPUT_NAMESPACES")
    except Unresolved:
        return out
    assert isinstance(spaces, ast.List)
    for elt in spaces.elts:
        assert isinstance(elt, ast.Name)
        module = _import_source(tree, elt.id)
        mod = wheel.module(module)
        assert mod is not None, f"cannot find {module} for namespace {elt.id}"
        cls = next(n for n in mod[1].body if isinstance(n, ast.ClassDef) and n.name == elt.id)
        out.append((module, mod[0], cls))
    return out


def _import_source(tree: ast.Module, name: str) -> str:
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module and any((a.asname or a.name) == name for a in node.names):
            return node.module
    raise Unresolved(name)


# --- options from parser.add_argument calls (ServerArgs.add_cli_args) --------------------------------------------


def add_argument_options(wheel: Wheel, res: Resolver) -> list[dict[str, Any]]:
    found = wheel.module("sglang.srt.server_args")
    assert found is not None
    rel, tree = found
    func = next(
        n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "add_cli_args"
    )
    local: dict[str, ast.expr] = {}
    out = []
    for node in ast.walk(func):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            local[node.targets[0].id] = node.value
    for node in ast.walk(func):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        if node.func.attr != "add_argument":
            continue
        flags = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        if not flags or not flags[0].startswith("-"):
            continue
        kw = {k.arg: k.value for k in node.keywords if k.arg}
        action = _name(kw.get("action"))
        nargs = res.value(kw["nargs"], "sglang.srt.server_args", local) if "nargs" in kw else ...
        hidden = _is_suppress(kw.get("help"))
        default = res.maybe(kw.get("default"), "sglang.srt.server_args", local) if "default" in kw else None
        takes = action_nargs(wheel, action, nargs)
        opt = {
            "flags": flags,
            "dest": res.maybe(kw.get("dest"), "sglang.srt.server_args") or flags[0].lstrip("-").replace("-", "_"),
            "action": action or "store",
            "nargs": takes,
            "type": _name(kw["type"]) if "type" in kw else (None if takes == 0 else "str"),
            "choices": res.maybe(kw.get("choices"), "sglang.srt.server_args", local),
            "default": None if _is_suppress(kw.get("default")) else default,
            "required": bool(res.maybe(kw.get("required"), "sglang.srt.server_args")),
            "hidden": hidden,
            "help": None if hidden else _help(res, "sglang.srt.server_args", kw.get("help")),
            "replaced_by": res.maybe(kw.get("new_flag"), "sglang.srt.server_args"),
            "where": f"{rel}:{node.lineno}",
        }
        out.append(_boolean_optional(opt))
    return out


def all_options(wheel: Wheel) -> list[dict[str, Any]]:
    res = Resolver(wheel)
    options = []
    for module, rel, cls in namespace_classes(wheel, res):
        # A field declared twice in one class body is one dataclass field: the later declaration wins.
        fields = {n.target.id: n for n in cls.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}
        for node in fields.values():
            opt = field_option(wheel, res, module, rel, node)
            if opt is not None:
                options.append(opt)
    options += add_argument_options(wheel, res)
    for opt in options:
        if opt["type"] in ("int", "float") and isinstance(opt.get("choices"), dict):
            opt["choices"] = None
        if isinstance(opt.get("choices"), dict):  # a run-time list: not checked, but said
            opt["choices_from"] = opt["choices"]["expr"]
            opt["choices"] = None
    seen: dict[str, str] = {}
    for opt in options:
        for f in opt["flags"]:
            assert f not in seen, f"{f} registered twice ({seen[f]} and {opt['where']}): argparse would refuse"
            seen[f] = opt["where"]
    return sorted(options, key=lambda o: o["flags"][0])


# --- algorithms, messages, metrics, endpoints, environment ------------------------------------------------------


def algorithms(wheel: Wheel, options: list[dict[str, Any]]) -> dict[str, Any]:
    found = wheel.module("sglang.srt.speculative.spec_info")
    assert found is not None
    rel, tree = found
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "SpeculativeAlgorithm")
    members = [t.id for n in cls.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)]
    source = wheel.text(rel) or ""
    res = Resolver(wheel)
    try:
        reserved = res.value(res.lookup("sglang.srt.speculative.spec_registry", "_RESERVED_ALIASES"),
                             "sglang.srt.speculative.spec_registry")
    except Unresolved:
        reserved = []
    from_string = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "from_string")
    body = ast.unparse(from_string)
    assert "_RESERVED_ALIASES" not in body or "return cls.EAGLE" in body, "reserved aliases no longer mean EAGLE"
    spec_help = next((o["help"] for o in options if "--speculative-algorithm" in o["flags"]), "") or ""
    advertised = re.search(r"Builtins: ([A-Z0-9_, ]+)\.", spec_help)
    return {
        "names": sorted(m for m in members if m != "NONE"),
        "aliases": {a: "EAGLE" for a in sorted(reserved)},
        "advertised": [s.strip() for s in advertised.group(1).split(",")] if advertised else None,
        "case_insensitive": ".upper()" in body,
        "checked": "after parsing (no argparse choices): SpeculativeAlgorithm.from_string raises ValueError",
        "where": f"{rel}:{cls.lineno}",
        "plugins": "SpeculativeAlgorithm.register adds names at run time" if "def register" in source else None,
    }


def render_string(node: ast.expr) -> str:
    """A string literal or f-string as text, ``{expr}`` for each interpolation."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        parts = []
        for v in node.values:
            if isinstance(v, ast.Constant):
                parts.append(str(v.value))
            elif isinstance(v, ast.FormattedValue):
                conv = {115: "!s", 114: "!r", 97: "!a"}.get(v.conversion, "")
                spec = ":" + render_string(v.format_spec) if v.format_spec is not None else ""
                parts.append("{" + ast.unparse(v.value) + conv + spec + "}")
        return "".join(parts)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return render_string(node.left) + render_string(node.right)
    raise Unresolved(ast.unparse(node))


def _strings(tree: ast.Module) -> list[tuple[int, str]]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr | ast.Constant) and not isinstance(getattr(node, "value", None), bytes):
            try:
                text = render_string(node)
            except Unresolved:
                continue
            if isinstance(node, ast.Constant) and not isinstance(node.value, str):
                continue
            out.append((getattr(node, "lineno", 0), text))
    return out


def messages(wheel: Wheel) -> dict[str, Any]:
    sources = [n for n in wheel.names() if n.startswith("sglang/srt/") and n.endswith(".py")]
    texts = {n: wheel.text(n) or "" for n in sources}
    out: dict[str, Any] = {}
    for key, (literals, pattern) in MESSAGES.items():
        out[key] = None
        for rel in sorted(texts):
            if not any(lit in texts[rel] for lit in literals):
                continue
            found = wheel.module(rel[:-3].replace("/", "."))
            assert found is not None
            hit = next(((ln, s) for ln, s in _strings(found[1]) if re.search(pattern, s)), None)
            if hit is not None:
                out[key] = {"text": hit[1], "where": f"{rel}:{hit[0]}"}
                break
    return out


def metrics(wheel: Wheel) -> dict[str, str]:
    out = {}
    for rel in wheel.names():
        if not (rel.startswith("sglang/srt/") and rel.endswith(".py")) or '"sglang:' not in (wheel.text(rel) or ""):
            continue
        found = wheel.module(rel[:-3].replace("/", "."))
        assert found is not None
        for node in ast.walk(found[1]):
            if not (isinstance(node, ast.Call) and _name(node.func) in ("Counter", "Gauge", "Histogram", "Summary")):
                continue
            for k in node.keywords:
                if k.arg == "name" and isinstance(k.value, ast.Constant) and str(k.value.value).startswith("sglang:"):
                    out[str(k.value.value)] = str(_name(node.func)).lower()
    return dict(sorted(out.items()))


def endpoints(wheel: Wheel) -> list[str]:
    """The HTTP routes of interest the server registers (``/metrics`` is mounted in ``srt/utils``)."""
    texts = [wheel.text(n) or "" for n in wheel.names() if n.startswith(("sglang/srt/entrypoints/http_server",
                                                                          "sglang/srt/utils/common"))]
    return [e for e in ENDPOINTS if any(f'"{e}"' in t for t in texts)]


def environment(wheel: Wheel) -> dict[str, Any]:
    found = wheel.module("sglang.srt.environ")
    out: dict[str, Any] = {}
    if found is None:
        return out
    for node in ast.walk(found[1]):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            if ENV_PATTERN.match(name) and isinstance(node.value, ast.Call):
                kind = (_name(node.value.func) or "").removeprefix("Env").lower()
                default = Resolver(wheel).maybe(node.value.args[0], "sglang.srt.environ") if node.value.args else None
                out[name] = {"type": kind, "default": default}
    return out


def parser_settings(wheel: Wheel) -> dict[str, Any]:
    found = wheel.module("sglang.srt.server_args")
    assert found is not None
    func = next(n for n in ast.walk(found[1]) if isinstance(n, ast.FunctionDef) and n.name == "prepare_server_args")
    call = next(n for n in ast.walk(func) if isinstance(n, ast.Call) and _name(n.func) == "argparse.ArgumentParser")
    kw = {k.arg: ast.literal_eval(k.value) for k in call.keywords if k.arg}
    return {"prog": kw.get("prog"), "allow_abbrev": kw.get("allow_abbrev", True)}


# --- putting it together -----------------------------------------------------------------------------------------


def download(version: str, into: Path) -> Path:
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", f"sglang=={version}",
           "-d", str(into)]
    subprocess.run(cmd, check=True)
    wheels = sorted(into.glob(f"sglang-{version}-*.whl"))
    if not wheels:
        raise SystemExit(f"pip download gave no sglang {version} wheel in {into}")
    return wheels[0]


def build_table(wheel_path: Path, version: str) -> dict[str, Any]:
    wheel = Wheel(wheel_path)
    options = all_options(wheel)
    return {
        "format": FORMAT,
        "name": version,
        "version": version,
        "variant": "mainline",
        "source": f"sglang {version} wheel from PyPI, read with ast (never imported)",
        "wheel": wheel_path.name,
        "wheel_sha256": hashlib.sha256(wheel_path.read_bytes()).hexdigest(),
        "parser": parser_settings(wheel),
        "speculative_algorithms": algorithms(wheel, options),
        "endpoints": endpoints(wheel),
        "metrics": metrics(wheel),
        "environment": environment(wheel),
        "messages": messages(wheel),
        "requires": {},
        "options": options,
    }


def ddtree_table(base: dict[str, Any]) -> dict[str, Any]:
    table = json.loads(json.dumps(base))
    assert not any("--speculative-ddtree-budget" in o["flags"] for o in table["options"]), "base already has DDTree"
    table.update(name=DDTREE_NAME, variant="ddtree", source=DDTREE_SOURCE, base_version=base["version"],
                 pull_request="https://github.com/sgl-project/sglang/pull/29907", head=DDTREE_HEAD)
    table["options"] = sorted([*table["options"], DDTREE_OPTION], key=lambda o: o["flags"][0])
    algos = table["speculative_algorithms"]
    algos["names"] = sorted({*algos["names"], "DDTREE"})
    if algos["advertised"]:
        algos["advertised"] = [*algos["advertised"], "DDTREE"]
    table["environment"] = {**table["environment"], **DDTREE_ENV}
    table["messages"] = {**table["messages"], **{k: {"text": t, "where": w} for k, (t, w) in DDTREE_MESSAGES.items()}}
    table["requires"] = {"DDTREE": DDTREE_REQUIRES}
    return table


def seed_deployment(table: dict[str, Any], study: Path) -> dict[str, Any]:
    """Which flags of the seed deployment's command this table accepts (checked with tune's own rule)."""
    sys.path.insert(0, str(ROOT))
    from tuner.dialects import FlagTable

    flags = FlagTable(table)
    command = tomllib.loads(study.read_text())["target"]["command"]
    verdicts = {}
    for arg in command:
        if arg.startswith("--"):
            verdicts[arg] = flags.verdict(arg)
    return {"study": str(study.relative_to(ROOT)), "flags": verdicts, "parse_errors": flags.parse_errors(command)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("version", nargs="?", help=f"sglang version on PyPI (--ddtree: default {DDTREE_BASE})")
    ap.add_argument("--wheel", type=Path, help="read this wheel instead of downloading one")
    ap.add_argument("--ddtree", action="store_true", help="the DDTree branch table (PR #29907) on its base version")
    ap.add_argument("--out", help="output file, '-' for stdout (default: tuner/dialects/sglang_flags/NAME.json)")
    args = ap.parse_args(argv)
    version = args.version or (DDTREE_BASE if args.ddtree else None)
    if version is None:
        ap.error("give a version (e.g. 0.5.23) or --ddtree")
    with tempfile.TemporaryDirectory() as tmp:
        wheel = args.wheel or download(version, Path(tmp))
        table = build_table(wheel, version)
    if args.ddtree:
        table = ddtree_table(table)
        table["seed_deployment"] = seed_deployment(table, ROOT / "studies" / "kimi-k26-ddtree.toml")
    missing = [k for k, v in table["messages"].items() if v is None]
    if missing:
        print(f"not in sglang {version}: {', '.join(missing)}", file=sys.stderr)
    text = json.dumps(table, indent=1, sort_keys=False) + "\n"
    if args.out == "-":
        sys.stdout.write(text)
        return 0
    out = Path(args.out) if args.out else TABLES / f"{table['name']}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    print(f"wrote {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}: {len(table['options'])} options, "
          f"algorithms {', '.join(table['speculative_algorithms']['names'])}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
