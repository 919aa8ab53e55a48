"""Model aliases: the table (pure), the file's `aliases:` as `toolshim check` sees it, and
`--alias` / TOOLSHIM_ALIASES."""

from __future__ import annotations

import argparse
import io
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from proxy.capabilities.aliases import NO_ALIASES, Aliases
from proxy.commands.check import run_check
from proxy.settings_sources import SettingsError, add_arguments, load_settings


def test_exact_then_most_specific_glob_any_case() -> None:
    table = Aliases.build([("claude-*", "big"), ("claude-haiku-*", "small"),
                           ("claude-haiku-4", "exact"), ("*", "fallback")])
    assert table.target("Claude-Sonnet-4-5") == "big"
    assert table.target("CLAUDE-HAIKU-4-5") == "small"
    assert table.target("claude-haiku-4") == "exact"
    assert table.target("gpt-4o") == "fallback"
    assert NO_ALIASES.target("claude-x") is None


def test_flags_win_over_the_file_for_the_same_pattern() -> None:
    table = Aliases.build([("claude-*", "from-file")], [("Claude-*", "from-flag")])
    assert table.target("claude-opus") == "from-flag"
    assert table.patterns == (("Claude-*", "from-flag"),)


@given(st.from_regex(r"[A-Za-z0-9.:_/-]{1,12}", fullmatch=True),
       st.lists(st.sampled_from(["*", "c*", "?*", "*-*", "[a-z]*"]), max_size=5))
def test_an_exact_name_beats_every_glob(name: str, globs: list[str]) -> None:
    table = Aliases.build([(g, "glob") for g in globs] + [(name, "exact")])
    assert table.target(name.upper()) == table.target(name.lower()) == "exact"


def _check(tmp_path: Path, text: str) -> tuple[int, list[str]]:
    path = tmp_path / "capabilities.yaml"
    path.write_text(text)
    out = io.StringIO()
    return run_check(str(path), out), out.getvalue().splitlines()


def test_check_validates_the_map(tmp_path: Path) -> None:
    assert _check(tmp_path, 'version: 1\naliases:\n  "claude-*": "qwen3-coder:30b"\n')[0] == 0
    status, lines = _check(tmp_path, 'version: 1\naliases:\n  "claude-*": "qwen*"\n'
                                     '  "gpt[4": "x"\n')
    assert status == 1 and len(lines) == 2
    assert ":3:" in lines[0] and "not a glob" in lines[0]
    assert ":4:" in lines[1] and "unclosed '['" in lines[1]


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(list(argv))


def test_flag_and_env() -> None:
    flags = load_settings(_args("--alias", "claude-*=qwen3:8b", "--alias", "gpt-*=llama3"), {})
    assert flags.aliases == (("claude-*", "qwen3:8b"), ("gpt-*", "llama3"))
    env = load_settings(_args(), {"TOOLSHIM_ALIASES": "claude-*=qwen3:8b, gemini-*=gemma3"})
    assert env.aliases == (("claude-*", "qwen3:8b"), ("gemini-*", "gemma3"))


@pytest.mark.parametrize("value", ["no-equals", "claude-*=qwen*", "=x"])
def test_bad_alias_is_a_readable_error(value: str) -> None:
    with pytest.raises(SettingsError, match="alias"):
        load_settings(_args(), {"TOOLSHIM_ALIASES": value})
