"""The server-dialect contract: every dialect in tuner.dialects.DIALECTS passes all of these."""

from __future__ import annotations

import re

import pytest

from tuner.dialects import (
    DIALECTS,
    BaseServerDialect,
    ServerSnapshot,
    Verdict,
    VersionedFlags,
    default_dialect,
    detect_dialect,
    get_dialect,
)
from tuner.dialects._generic import GenericDialect
from tuner.space import Param, SearchSpace, baseline_params, render
from tuner.spec import LaunchSpec

# A launch command each dialect must recognise (generic: a command no other dialect claims).
COMMANDS: dict[str, list[str]] = {
    "sglang": ["python3", "-m", "sglang.launch_server", "--model-path", "/m", "--port", "30000"],
    "vllm": ["vllm", "serve", "meta-llama/Llama-3.1-8B", "--port", "8000"],
    "llama.cpp": ["python3", "-m", "llama_cpp.server", "--model", "/m.gguf", "--port", "8000"],
    "llama-server": ["/opt/llama.cpp/bin/llama-server", "-m", "/m.gguf", "--port", "8080"],
    "generic": ["/opt/bin/my-server", "--listen", "0.0.0.0:9000"],
}

# How each server's --help lists its flags (abridged from the real programs' output).
HELP = {
    "sglang": "  --model-path MODEL_PATH\n  --enable-metrics      Enable log prometheus metrics.\n",
    "vllm": "  --enable-prefix-caching, --no-enable-prefix-caching\n  --speculative-config SPECULATIVE_CONFIG\n",
    "llama.cpp": "  --model MODEL  The path to the model.\n  --flash_attn FLASH_ATTN  Use flash attention.\n",
    "llama-server": "--metrics                               enable prometheus compatible metrics endpoint\n"
    "-md,   --spec-draft-model, --model-draft FNAME  draft model for speculative decoding\n",
    "generic": "usage: my-server [--listen ADDR] [--verbose]\n",
}

# Each measuring dialect's own acceptance counters after 10 verify steps that delivered 35 tokens (the draft
# counters count 25 accepted drafts plus a bonus token per step).
COUNTERS = {
    "sglang": 'sglang:generation_tokens_total{model_name="m"} 35\nsglang:spec_verify_calls_total{model_name="m"} 10\n',
    "vllm": "vllm:spec_decode_num_accepted_tokens_total 25\nvllm:spec_decode_num_drafts_total 10\n",
    "llama-server": "llamacpp:spec_decode_num_accepted_tokens_total 25\nllamacpp:spec_decode_num_drafts_total 10\n",
}

# The model files each sample command serves, as a fleet's fingerprint records them (studies hold these: a
# change here is a change of every stored fingerprint; llama-server's -m is not among them).
MODELS = {"sglang": {"model-path": "/m"}, "vllm": {}, "llama.cpp": {"model": "/m.gguf"}, "llama-server": {},
          "generic": {}}

# A version each dialect with versions knows (its [target] server_version); the others have none.
VERSION_NAMES = {"sglang": "0.5.23"}


@pytest.fixture(params=sorted(DIALECTS))
def dialect(request: pytest.FixtureRequest) -> BaseServerDialect:
    return DIALECTS[request.param](reason="test")


def test_every_dialect_has_a_sample_command() -> None:
    assert set(COMMANDS) == set(DIALECTS) == set(HELP)


def test_detected_from_its_launch_command(dialect: BaseServerDialect) -> None:
    detected = detect_dialect(COMMANDS[dialect.name])
    assert type(detected) is type(dialect)
    assert detected.reason  # the user is told why
    assert type(get_dialect(dialect.name, COMMANDS["generic"])) is type(dialect)  # an explicit choice wins


def test_no_other_dialect_claims_its_command(dialect: BaseServerDialect) -> None:
    for name, cls in DIALECTS.items():
        if name != dialect.name:
            assert cls.matches(COMMANDS[dialect.name]) is None, (name, dialect.name)


def test_endpoints_are_paths_or_absent(dialect: BaseServerDialect) -> None:
    for path in (dialect.health_path, dialect.flush_path, dialect.metrics_path, dialect.tokenize_path):
        assert path is None or path.startswith("/")
    assert dialect.acceptance in (None, "server_info", "prometheus")
    if dialect.acceptance == "prometheus":
        assert dialect.metrics_path
    assert dialect.port_flag.startswith("--") and dialect.host_flag.startswith("--")


def test_log_patterns_compile_and_phases_are_distinct(dialect: BaseServerDialect) -> None:
    labels = [label for label, _ in dialect.phase_markers]
    assert len(labels) == len(set(labels))
    for pattern in (*dialect.fatal_patterns, *(p for _, p in dialect.phase_markers)):
        re.compile(pattern)


@pytest.mark.parametrize("value", [True, False])
@pytest.mark.parametrize("in_base", [True, False])
def test_bool_flag_round_trips(dialect: BaseServerDialect, value: bool, in_base: bool) -> None:
    """What render writes for a bool, baseline_params reads back, whatever the base command held."""
    flag = "--enable-thing"
    space = SearchSpace(
        params=(
            Param(name="thing", kind="bool", flag=flag),
            Param(name="n", kind="int", low=1, high=9, flag="--n"),
        ),
        bool_style=dialect.bool_style,
    )
    base_argv = [*COMMANDS[dialect.name], *(dialect.bool_args(flag, not value) if in_base else []), "--n", "3"]
    spec = render(space, LaunchSpec(argv=tuple(base_argv)), {"thing": value, "n": 5})
    assert baseline_params(space, spec) == {"thing": value, "n": 5}
    assert spec.argv[: len(COMMANDS[dialect.name])] == tuple(COMMANDS[dialect.name])
    written = dialect.bool_args(flag, value)
    assert all(a.startswith("--") or a in ("true", "false") for a in written)


def test_help_listing(dialect: BaseServerDialect) -> None:
    flags = dialect.listed_flags(HELP[dialect.name])
    assert flags and all(f.startswith("--") for f in flags)
    assert "--no" not in flags and not any(f.endswith(",") for f in flags)


def test_describe_names_the_dialect_and_every_missing_capability(dialect: BaseServerDialect) -> None:
    lines = dialect.describe()
    assert lines[0].startswith(f"server dialect: {dialect.name}") and "test" in lines[0]
    text = "\n".join(lines[1:])
    assert ("no health endpoint" in text) == (dialect.health_path is None)
    assert ("no cache flush" in text) == (dialect.flush_path is None)
    assert ("no speculative acceptance" in text) == (dialect.acceptance is None)
    assert ("no startup log markers" in text) == (not dialect.phase_markers)


def test_token_count_answers(dialect: BaseServerDialect) -> None:
    body = dialect.token_count_request("def f(): pass", "m")
    assert "def f(): pass" in body.values()
    assert dialect.token_count({"count": 7}) == 7
    assert dialect.token_count({"tokens": [1, 2, 3]}) == 3
    assert dialect.token_count({"detail": "Not Found"}) is None


def test_tunable_suggestions_are_valid_space_params(dialect: BaseServerDialect) -> None:
    from pathlib import Path

    from tuner.config._reader import Table
    from tuner.config._space import parse_param

    for entry in dialect.tunable:
        table = {k: v for k, v in entry.items() if k not in ("name", "requires")}
        parse_param(Table(table, file=Path("x.toml"), key=f"space.{entry['name']}"), entry["name"], {})


def test_inert_names_are_flags_or_environment_variables_never_the_address(dialect: BaseServerDialect) -> None:
    for argv in (COMMANDS[dialect.name], [*COMMANDS[dialect.name], "--speculative-algorithm", "DFLASH"]):
        inert = dialect.inert(argv, {})
        assert isinstance(inert, frozenset)
        assert all(re.fullmatch(r"--?[a-z][\w-]*|[A-Z][A-Z0-9_]*", name) for name in inert), inert
        assert not inert & {dialect.port_flag, dialect.host_flag, *argv}


def test_batch_cap_flags_are_long_or_short_options_the_dialect_plays(dialect: BaseServerDialect) -> None:
    """A batch cap the client can play (``[search] emulate``) is a flag, never the address; the three servers with
    one declare theirs, and a parameter on an alias of it is played too."""
    assert all(f.startswith("-") for f in dialect.batch_cap_flags)
    assert not {dialect.port_flag, dialect.host_flag} & set(dialect.batch_cap_flags)
    expected = {"sglang": "--max-running-requests", "vllm": "--max-num-seqs", "llama-server": "-np"}
    if dialect.name in expected:
        flag = expected[dialect.name]
        assert dialect.emulates(Param(name="cap", kind="int", low=1, high=8, flag=flag))
        assert dialect.emulates(Param(name="cap", kind="int", low=1, high=8, flag="--other", aliases=(flag,)))
    else:
        assert dialect.batch_cap_flags == ()
    assert not dialect.emulates(Param(name="x", kind="int", low=1, high=8, flag="--unrelated"))


def test_unknown_command_is_generic_and_says_how_to_choose() -> None:
    d = detect_dialect(["./serve.sh"])
    assert isinstance(d, GenericDialect) and "[target] server" in d.reason
    with pytest.raises(ValueError, match="unknown server dialect"):
        get_dialect("tgi", ["x"])


def test_versions_capability(dialect: BaseServerDialect) -> None:
    """A dialect either has no versions (None: `--help` alone judges its flags) or the whole capability: the
    config pins a named version, a host that answers nothing gives no version and says why, and the version it
    is pinned to judges its sample command."""
    versions = dialect.versions()
    assert (versions is None) == (dialect.name not in VERSION_NAMES)
    if versions is None:
        return
    assert isinstance(versions, VersionedFlags)
    assert versions.version is None  # not pinned: found on the host
    with pytest.raises(ValueError, match=r"\w"):
        versions.pinned("not a version", "test")
    pinned = versions.pinned(VERSION_NAMES[dialect.name], "test")
    assert type(pinned) is type(dialect)
    pinned_versions = pinned.versions()
    assert pinned_versions is not None and pinned_versions.version is not None
    version, how = versions.detect(lambda argv: None, COMMANDS[dialect.name][:3], listed=frozenset())
    assert version is None and how and versions.not_found(how)
    command = COMMANDS[dialect.name]
    verdicts = versions.table_verdicts(pinned_versions.version, command, SearchSpace(params=()), {}, spellings=True)
    assert all(isinstance(v, Verdict) and v.ok is not False for v in verdicts)  # its own sample command starts
    listed = frozenset(dialect.listed_flags(HELP[dialect.name]))
    judged = versions.judged_flags(pinned_versions.version, command, SearchSpace(params=()))
    said = versions.help_verdicts(listed, command, SearchSpace(params=()), judged=judged, version=None)
    assert said and all(isinstance(v, Verdict) for v in said)
    checked, init_verdicts, expected = versions.init_check(command, {}, "auto")
    assert type(checked) is type(dialect) and expected
    assert not any(v.ok is False for v in init_verdicts)


def test_reads_its_own_counters_and_no_other_dialects(dialect: BaseServerDialect) -> None:
    """A dialect that measures acceptance reads its own counters; nothing exposed gives nothing, and no dialect
    takes another server's counters for its own."""
    assert (dialect.acceptance is None) == (dialect.name not in COUNTERS)
    assert dialect.read_counters("", None) == ServerSnapshot()
    others = "".join(text for name, text in COUNTERS.items() if name != dialect.name)
    assert dialect.read_counters(others, None).steps is None
    if dialect.acceptance is None:
        return
    assert dialect.metrics_path is not None or dialect.info_paths
    snap = dialect.read_counters(others + COUNTERS[dialect.name], None)
    assert (snap.accepted, snap.steps) == (35.0, 10.0)


def test_the_default_dialect_is_one_of_them() -> None:
    """What a benchmark or readiness built without a study file speaks: a dialect of the suite, said as such."""
    chosen = default_dialect()
    assert DIALECTS[chosen.name] is type(chosen) and chosen.reason


def test_served_models_are_the_model_flags_values(dialect: BaseServerDialect) -> None:
    command = COMMANDS[dialect.name]
    assert dialect.served_models(command) == MODELS[dialect.name]
    drafted = [*command, "--speculative-draft-model-path", "/d"]
    assert dialect.served_models(drafted).get("speculative-draft-model-path") == (
        "/d" if "--speculative-draft-model-path" in dialect.model_flags else None
    )


def test_init_command_is_one_the_dialect_takes_and_needs_no_second_pass(dialect: BaseServerDialect) -> None:
    """``tune init`` rewrites a command once (llama-server: removed flags, --metrics); the result is still this
    server's, has nothing left to change, and the scenarios it writes run at least one request at a time."""
    command, notes = dialect.init_command(COMMANDS[dialect.name])
    assert type(detect_dialect(command)) is type(dialect) and all(isinstance(n, str) and n for n in notes)
    assert dialect.init_command(command) == (command, [])
    assert dialect.init_space([], command) == []
    assert dialect.init_concurrency >= 1
