"""``tune init -- <launch command>``: a commented study file for a server that already works.

The dialect is detected from the command (or ``--server``); the search space is what that dialect knows is
tunable for speculative decoding and the command actually uses (DDTree budget / top-k / window / block size for
SGLang, ``num_speculative_tokens`` inside vLLM's ``--speculative-config``, ``--draft_model_num_pred_tokens`` for
llama-cpp-python), each range widened to hold the command's own value, which becomes the baseline trial.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
from pathlib import Path
from typing import Any

from tuner.cli._init_sglang import drafter_block_size, versioned_dialect
from tuner.dialects import SERVER_CHOICES, BaseServerDialect, get_dialect
from tuner.errors import ConfigError, TuneError

__all__ = ["init_study_text", "register"]


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "init",
        help="write a commented study file for a launch command: tune init [--out FILE] -- COMMAND...",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--out", metavar="FILE", type=Path, default=Path("study.toml"), help="(default: study.toml)")
    p.add_argument("--server", choices=SERVER_CHOICES, default="auto", help="the server dialect (default: detect)")
    p.add_argument("--name", metavar="NAME", help="study name (default: the file name)")
    p.add_argument("--server-version", metavar="V", default="auto",
                   help="SGLang version to check the command against (0.5.23, ddtree-pr29907; default: from it)")
    p.add_argument("launch", nargs=argparse.REMAINDER, metavar="-- COMMAND", help="the server's launch command")
    p.set_defaults(func=cmd_init)


def cmd_init(args: argparse.Namespace) -> int:
    argv = args.launch[1:] if args.launch[:1] == ["--"] else list(args.launch)
    if not argv:
        raise ConfigError(file=None, key="tune init", expected="a launch command after --, e.g. -- vllm serve M")
    out: Path = args.out
    if out.exists():
        raise TuneError(f"{out} exists: tune init never overwrites a file (choose another --out)")
    text = init_study_text(argv, server=args.server, name=args.name or out.stem, server_version=args.server_version)
    out.write_text(text)
    from tuner.config import load_config

    config = load_config(out)  # what we wrote must load; a bug here must not reach the user's night of trials
    print(
        f"wrote {out}: {config.dialect.name} server, {len(config.space.params)} tuned parameter(s), baseline "
        + ", ".join(f"{k}={v}" for k, v in config.baseline.items())
    )
    print(f"next: tune check --config {out} && tune start --config {out} --trials {config.study.trials}")
    return 0


def _flag_value(argv: list[str], flag: str) -> str | None:
    """The value the command gives ``flag`` (``--f v`` or ``--f=v``), '' for a bare switch, None if absent."""
    for i, arg in enumerate(argv):
        name, eq, inline = arg.partition("=")
        if name == flag:
            if eq:
                return inline
            return argv[i + 1] if i + 1 < len(argv) and not argv[i + 1].startswith("--") else ""
    return None


def _number(text: str) -> Any:
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    if re.fullmatch(r"-?(\d+\.\d*|\.\d+)", text):
        return float(text)
    return text


def _command_value(entry: dict[str, Any], argv: list[str], env: dict[str, str]) -> Any:
    """The suggested parameter's value in the launch command (None when the command does not set it)."""
    if "json_flag" in entry:
        raw = _flag_value(argv, entry["json_flag"])
        try:
            obj = json.loads(raw) if raw else {}
        except ValueError:
            return None
        return obj.get(entry["key"]) if isinstance(obj, dict) else None
    for flag in (entry.get("flag"), *entry.get("aliases", ())):
        text = _flag_value(argv, flag) if flag else None
        if text:
            return _number(text)
    return int(env[entry["env"]]) if entry.get("env") in env else None


def _fit(entry: dict[str, Any], value: Any) -> dict[str, Any] | None:
    """The entry with its range or choices widened to hold ``value`` (None when the value cannot fit)."""
    e = {k: v for k, v in entry.items() if k != "requires"}
    if value is None:
        return e if ("default" in e or "absent" in e) else None
    if e["type"] == "categorical":
        if value not in e["choices"]:
            e["choices"] = [*e["choices"], value]
        return e
    if not isinstance(value, int | float) or (e["type"] == "int" and not isinstance(value, int)):
        return None
    e["low"], e["high"] = min(e["low"], value), max(e["high"], value)
    if "step" in e and (value - e["low"]) % e["step"]:
        del e["step"]  # an off-grid baseline must stay reachable
    return e


def suggest_space(dialect: BaseServerDialect, argv: list[str], env: dict[str, str]) -> list[dict[str, Any]]:
    out = []
    for entry in dialect.tunable_for(argv, env, trained_block_size=drafter_block_size(argv)):
        need_flag, need_value = entry.get("requires", (None, None))
        if need_flag is not None:
            have = _flag_value(argv, need_flag)
            if have is None or (need_value is not None and have != need_value):
                continue
        fitted = _fit(entry, _command_value(entry, argv, env))
        if fitted is not None:
            out.append(fitted)
    return out


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return json.dumps(value)  # a TOML basic string: JSON's escapes are TOML's


def _base_url(dialect: BaseServerDialect, argv: list[str]) -> str:
    port = _flag_value(argv, dialect.port_flag) or (str(dialect.default_port) if dialect.default_port else None)
    if not port:
        raise ConfigError(file=None, key="tune init", expected=f"a {dialect.port_flag} flag in the command", got=None)
    host = _flag_value(argv, dialect.host_flag) or "127.0.0.1"
    host = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
    return f"http://{host}:{port}"


def _split_env(argv: list[str]) -> tuple[list[str], dict[str, str]]:
    """``[env] K=V ... program args``: the environment is part of the configuration (DDTree's top-k)."""
    env: dict[str, str] = {}
    rest = argv[1:] if argv[:1] == ["env"] else argv
    while rest and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", rest[0]):
        key, _, value = rest[0].partition("=")
        env[key] = value
        rest = rest[1:]
    return rest, env


_SCENARIOS = """\
[benchmark]
warmup = "auto"           # warm up only once the study's own first passes show they are slower
warmup_requests = 2
min_repeats = 1           # sequential repeats: once the study knows its noise, one repeat can settle a config
max_repeats = 4
precision = 0.02          # stop when the objective's interval is within +-2%

# Coding requests (HumanEval problems): speculative decoding accepts far more on code than on prose, so the
# workload you tune on must look like the one you serve. The prompt length is each problem's own.
[[benchmark.scenarios]]
name = "c1-code"
concurrency = 1
prompt_tokens = 256
prompts = "humaneval"
output_tokens = 128
requests = 4

# Random words of a fixed length (prompts = "random"); or a JSONL file of your own chats:
# prompts = "chats.jsonl" with {{"messages": [...]}} or ShareGPT {{"conversations": [...]}} per line.
[[benchmark.scenarios]]
name = "c{conc}-chat"
concurrency = {conc}
prompt_tokens = 512
output_tokens = 128
requests = {requests}

[objective]
kind = "geomean"
metric = "output_tok_s"

# A few HumanEval problems answered before each benchmark and run in a sandbox: a config that breaks the
# model's answers is infeasible however fast it is.
[gate]
enabled = true
count = 3
seed = 0
min_passed = 1             # raise it for a strong model: the baseline must pass too
max_tokens = 512
"""


def _space_text(space: list[dict[str, Any]]) -> list[str]:
    lines = []
    for entry in space:
        lines.append(f"[space.{entry['name']}]")
        lines.extend(f"{k} = {_toml(v)}" for k, v in entry.items() if k != "name")
        lines.append("")
    return lines


def _constraints_text(dialect: BaseServerDialect, space: list[dict[str, Any]]) -> list[str]:
    lines = []
    for left, op, right in dialect.constraints_for([e["name"] for e in space]):
        lines += ["[[constraints]]", f"left = {_toml(left)}", f"op = {_toml(op)}", f"right = {_toml(right)}", ""]
    return lines


def _capped_trials(text: str) -> str:
    """The study file with ``trials`` no larger than the distinct configurations its space holds."""
    from tuner.config import parse_config
    from tuner.space import count_configs

    config = parse_config(text, source="(tune init)", base_dir=Path.cwd())
    held = count_configs(config.space, stop_at=20)
    if held is None or held >= 20:
        return text
    return text.replace("\ntrials = 20\n", f"\ntrials = {held}             # every configuration the space holds\n", 1)


def init_study_text(argv: list[str], *, server: str = "auto", name: str = "study", server_version: str = "auto") -> str:
    """A commented study file for ``argv`` (see the module docstring); raises ConfigError if none can be made."""
    command, env = _split_env(argv)
    dialect = versioned_dialect(get_dialect(server, command), command, env, server_version)
    space = suggest_space(dialect, command, env)
    if not space:
        raise ConfigError(
            file=None,
            key="tune init",
            expected=f"a speculative-decoding flag the {dialect.name} dialect knows how to tune in the command "
            "(or --server to name the server); write [space] by hand for other knobs",
            got=shlex.join(command),
        )
    conc = 1 if dialect.name == "llama.cpp" else 4  # llama-cpp-python serves one request at a time
    lines = [
        f"# Written by `tune init` from: {shlex.join(argv)}",
        f"# {dialect.describe()[0]}",
        *(f"# {m.strip()}" for m in dialect.describe()[1:]),
        "# Check it with `tune check --config THIS_FILE` (add --cycle for one restart), then `tune start`.",
        "",
        "[study]",
        f"name = {_toml(name)}",
        "trials = 20",
        'on_exit = "baseline"      # put the base command back when the study ends',
        "",
        "[target]",
        f"server = {_toml(dialect.name)}" + ('       # detected; "auto" re-detects' if server == "auto" else ""),
        *([f"server_version = {_toml(server_version)}"] if server_version != "auto" else []),
        'transport = "local"       # "ssh" + [target.ssh] for a remote host',
        'manager = "process"       # "systemd" + [target.systemd] for a unit',
        f"base_url = {_toml(_base_url(dialect, command))}",
        f"command = {_toml(command)}",
        *([f"env = {{ {', '.join(f'{k} = {_toml(v)}' for k, v in env.items())} }}"] if env else []),
        "",
        "[readiness]",
        "timeout_s = 900           # weights of a big model take minutes to load",
        "",
        "# Suggested from the flags the server's dialect knows are tunable; the command's values are the baseline.",
        *_space_text(space),
        *_constraints_text(dialect, space),
        _SCENARIOS.format(conc=conc, requests=4 * conc),
    ]
    return _capped_trials("\n".join(lines))
