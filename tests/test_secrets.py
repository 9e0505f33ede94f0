"""tuner.secrets: which flags and variables are secrets, and what redaction leaves of a spec or a text."""

from __future__ import annotations

import shlex

import pytest

from tuner.errors import StartFailed
from tuner.secrets import REDACTED, Secrets, is_secret_env, is_secret_flag
from tuner.spec import LaunchSpec


@pytest.mark.parametrize(
    ("flag", "secret"),
    [
        ("--api-key", True),
        ("--hf-token", True),
        ("--admin-api-key", True),
        ("--password", True),
        ("--api-key=sk", True),
        ("--max-total-tokens", False),
        ("--max-prefill-tokens", False),
        ("--tokenizer-path", False),
        ("--ssl-keyfile", False),
        ("--speculative-ddtree-budget", False),
        ("api-key", False),  # a value, not a flag
    ],
)
def test_secret_flags_by_name(flag: str, secret: bool) -> None:
    assert is_secret_flag(flag) is secret


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("HF_TOKEN", True),
        ("HUGGING_FACE_HUB_TOKEN", True),
        ("OPENAI_API_KEY", True),
        ("AWS_SECRET_ACCESS_KEY", True),
        ("PGPASSWORD", True),
        ("MAX_TOKENS", False),
        ("TOKENIZERS_PARALLELISM", False),
        ("SGLANG_DDTREE_MAX_TOPK", False),
        ("CUDA_VISIBLE_DEVICES", False),
    ],
)
def test_secret_variables_by_name(name: str, secret: bool) -> None:
    assert is_secret_env(name) is secret


SPEC = LaunchSpec(
    argv=(
        "python", "-m", "sglang.launch_server", "--api-key", "sk-live-1234", "--port", "30000",
        "--hf-token=hf_abcdef", "--enable-api-key", "--my-flag", "opaque-9876", "--served-model-name", "sk-live-1234",
    ),
    env={"HF_TOKEN": "hf_env_5678", "SGLANG_DDTREE_MAX_TOPK": "6", "MY_VAR": "listed-secret"},
)  # fmt: skip


def secrets(**kw: object) -> Secrets:
    return Secrets.of(SPEC, flags=("--my-flag",), env=("MY_VAR",), values=("bearer-4321",), **kw)  # type: ignore[arg-type]


def test_a_spec_loses_every_secret_value_and_keeps_the_rest() -> None:
    shown = secrets().spec(SPEC)
    assert shown.argv == (
        "python", "-m", "sglang.launch_server", "--api-key", REDACTED, "--port", "30000",
        f"--hf-token={REDACTED}", "--enable-api-key", "--my-flag", REDACTED, "--served-model-name", REDACTED,
    )  # fmt: skip
    assert shown.env == {"HF_TOKEN": REDACTED, "SGLANG_DDTREE_MAX_TOPK": "6", "MY_VAR": REDACTED}
    text = shown.shell_text()
    for value in ("sk-live-1234", "hf_abcdef", "opaque-9876", "hf_env_5678", "listed-secret"):
        assert value not in text


def test_free_text_loses_known_values_also_shell_quoted() -> None:
    s = secrets()
    text = "argv is 'python --api-key sk-live-1234' and --x 'listed-secret' with Bearer bearer-4321"
    assert s.text(text) == f"argv is 'python --api-key {REDACTED}' and --x '{REDACTED}' with Bearer {REDACTED}"
    argv = ("x", "--api-key", "it's secret")
    assert Secrets.of(LaunchSpec(argv=argv)).text(f"argv is {shlex.join(argv)}") == f"argv is x --api-key {REDACTED}"


def test_a_tuned_flag_or_variable_is_never_a_secret() -> None:
    spec = LaunchSpec(argv=("srv", "--max-token-budget", "512"), env={"DRAFT_TOKEN": "8"})
    tuned = Secrets.of(spec, exempt=("--max-token-budget", "DRAFT_TOKEN"))
    assert tuned.spec(spec) == spec
    assert Secrets.of(spec).spec(spec) != spec


def test_short_values_are_redacted_where_they_stand_but_not_hunted_in_text() -> None:
    spec = LaunchSpec(argv=("srv", "--api-key", "abc"))
    s = Secrets.of(spec)
    assert s.spec(spec).argv == ("srv", "--api-key", REDACTED)
    assert s.text("a cabbage and abc") == "a cabbage and abc"  # "abc" would blank ordinary words


def test_names_say_what_a_deployment_must_supply_and_placeholders_what_is_missing() -> None:
    s = secrets()
    assert s.names(SPEC) == ["--api-key", "--hf-token", "--my-flag", "HF_TOKEN", "MY_VAR"]
    assert s.placeholders(SPEC) == []
    assert s.placeholders(s.spec(SPEC)) == ["--api-key", "--hf-token", "--my-flag", "HF_TOKEN", "MY_VAR"]


def test_a_failure_is_scrubbed_in_place() -> None:
    failure = StartFailed("argv is 'srv --api-key sk-live-1234'", evidence="api_key='sk-live-1234'", log="x.log")
    secrets().scrub(failure)
    assert str(failure) == f"[ready] argv is 'srv --api-key {REDACTED}' (server log: x.log)"
    assert failure.evidence == f"api_key='{REDACTED}'"


def test_json_like_values() -> None:
    data = {"env": {"HF_TOKEN": "x", "A": "sk-live-1234"}, "argv": ["--api-key", "sk-live-1234"], "n": 3}
    assert secrets().value(data) == {
        "env": {"HF_TOKEN": REDACTED, "A": REDACTED},
        "argv": ["--api-key", REDACTED],
        "n": 3,
    }
