"""``tune init -- <launch command>``: a commented study file for a server that already works.

The dialect is detected from the command (or ``--server``); the search space is what that dialect knows is
tunable for speculative decoding and the command actually uses (DDTree budget / top-k / window / block size for
SGLang, ``num_speculative_tokens`` inside vLLM's ``--speculative-config``, ``--spec-type`` and the drafter's
lengths for llama-server, ``--draft_model_num_pred_tokens`` for llama-cpp-python), each range widened to hold the
command's own value, which becomes the baseline trial. A llama-server command is first brought up to date
(:func:`llama_server_command`). The study asks for no more trials than the space holds configurations
(:func:`tuner.space.count_configs`). Its requests are sized to what the server holds (``_init_sizing``): asked of
the server where it answers (``--ask-server`` starts it once), read from the launch flags otherwise.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
from functools import partial
from pathlib import Path
from typing import Any

from tuner.cli._init_sizing import Measured, sizes
from tuner.cli._init_versions import versioned_dialect
from tuner.config import Slo, parse_slo_option
from tuner.dialects import SERVER_CHOICES, BaseServerDialect, get_dialect
from tuner.errors import ConfigError, TuneError
from tuner.spec import flag_value

__all__ = ["init_study", "init_study_text", "register"]


def _plain(doc: str) -> str:
    """A docstring as ``--help`` prints it: without Sphinx roles and literal quotes (``:func:`x``` -> ``x``)."""
    return re.sub(r":\w+:`~?([^`]+)`", r"\1", doc).replace("``", "")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "init",
        help="write a commented study file for a launch command: tune init [--out FILE] -- COMMAND...",
        description=_plain(__doc__ or ""),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--out", metavar="FILE", type=Path, default=Path("study.toml"), help="the study file to write (never replaced)"
    )
    p.add_argument("--server", choices=SERVER_CHOICES, default="auto", help="the server dialect (default: detect)")
    p.add_argument("--name", metavar="NAME", help="study name (default: the file name)")
    p.add_argument("--server-version", metavar="V", default="auto",
                   help="SGLang version to check the command against (0.5.23, ddtree-pr29907; default: from it)")
    p.add_argument("--slo", metavar="LIMITS",
                   help="a latency promise, such as ttft=1,tpot=0.04 (seconds; also e2e, attainment=0.99, "
                        "rate=REQ/S): writes an open-loop scenario at that rate, promised that latency")
    p.add_argument("--slo-scope", choices=("open-loop", "all"), default="open-loop",
                   help="which scenarios --slo judges: the open-loop scenario it adds (default), or all of them "
                        "(a top-level [slo])")
    p.add_argument("--ask-server", action="store_true",
                   help="start the server once (unless it already answers) to ask its context and count the "
                        "prompts in its tokens; without it a running server is asked, else the flags are read")
    p.add_argument("launch", nargs=argparse.REMAINDER, metavar="-- COMMAND", help="the server's launch command")
    p.set_defaults(func=cmd_init)


def cmd_init(args: argparse.Namespace) -> int:
    argv = args.launch[1:] if args.launch[:1] == ["--"] else list(args.launch)
    if not argv:
        raise ConfigError(file=None, key="tune init", expected="a launch command after --, e.g. -- vllm serve M")
    from tuner.cli._output import output_file, writing
    from tuner.config import load_config
    from tuner.report import tune_command

    out: Path = args.out
    if out.exists():
        raise TuneError(f"{out} exists: tune init never overwrites a file (choose another --out)")
    output_file(out, option="--out")
    text, notes = init_study(
        argv, server=args.server, name=args.name or out.stem, server_version=args.server_version, slo=args.slo,
        slo_scope=args.slo_scope, ask_server=args.ask_server,
    )
    with writing(out, what=f"cannot write {out}"):
        out.write_text(text)
    for note in notes:
        print(f"note: {note}")
    config = load_config(out)  # what we wrote must load; a bug here must not reach the user's night of trials
    print(
        f"wrote {out}: {config.dialect.name} server, {len(config.space.params)} tuned parameter(s), baseline "
        + ", ".join(f"{k}={v}" for k, v in config.baseline.items())
    )

    def command(verb: str) -> str:
        return tune_command(verb, config, storage=config.study.storage, study=config.study.name)

    print(f"next: {command('check')} && {command(f'start --trials {config.study.trials}')}")
    return 0


def _number(text: str) -> Any:
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    if re.fullmatch(r"-?(\d+\.\d*|\.\d+)", text):
        return float(text)
    return text


def _command_value(entry: dict[str, Any], argv: list[str], env: dict[str, str]) -> Any:
    """The suggested parameter's value in the launch command (None when the command does not set it)."""
    if "json_flag" in entry:
        raw = flag_value(argv, entry["json_flag"])
        try:
            obj = json.loads(raw) if raw else {}
        except ValueError:
            return None
        return obj.get(entry["key"]) if isinstance(obj, dict) else None
    for flag in (entry.get("flag"), *entry.get("aliases", ())):
        text = flag_value(argv, flag) if flag else None
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


def _required(entry: dict[str, Any], argv: list[str]) -> bool:
    """Whether the command has what ``entry['requires']`` asks for (see ``BaseServerDialect.tunable``)."""
    need_flag, need_value = entry.get("requires", (None, None))
    if need_flag is None:
        return True
    have = flag_value(argv, need_flag)
    if have is None or need_value is None:
        return have is not None
    if isinstance(need_value, tuple):
        return any(v in need_value for v in have.split(","))
    return bool(have == need_value)


def suggest_space(dialect: BaseServerDialect, argv: list[str], env: dict[str, str]) -> list[dict[str, Any]]:
    out = []
    for entry in dialect.tunable_for(argv, env):
        if not _required(entry, argv):
            continue
        fitted = _fit(entry, _command_value(entry, argv, env))
        if fitted is not None:
            out.append(fitted)
    return dialect.init_space(out, argv)


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return json.dumps(value)  # a TOML basic string: JSON's escapes are TOML's


def _base_url(dialect: BaseServerDialect, argv: list[str]) -> str:
    port = flag_value(argv, dialect.port_flag) or (str(dialect.default_port) if dialect.default_port else None)
    if not port:
        raise ConfigError(file=None, key="tune init", expected=f"a {dialect.port_flag} flag in the command", got=None)
    host = flag_value(argv, dialect.host_flag) or "127.0.0.1"
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
{sizing}[benchmark]
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
prompt_tokens = {code_prompt}
prompts = "humaneval"
output_tokens = {output}
requests = 4

# Random words of a fixed length (prompts = "random"); or a JSONL file of your own chats:
# prompts = "chats.jsonl" with {{"messages": [...]}} or ShareGPT {{"conversations": [...]}} per line.
[[benchmark.scenarios]]
name = "c{conc}-chat"
concurrency = {conc}
prompt_tokens = {chat_prompt}
output_tokens = {output}
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
max_tokens = {gate_tokens}
"""


def _space_text(space: list[dict[str, Any]]) -> list[str]:
    lines = []
    for entry in space:
        lines.append(f"[space.{entry['name']}]")
        lines.extend(f"{k} = {_toml(v)}" for k, v in entry.items() if k not in ("name", "when"))
        if "when" in entry:
            lines.append("when = { " + ", ".join(f"{k} = {_toml(v)}" for k, v in entry["when"].items()) + " }")
        lines.append("")
    return lines


def _constraints_text(dialect: BaseServerDialect, space: list[dict[str, Any]]) -> list[str]:
    lines = []
    for left, op, right in dialect.constraints_for([e["name"] for e in space]):
        lines += ["[[constraints]]", f"left = {_toml(left)}", f"op = {_toml(op)}", f"right = {_toml(right)}", ""]
    return lines


def init_study_text(argv: list[str], *, server: str = "auto", name: str = "study", server_version: str = "auto") -> str:
    """A commented study file for ``argv`` (see the module docstring); raises ConfigError if none can be made."""
    return init_study(argv, server=server, name=name, server_version=server_version)[0]


def init_study(
    argv: list[str], *, server: str = "auto", name: str = "study", server_version: str = "auto",
    slo: str | None = None, slo_scope: str = "open-loop", ask_server: bool = False,
) -> tuple[str, list[str]]:
    """The study file's text, and a note for each change made to the command (said to the user too); ``slo``:
    the ``--slo`` option's text (an open-loop scenario with that SLO: its own, or ``slo_scope="all"``: a
    top-level ``[slo]`` every scenario is judged by)."""
    promise = parse_slo_option(slo) if slo is not None else None  # bad input fails before anything is read
    command, env = _split_env(argv)
    dialect = versioned_dialect(get_dialect(server, command), command, env, server_version)
    command, notes = dialect.init_command(command)
    space = suggest_space(dialect, command, env)
    if not space:
        raise ConfigError(
            file=None,
            key="tune init",
            expected=f"a speculative-decoding flag the {dialect.name} dialect knows how to tune in the command "
            "(or --server to name the server); write [space] by hand for other knobs",
            got=shlex.join(command),
        )
    conc = dialect.init_concurrency
    size = partial(sizes, dialect, command, env, space, conc=conc, streams=10**6 if promise else conc,
                   code_words=_code_words())  # fmt: skip
    text = _study_text(argv, command, env, dialect, space, notes, name=name, server=server,
                       server_version=server_version, conc=conc, promise=promise, slo_scope=slo_scope,
                       sized=size(measured=None))  # fmt: skip
    measured = _ask(text, ask_server)
    if measured is not None:
        text = _study_text(argv, command, env, dialect, space, notes, name=name, server=server,
                           server_version=server_version, conc=conc, promise=promise, slo_scope=slo_scope,
                           sized=size(measured=measured))  # fmt: skip
    return text, notes


def _code_words() -> int:
    """The words of the longest HumanEval request (the coding scenario's prompts)."""
    from tuner.config import chat_text, load_chats

    return max(len(chat_text([{"role": r, "content": c} for r, c in chat]).split()) for chat in load_chats("humaneval"))


def _ask(text: str, ask_server: bool) -> Measured | None:
    """What the server says of its capacity and of the study's prompts: asked where it answers already, started
    once to ask with ``ask_server`` (said, with how long it took), None where it cannot be asked."""
    from tuner.cli._init_ask import ask_server as ask

    return ask(text, start=ask_server)


def _study_text(
    argv: list[str], command: list[str], env: dict[str, str], dialect: BaseServerDialect, space: list[dict[str, Any]],
    notes: list[str], *, name: str, server: str, server_version: str, conc: int,
    promise: tuple[Slo, float | None] | None, slo_scope: str, sized: dict[str, Any],
) -> str:
    lines = [
        f"# Written by `tune init` from: {shlex.join(argv)}",
        *(f"# {note}" for note in notes),
        f"# {dialect.describe()[0]}",
        *(f"# {m.strip()}" for m in dialect.describe()[1:]),
        "# Check it with `tune check --config THIS_FILE` (add --cycle for one restart), then `tune start`.",
        "",
        "[study]",
        f"name = {_toml(name)}",
        _TRIALS_LINE,
        'on_exit = "baseline"      # put the base command back when the study ends',
        "",
        *_target_text(dialect, command, env, server=server, server_version=server_version),
        "[readiness]",
        "timeout_s = 900           # weights of a big model take minutes to load",
        "",
        "# Suggested from the flags the server's dialect knows are tunable; the command's values are the baseline.",
        *_space_text(space),
        *_constraints_text(dialect, space),
        _SCENARIOS.format(conc=conc, requests=4 * conc, **sized),
        *(_slo_text(*promise, conc=conc, everywhere=slo_scope == "all", sizes=sized) if promise else []),
    ]
    return _with_trials("\n".join(lines))


def _slo_text(slo: Slo, rate: float | None, *, conc: int, everywhere: bool, sizes: dict[str, Any]) -> list[str]:
    """An open-loop scenario that judges the SLO: requests at ``rate`` (default: half a request per stream of the
    chat scenario per second), whatever is in flight; the SLO is that scenario's own table (``everywhere``: a
    top-level ``[slo]`` that judges the closed-loop scenarios too)."""
    rate = rate if rate is not None else conc / 2
    name = f"chat-{rate:g}rps".replace(".", "_")
    limits = [f"{key} = {_toml(value)}" for key, value in slo.limits().items()]
    scope = "every scenario" if everywhere else "this scenario's requests only"
    return [
        f"# Open loop: requests arrive {rate:g} per second (Poisson, the same arrivals for every trial) whatever",
        "# is in flight, as a service's users send them; set the rate to your peak.",
        "[[benchmark.scenarios]]",
        f"name = {_toml(name)}",
        f"rate = {_toml(float(rate))}",
        f"prompt_tokens = {sizes['chat_prompt']}",
        f"output_tokens = {sizes['output']}",
        f"requests = {max(60, round(rate * 30))}",
        "",
        f"# The latency promised to each request ({scope}): a config whose attainment is confidently below",
        "# the share is infeasible, never recommended (docs/configuration.md#slo).",
        "[slo]" if everywhere else "[benchmark.scenarios.slo]",
        *limits,
        f"attainment = {_toml(slo.attainment)}",
        "",
    ]


def _target_text(
    dialect: BaseServerDialect, command: list[str], env: dict[str, str], *, server: str, server_version: str
) -> list[str]:
    return [
        "[target]",
        f"server = {_toml(dialect.name)}" + ('       # detected; "auto" re-detects' if server == "auto" else ""),
        *([f"server_version = {_toml(server_version)}"] if server_version != "auto" else []),
        'transport = "local"       # "ssh" + [target.ssh] for a remote host',
        'manager = "process"       # "systemd" + [target.systemd] for a unit',
        f"base_url = {_toml(_base_url(dialect, command))}",
        f"command = {_toml(command)}",
        *([f"env = {{ {', '.join(f'{k} = {_toml(v)}' for k, v in env.items())} }}"] if env else []),
        "",
    ]


_TRIALS_LINE = "trials = {trials}{why}"
DEFAULT_TRIALS = 20


def _with_trials(text: str) -> str:
    """The study file with its trial count: :data:`DEFAULT_TRIALS`, or every config of a smaller space."""
    from pathlib import Path

    from tuner.config import parse_config
    from tuner.space import count_configs

    draft = text.replace(_TRIALS_LINE, f"trials = {DEFAULT_TRIALS}", 1)
    size = count_configs(parse_config(draft, source="(tune init)", base_dir=Path(".")).space, limit=DEFAULT_TRIALS)
    if size is None:
        return draft
    why = f"             # every config of the space: it holds {size}"
    return text.replace(_TRIALS_LINE, f"trials = {size}{why}", 1)
