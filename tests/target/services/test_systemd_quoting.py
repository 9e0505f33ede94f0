"""systemd's quoting rules (systemd.syntax(7), systemd.service(5)), both ways."""

from __future__ import annotations

import pytest

from tuner.spec import LaunchSpec
from tuner.target.services._systemd import dropin_text, parse_unit_text, systemd_quote, systemd_split

CASES = ["plain", "a;rm -rf x", "$(id)", "$HOME", "100%", "%n", 'say "hi"', "back\\slash", "it's", "tab\there",
         "new\nline", "", ";", "  "]  # fmt: skip


@pytest.mark.parametrize("arg", CASES)
def test_round_trip(arg: str) -> None:
    assert systemd_split(systemd_quote(arg)) == [arg]
    assert systemd_split(systemd_quote(arg, exec_line=False), exec_line=False) == [arg]


def test_escapes() -> None:
    assert systemd_quote("/usr/bin/python") == "/usr/bin/python"
    assert systemd_quote("$(id)") == '"$$(id)"'
    assert systemd_quote("100%") == '"100%%"'
    assert systemd_quote('a"b\\c') == '"a\\"b\\\\c"'
    assert systemd_quote("a$b", exec_line=False) == '"a$b"'  # Environment= does not expand $


def test_dropin_resets_execstart_and_sets_environment() -> None:
    spec = LaunchSpec(argv=("/v/bin/python", "-m", "sglang.launch_server", "--x", "a b"), env={"K": "v 1"})
    text = dropin_text(spec, unset=["OLD"])
    assert text.splitlines()[1:] == [
        "[Service]",
        "ExecStart=",
        'ExecStart=/v/bin/python -m sglang.launch_server --x "a b"',
        'Environment="K=v 1"',
        "UnsetEnvironment=OLD",
    ]
    parsed = parse_unit_text(text)
    assert parsed.exec_start == spec.argv
    assert parsed.environment == {"K": "v 1"}


def test_parse_systemctl_cat_with_dropins() -> None:
    text = """# /etc/systemd/system/x.service
[Unit]
Description=x

[Service]
ExecStart=/usr/bin/python -m srv \\
  --port 30001
Environment=A=1 "B=two words"

# /etc/systemd/system/x.service.d/50-tune.conf
[Service]
ExecStart=
ExecStart=/usr/bin/python -m srv --port 1
"""
    full = parse_unit_text(text)
    assert full.exec_start == ("/usr/bin/python", "-m", "srv", "--port", "1")
    base = parse_unit_text(text, skip_files=["/etc/systemd/system/x.service.d/50-tune.conf"])
    assert base.exec_start == ("/usr/bin/python", "-m", "srv", "--port", "30001")
    assert base.environment == {"A": "1", "B": "two words"}
    assert full.files == ("/etc/systemd/system/x.service", "/etc/systemd/system/x.service.d/50-tune.conf")
