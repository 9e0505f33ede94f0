"""The SGLang flag tables (read from the released wheels by scripts/sglang_flags.py) and the one parse rule."""

from __future__ import annotations

import argparse

import pytest

from tuner.dialects import FlagTable, sglang_table
from tuner.dialects._flagtable import known_tables, server_argv

BASE = ["python", "-m", "sglang.launch_server", "--model-path", "/models/m", "--port", "30000"]


@pytest.fixture(scope="module")
def mainline() -> FlagTable:
    return sglang_table("0.5.23")


@pytest.fixture(scope="module")
def ddtree() -> FlagTable:
    return sglang_table("ddtree-pr29907")


def test_the_shipped_tables_say_where_they_came_from() -> None:
    assert {"0.5.23", "ddtree-pr29907"} <= set(known_tables())
    for name in known_tables():
        table = sglang_table(name)
        assert table.data["wheel"].startswith(f"sglang-{table.version}-") and table.data["wheel"].endswith(".whl")
        assert len(table.data["wheel_sha256"]) == 64
        assert len(table.options) > 300  # SGLang registers hundreds of options; a broken reader finds a few


def test_the_ddtree_table_is_its_base_release_plus_the_pull_request(mainline: FlagTable, ddtree: FlagTable) -> None:
    assert ddtree.version == "0.5.15.post1" and ddtree.variant == "ddtree"
    assert "PR #29907" in ddtree.source and "not retrievable" in ddtree.source
    assert "DDTREE" in ddtree.algorithms and "DDTREE" not in mainline.algorithms
    assert ddtree.option("--speculative-ddtree-budget") is not None
    assert mainline.option("--speculative-ddtree-budget") is None
    assert ddtree.environment["SGLANG_DDTREE_MAX_TOPK"] == {"type": "int", "default": 6}
    assert "page_size == 1" in ddtree.messages["ddtree_page_size"]


def test_mainline_algorithms_are_the_released_ones(mainline: FlagTable) -> None:
    for name in ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM", "DFLASH", "DSPARK", "UNO"):
        assert mainline.canonical_algorithm(name) is not None, name
    assert mainline.canonical_algorithm("nextn") == "EAGLE"  # from_string upper-cases, NEXTN is EAGLE
    assert mainline.canonical_algorithm("DDTREE") is None


def test_renamed_flags_as_each_version_has_them(mainline: FlagTable, ddtree: FlagTable) -> None:
    old = ddtree.option("--speculative-dflash-draft-window-size")
    assert old is not None and old.hidden and old.replaced_by == "--speculative-draft-window-size"
    assert mainline.option("--speculative-dflash-draft-window-size") is None
    assert mainline.option("--speculative-draft-window-size") is not None
    cuda = ddtree.option("--cuda-graph-max-bs")
    assert cuda is not None and cuda.replaced_by == "--cuda-graph-max-bs-decode"
    assert mainline.resolve("--cuda-graph-max-bs") == (
        None,
        ["--cuda-graph-max-bs-decode", "--cuda-graph-max-bs-prefill"],
    )


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ([], None),
        (["--speculative-algorithm", "DFLASH", "--speculative-draft-window-size", "2048"], None),
        (["--mem-frac", "0.8"], None),  # argparse prefix matching is on in SGLang's parser
        (["--speculative-dflash-draft-window-size", "2048"], "unrecognized arguments: --speculative-dflash-draft"),
        (["--cuda-graph-max-bs", "16"], "ambiguous option: --cuda-graph-max-bs could match"),
        (["--speculative-algorithm", "DDTREE"], "ValueError: Unknown speculative algorithm name: DDTREE"),
        (["--mem-fraction-static", "high"], "argument --mem-fraction-static: invalid float value: 'high'"),
        (["--speculative-draft-kv-cache-dtype", "fp4"], "argument --speculative-draft-kv-cache-dtype: invalid choice"),
        (["--max-running-requests"], "argument --max-running-requests: expected one argument"),
    ],
)
def test_parse_errors_on_mainline(mainline: FlagTable, extra: list[str], expected: str | None) -> None:
    errors = mainline.parse_errors([*BASE, *extra])
    if expected is None:
        assert errors == []
    else:
        assert len(errors) == 1 and errors[0].startswith(expected), errors


def test_the_seed_deployment_starts_on_the_ddtree_branch_only(mainline: FlagTable, ddtree: FlagTable) -> None:
    seed = ddtree.data["seed_deployment"]
    assert seed["parse_errors"] == []
    assert seed["flags"]["--speculative-dflash-draft-window-size"].startswith("accepted as a deprecated hidden alias")
    command = [*BASE, "--speculative-algorithm", "DDTREE", "--speculative-ddtree-budget", "12"]
    assert ddtree.parse_errors(command) == []
    assert mainline.parse_errors(command) == ["unrecognized arguments: --speculative-ddtree-budget 12"]


def test_a_missing_required_option_is_argparse_text(mainline: FlagTable) -> None:
    assert mainline.parse_errors(["sglang", "serve", "--port", "1"]) == [
        "the following arguments are required: --model-path/--model"
    ]


def test_server_argv_skips_the_program_part() -> None:
    assert server_argv(["/venv/bin/python", "-m", "sglang.launch_server", "--port", "1"]) == ("--port", "1")
    assert server_argv(["sglang", "serve", "--port", "1"]) == ("--port", "1")


def test_an_independent_parser_agrees(mainline: FlagTable) -> None:
    """A plain argparse parser rebuilt from the JSON (not through FlagTable) accepts and refuses the same argv."""
    parser = argparse.ArgumentParser(prog="check", add_help=False, exit_on_error=False)
    for o in mainline.data["options"]:
        if o["nargs"] == 0:
            parser.add_argument(*o["flags"], dest=o["dest"], action="store_true")
        else:
            parser.add_argument(*o["flags"], dest=o["dest"], nargs=o["nargs"])
    ok = [*BASE, "--speculative-algorithm", "DFLASH", "--speculative-draft-window-size", "2048"][3:]
    assert parser.parse_known_args(ok)[1] == []
    assert parser.parse_known_args([*BASE[3:], "--speculative-dflash-draft-window-size", "2048"])[1] != []
