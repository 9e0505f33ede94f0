"""The simulator's command line is its SGLang version's: the flag table read from SGLang's own code decides."""

from __future__ import annotations

import contextlib
import io

import pytest

from tuner.dialects import FlagOption, sglang_table
from tuner.sim._args import ServerArgsError, parse_server_args
from tuner.sim._versions import VERSIONS

NAMES = sorted(VERSIONS)


def _value(option: FlagOption) -> list[str]:
    """A value the option accepts (its first choice, or one of its type)."""
    if option.nargs == 0:
        return []
    if option.choices:
        return [str(option.choices[0])]
    sample = {"int": "2", "float": "0.5", "human_readable_int": "2", "json.loads": "{}", "json_list_type": "[]"}
    return [sample.get(option.type or "str", "x")]


def _parse(argv: list[str]) -> str | None:
    """The parser's error message (it exits 2), or None when the command line parses."""
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            parse_server_args(argv, {})
    except SystemExit:
        return err.getvalue().strip().splitlines()[-1]
    except ServerArgsError:  # parsed; SGLang's checks after parsing refused it
        pass
    return None


@pytest.mark.parametrize("name", NAMES)
def test_every_flag_of_the_version_parses(name: str) -> None:
    table = sglang_table(name)
    refused = {}
    for option in table.options:
        for flag in option.flags:
            argv = ["--sim-sglang-version", name, flag, *_value(option)]
            if error := _parse(argv):
                refused[flag] = error
    assert not refused
    assert len(table.options) > 400  # the whole table, not the flags the model reads


@pytest.mark.parametrize(("name", "other"), [(NAMES[0], NAMES[1]), (NAMES[1], NAMES[0])])
def test_a_flag_of_the_other_version_fails_like_the_real_one(name: str, other: str) -> None:
    table, foreign = sglang_table(name), sglang_table(other)
    mine = {f for o in table.options for f in o.flags}
    checked = 0
    for option in foreign.options:
        for flag in option.flags:
            if flag in mine:
                continue
            argv = [flag, *_value(option)]
            expected = table.parse_errors(["--model-path", "m", *argv])
            if not expected:  # a prefix of one of this version's own flags: argparse takes it
                continue
            assert _parse(["--sim-sglang-version", name, *argv]) == f"sglang serve: error: {expected[0]}"
            checked += 1
    assert checked > 10


def test_the_seed_deployments_spellings() -> None:
    seed = ["--speculative-algorithm", "DDTREE", "--speculative-dflash-block-size", "8",
            "--speculative-ddtree-budget", "12", "--speculative-dflash-draft-window-size", "2048"]  # fmt: skip
    args = parse_server_args(seed, {"SGLANG_DDTREE_MAX_TOPK": "6"})
    assert (args.speculative_draft_window_size, args.speculative_ddtree_budget, args.ddtree_max_topk) == (2048, 12, 6)
    assert _parse(["--sim-sglang-version", "0.5.23", *seed]) == (
        "sglang serve: error: unrecognized arguments: --speculative-ddtree-budget 12 "
        "--speculative-dflash-draft-window-size 2048"
    )
    assert _parse(["--sim-sglang-version", "0.5.23", "--cuda-graph-max-bs", "8"]) == (
        "sglang serve: error: ambiguous option: --cuda-graph-max-bs could match --cuda-graph-max-bs-decode, "
        "--cuda-graph-max-bs-prefill"
    )
    with pytest.raises(ServerArgsError, match=r"^Unknown speculative algorithm name: DDTREE$"):
        parse_server_args(["--sim-sglang-version", "0.5.23", *seed[:2]], {})
