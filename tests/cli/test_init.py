"""`tune init -- COMMAND`: a commented study file that loads, for every dialect with tunable flags."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tuner.cli import main
from tuner.config import load_config
from tuner.dialects import LlamaServerDialect
from tuner.space import count_configs

SGLANG = [
    "env", "SGLANG_DDTREE_MAX_TOPK=8", "python3", "-m", "sglang.launch_server", "--model-path", "/m",
    "--host", "0.0.0.0", "--port", "30001", "--speculative-algorithm", "DDTREE",
    "--speculative-ddtree-budget", "48", "--speculative-dflash-block-size", "10",
    "--speculative-dflash-draft-window-size", "2048",
]  # fmt: skip
VLLM = [
    "vllm", "serve", "m", "--port", "8100", "--speculative-config",
    json.dumps({"method": "ngram", "num_speculative_tokens": 5, "prompt_lookup_max": 4}),
]  # fmt: skip
LLAMA = [
    "python3", "-m", "llama_cpp.server", "--model", "m.gguf", "--port", "8200",
    "--draft_model", "prompt-lookup-decoding", "--draft_model_num_pred_tokens", "6",
]  # fmt: skip


def _init(tmp_path: Path, argv: list[str], *extra: str) -> Path:
    out = tmp_path / "new.toml"
    assert main(["init", "--out", str(out), *extra, "--", *argv]) == 0
    return out


def test_sglang_ddtree_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = load_config(_init(tmp_path, SGLANG))
    assert config.dialect.name == "sglang" and config.target.base_url == "http://127.0.0.1:30001"
    assert config.target.env == {"SGLANG_DDTREE_MAX_TOPK": "8"} and config.target.command[0] == "python3"
    # Ranges are widened to hold the command's own values (48 > 32; block 10 is off the step-4 grid).
    assert config.baseline == {
        "budget": 48, "topk": 8, "block_size": 10, "window": 2048, "mem_fraction_static": "auto",
        "max_running_requests": 48, "cuda_graph_max_bs_decode": "auto", "draft_attention_backend": "default",
    }  # fmt: skip
    assert config.space.by_name("block_size").step is None
    # The branch reads the old window spelling (a hidden deprecated alias): its value is the baseline, and
    # trials write the new spelling. The branch (0.5.15.post1) has no draft KV-cache dtype flag: not offered.
    window = config.space.by_name("window")
    assert window.flag == "--speculative-draft-window-size"
    assert "--speculative-dflash-draft-window-size" in window.aliases
    assert "draft_kv_cache_dtype" not in {p.name for p in config.space.params}
    out = capsys.readouterr()
    assert "wrote" in out.out
    assert "a deprecated alias of --speculative-draft-window-size" in out.err and "--enable-metrics" in out.err


DFLASH = [
    "python3", "-m", "sglang.launch_server", "--model-path", "/m", "--port", "30002", "--enable-metrics",
    "--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", "DRAFTER",
    "--speculative-draft-window-size", "2048", "--mem-fraction-static", "0.85",
]  # fmt: skip


def test_sglang_dflash_command_offers_the_knobs_people_tune(tmp_path: Path) -> None:
    drafter = tmp_path / "drafter"
    drafter.mkdir()
    (drafter / "config.json").write_text(json.dumps({"dflash_config": {"block_size": 12}}))
    command = [str(drafter) if a == "DRAFTER" else a for a in DFLASH]
    config = load_config(_init(tmp_path, command))
    names = [p.name for p in config.space.params]
    assert names == [
        "block_size", "window", "mem_fraction_static", "max_running_requests", "cuda_graph_max_bs_decode",
        "draft_kv_cache_dtype", "draft_attention_backend",
    ]  # fmt: skip
    block = config.space.by_name("block_size")
    assert block.high == 12 and block.default == 12  # the drafter's trained size is SGLang's default and the top
    assert config.baseline["block_size"] == 12 and config.baseline["mem_fraction_static"] == 0.85
    assert config.baseline["max_running_requests"] == 48  # what DFLASH sets when the flag is unset
    assert {(c.left, c.op, c.right) for c in config.space.constraints} == {
        ("window", ">=", "block_size"),
        ("cuda_graph_max_bs_decode", "<=", "max_running_requests"),
    }
    assert config.study.trials == 20


def test_a_renamed_flag_on_mainline_is_refused_with_the_new_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = [a.replace("--speculative-draft-window-size", "--speculative-dflash-draft-window-size") for a in DFLASH]
    assert main(["init", "--out", str(tmp_path / "x.toml"), "--", *old]) == 2
    err = capsys.readouterr().err
    assert "did you mean --speculative-draft-window-size (renamed in SGLang 0.5.x" in err
    assert not (tmp_path / "x.toml").exists()


def test_ddtree_on_mainline_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = str(tmp_path / "x.toml")
    assert main(["init", "--out", out, "--server-version", "0.5.23", "--", *SGLANG]) == 2
    assert "DDTREE needs the DDTree branch (sgl-project/sglang PR #29907)" in capsys.readouterr().err


def test_llama_cpp_python_s_space_is_asked_for_once_per_config() -> None:
    from tuner.cli._init import init_study_text

    text = init_study_text(LLAMA, name="tiny")  # num_pred_tokens: 1..16 -> 16 configurations
    assert "\ntrials = 16 " in text


def test_vllm_speculative_config(tmp_path: Path) -> None:
    config = load_config(_init(tmp_path, VLLM))
    assert config.dialect.name == "vllm" and config.target.base_url == "http://127.0.0.1:8100"
    p = config.space.by_name("num_speculative_tokens")
    assert (p.json_flag, p.key) == ("--speculative-config", "num_speculative_tokens")
    assert config.baseline == {"num_speculative_tokens": 5}
    assert config.dialect.lint(config.space) == []
    # num_speculative_tokens 1-8 is 8 configs: the study asks for all of them, not for 20.
    assert config.study.trials == 8


def test_a_large_space_gets_the_default_trials(tmp_path: Path) -> None:
    assert load_config(_init(tmp_path, SGLANG)).study.trials == 20


def test_llama_cpp_prompt_lookup(tmp_path: Path) -> None:
    path = _init(tmp_path, LLAMA)
    text = path.read_text()
    assert "# server dialect: llama.cpp" in text and "# missing: no health endpoint" in text
    config = load_config(path)
    assert config.baseline == {"num_pred_tokens": 6}
    assert config.readiness.health_path is None
    assert [s.concurrency for s in config.benchmark.scenarios] == [1, 1]
    assert config.benchmark.scenarios[0].prompts == "humaneval"


def test_refuses_to_overwrite(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "mine.toml"
    out.write_text("keep me")
    assert main(["init", "--out", str(out), "--", *LLAMA]) == 1
    assert out.read_text() == "keep me"
    assert "exists: tune init never overwrites" in capsys.readouterr().err


def test_nothing_to_tune_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # llama.cpp without a draft model: num_pred_tokens would do nothing, so nothing is suggested.
    assert main(["init", "--out", str(tmp_path / "x.toml"), "--", *LLAMA[:6]]) == 2
    err = capsys.readouterr().err
    assert "speculative-decoding flag the llama.cpp dialect knows how to tune" in err
    assert not (tmp_path / "x.toml").exists()
    assert main(["init", "--out", str(tmp_path / "x.toml")]) == 2
    assert "a launch command after --" in capsys.readouterr().err


LLAMA_SERVER = ["/opt/llama.cpp/llama-server", "-m", "q.gguf", "-md", "d.gguf", "--draft-max", "16", "--port", "8081"]


def test_llama_server_with_a_draft_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The issue's command: the removed --draft-max is renamed, the drafter switched on, the counters asked for."""
    path = _init(tmp_path, LLAMA_SERVER)
    out = capsys.readouterr().out
    assert "note: --draft-max is --spec-draft-n-max now (llama-server removed --draft-max" in out
    assert "note: added --spec-type draft-simple" in out and "note: added --metrics" in out
    config = load_config(path)
    assert config.dialect.name == "llama-server" and config.target.base_url == "http://127.0.0.1:8081"
    assert config.target.command == (
        "/opt/llama.cpp/llama-server", "-m", "q.gguf", "-md", "d.gguf", "--spec-draft-n-max", "16",
        "--port", "8081", "--spec-type", "draft-simple", "--metrics",
    )  # fmt: skip
    assert config.baseline == {"spec_type": "draft-simple", "draft_max": 16, "draft_min": 0, "draft_p_min": 0.0}
    assert config.space.by_name("spec_type").choices == ("draft-simple", "none")
    assert [str(c) for c in config.space.constraints] == ["draft_min <= draft_max"]
    # The drafter's knobs exist only while it drafts: "none" is one configuration, not 16 x 9 x 10.
    assert config.space.violations({"spec_type": "none", "draft_min": 8, "draft_max": 1}) == []
    assert config.space.violations({"spec_type": "draft-simple", "draft_min": 8, "draft_max": 1, "draft_p_min": 0.0})
    assert config.dialect.lint(config.space) == [] and config.dialect.command_problems(config.target.command) == []
    assert main(["init", "--out", str(tmp_path / "again.toml"), "--server", "llama-server", "--", *LLAMA_SERVER]) == 0


def test_llama_server_model_free_drafter(tmp_path: Path) -> None:
    """With --spec-type ngram-mod the removed flags mean the n-gram drafter's own lengths."""
    argv = ["llama-server", "-m", "q.gguf", "--spec-type", "ngram-mod", "--draft-max", "32", "--metrics"]
    config = load_config(_init(tmp_path, argv))
    assert "--spec-ngram-mod-n-max" in config.target.command and "--draft-max" not in config.target.command
    assert config.baseline == {"spec_type": "ngram-mod", "ngram_mod_n_max": 32, "ngram_mod_n_min": 48,
                               "ngram_mod_n_match": 24}  # fmt: skip
    assert config.target.command.count("--metrics") == 1


def test_llama_server_without_a_drafter_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["init", "--out", str(tmp_path / "x.toml"), "--", "llama-server", "-m", "q.gguf"]) == 2
    assert "speculative-decoding flag the llama-server dialect knows how to tune" in capsys.readouterr().err


def test_never_more_trials_than_the_space_holds(tmp_path: Path) -> None:
    """vLLM's num_speculative_tokens 1..8 is eight configurations: twenty trials would repeat them."""
    config = load_config(_init(tmp_path, VLLM))
    assert config.study.trials == count_configs(config.space) == 8
    (tmp_path / "s").mkdir()
    assert load_config(_init(tmp_path / "s", SGLANG)).study.trials == 20


ISSUE_LLAMA_SERVER = ["llama-server", "-m", "M", "-md", "M", "--spec-type", "draft-simple", "--spec-draft-n-max", "8",
                      "-t", "1", "-c", "2048"]  # fmt: skip


@pytest.mark.parametrize(
    ("extra", "per_stream", "said"),
    [
        ([], 2048 // 4, "-c 2048, 4 slots (no -np: llama-server's auto) sharing one unified KV pool"),
        (["-np", "2"], 2048 // 2, "-c 2048, 2 slots, each with a KV of its own"),
        (["-np", "2", "--kv-unified"], 2048 // 2, "-c 2048, 2 slots sharing one unified KV pool (--kv-unified)"),
    ],
    ids=["default-slots", "np-2", "np-2-unified"],
)
def test_llama_server_s_flags_size_the_scenarios_with_a_stated_margin(
    tmp_path: Path, extra: list[str], per_stream: int, said: str
) -> None:
    """The issue's command, no server to ask: every request tune sends (a scenario's prompt, guessed at 1.25 tokens a
    word (2 in code) and 48 for the tag and chat template, its answer, the gate's, the largest draft the space
    tries) fits what each stream holds."""
    from tuner.cli._init_sizing import GUESS
    from tuner.config import chat_text, load_chats

    path = _init(tmp_path, [*ISSUE_LLAMA_SERVER, *extra])
    config = load_config(path)
    drafts = config.space.by_name("draft_max").high + 1  # type: ignore[union-attr,operator]
    text = path.read_text()
    assert f"# Sized to the command's flags: {per_stream} tokens a stream ({said}), {drafts} of them" in text
    assert "it allows 1.25 tokens a word (2 in code) and 48 for the request tag and the chat template" in text
    for s in config.benchmark.scenarios:
        if s.prompts == "random":
            assert s.prompt_tokens * GUESS.words + GUESS.overhead + s.output_tokens + drafts <= per_stream, s
    assert config.gate is not None
    chats = load_chats("humaneval")
    code_words = max(len(chat_text([{"role": r, "content": c} for r, c in ch]).split()) for ch in chats)
    code = code_words * GUESS.code_words + GUESS.overhead
    alone = LlamaServerDialect().command_capacity(config.target.command, {})
    assert alone is not None  # one coding request (or the gate's) alone:
    assert code + max(config.gate.max_tokens, config.benchmark.scenarios[0].output_tokens) + drafts <= alone.request
    assert min(s.output_tokens for s in config.benchmark.scenarios) >= 32  # still a measurement worth making


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        ([*SGLANG, "--context-length", "1400"], "1400 tokens a stream (--context-length 1400)"),
        ([*VLLM, "--max-model-len", "1200"], "1200 tokens a stream (--max-model-len 1200)"),
    ],
    ids=["sglang", "vllm"],
)
def test_a_request_context_sizes_the_scenarios(tmp_path: Path, argv: list[str], said: str) -> None:
    path = _init(tmp_path, argv)
    config = load_config(path)
    assert said in path.read_text()
    limit = int(said.split()[0])
    assert all(s.prompt_tokens + s.output_tokens < limit for s in config.benchmark.scenarios)


def test_a_context_too_small_or_unsaid_is_said(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    small = [*ISSUE_LLAMA_SERVER[:-1], "256"]
    assert main(["init", "--out", str(tmp_path / "x.toml"), "--", *small]) == 2
    err = capsys.readouterr().err
    assert "64 tokens a stream (-c 256, 4 slots (no -np: llama-server's auto) sharing one unified KV pool) leaves " \
        "47 tokens a stream after the drafts' 17" in err
    assert "give the server a larger -c or fewer -np" in err and not (tmp_path / "x.toml").exists()
    path = _init(tmp_path, ISSUE_LLAMA_SERVER[:-2])
    assert "# The command sets no context size (-c / --ctx-size): sized for a server whose context holds" in (
        path.read_text()
    )
def test_slo_writes_the_promise_and_an_open_loop_scenario(tmp_path: Path) -> None:
    from tuner.config import Slo

    cfg = load_config(_init(tmp_path, SGLANG, "--slo", "ttft=1,tpot=0.04"))
    promise = Slo(ttft_s=1.0, tpot_s=0.04, attainment=0.99)
    opened = [s for s in cfg.benchmark.scenarios if s.open_loop]
    assert [(s.name, s.rate) for s in opened] == [("chat-2rps", 2.0)]  # half a request per chat stream
    # The promise judges the open-loop scenario it came with, not the closed-loop ones of 4 and 16 requests.
    assert cfg.slo is None and opened[0].slo == promise
    assert all(s.slo is None for s in cfg.benchmark.scenarios if not s.open_loop)
    (tmp_path / "b").mkdir()
    again = load_config(_init(tmp_path / "b", SGLANG, "--slo", "e2e_s=30, attainment=0.9, rate=6.5"))
    opened = [s for s in again.benchmark.scenarios if s.open_loop]
    assert [(s.rate, s.slo) for s in opened] == [(6.5, Slo(e2e_s=30.0, attainment=0.9))]
    (tmp_path / "c").mkdir()
    everywhere = load_config(_init(tmp_path / "c", SGLANG, "--slo", "ttft=1,tpot=0.04", "--slo-scope", "all"))
    assert everywhere.slo == promise and all(s.slo == promise for s in everywhere.benchmark.scenarios)


def test_init_accepts_the_simulator_s_own_flags_as_tune_check_does(tmp_path: Path) -> None:
    """The shipped demo's command carries `--sim-...` options: they are the simulator's, not SGLang's, for init as
    for tune check."""
    demo = load_config(Path(__file__).resolve().parents[2] / "studies" / "demo.toml")
    assert any(a.startswith("--sim-") for a in demo.target.command)
    config = load_config(_init(tmp_path, list(demo.target.command), "--slo", "ttft=3"))
    assert config.target.command == demo.target.command


@pytest.mark.parametrize(
    ("slo", "said"),
    [
        ("ttft=1,tpot", "--slo: expected KEY=VALUE pairs"),
        ("ttft=fast", "got 'ttft=fast'"),
        ("latency=1", "got 'latency=1'"),
        ("ttft=-1", "--slo.ttft_s: expected a number of seconds > 0, got -1.0"),
        ("attainment=0.9", "--slo: expected at least one limit"),
        ("ttft=1,attainment=99", "--slo.attainment: expected a share of requests in (0, 1]"),
        ("ttft=1,rate=0", "--slo rate: expected requests/s > 0"),
        ("ttft=3,ttft=4", "--slo: expected each key once, got 'ttft given twice in ttft=3,ttft=4'"),
        ("ttft=3,ttft_s=4", "expected each key once"),
    ],
)
def test_a_bad_slo_is_one_line_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], slo: str, said: str
) -> None:
    out = tmp_path / "x.toml"
    assert main(["init", "--out", str(out), "--slo", slo, "--", *SGLANG]) == 2
    err = capsys.readouterr().err
    assert said in err and len(err.strip().splitlines()) == 1, err
    assert not out.exists()
