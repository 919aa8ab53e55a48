"""Settings: flags over env over defaults, with the exact public names."""

from __future__ import annotations

import argparse

import pytest

from proxy.settings import upstream_root
from proxy.settings_sources import SettingsError, add_arguments, load_settings


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(list(argv))


def test_defaults() -> None:
    s = load_settings(_args(), {})
    assert (s.host, s.port, s.upstreams, s.capabilities) == (
        "127.0.0.1", 8080, ("http://127.0.0.1:11434",), "./capabilities.yaml")
    assert s.read_timeout >= 120  # Ollama may load a model first: minutes, not seconds


def test_env_names() -> None:
    env = {"TOOLSHIM_HOST": "0.0.0.0", "TOOLSHIM_PORT": "9000",
           "TOOLSHIM_UPSTREAM": "http://a:11434/v1, http://b:8000",
           "TOOLSHIM_CAPABILITIES": "/etc/caps.yaml", "TOOLSHIM_API_KEYS": "k1,k2",
           "TOOLSHIM_ROUTES": "qwen3*=http://b:8000/v1"}
    s = load_settings(_args(), env)
    assert s.host == "0.0.0.0" and s.port == 9000
    assert s.upstreams == ("http://a:11434", "http://b:8000")
    assert s.capabilities == "/etc/caps.yaml"
    assert s.api_keys == ("k1", "k2")
    assert s.routes[0].pattern == "qwen3*" and s.routes[0].upstream == "http://b:8000"


def test_flags_win_over_env() -> None:
    env = {"TOOLSHIM_PORT": "9000", "TOOLSHIM_UPSTREAM": "http://env:1"}
    s = load_settings(_args("--port", "7000", "--upstream", "http://flag:2/v1",
                            "--upstream", "http://flag:3"), env)
    assert s.port == 7000
    assert s.upstreams == ("http://flag:2", "http://flag:3")


def test_keys_are_not_in_repr() -> None:
    s = load_settings(_args("--api-key", "sekrit-123"), {})
    assert "sekrit-123" not in repr(s)


@pytest.mark.parametrize("env", [
    {"TOOLSHIM_PORT": "eighty"}, {"TOOLSHIM_PORT": "0"}, {"TOOLSHIM_UPSTREAM": "ftp://x"},
    {"TOOLSHIM_ROUTES": "no-equals-sign"}, {"TOOLSHIM_READ_TIMEOUT": "-1"},
])
def test_bad_values_are_readable_errors(env: dict[str, str]) -> None:
    with pytest.raises(SettingsError) as info:
        load_settings(_args(), env)
    assert str(info.value)


def test_upstream_root_strips_v1() -> None:
    assert upstream_root("http://h:11434/v1/") == "http://h:11434"
    assert upstream_root("http://h:11434") == "http://h:11434"


def test_upstream_kind_and_ollama_default_ctx() -> None:
    env = {"TOOLSHIM_UPSTREAM_KIND": "http://a:11434/v1=ollama, http://b:8000=OpenAI",
           "TOOLSHIM_OLLAMA_DEFAULT_CTX": "32768"}
    s = load_settings(_args(), env)
    assert s.kind_for("http://a:11434") == "ollama" and s.kind_for("http://b:8000") == "openai"
    assert s.kind_for("http://c:1") is None and s.ollama_default_ctx == 32768
    flags = load_settings(_args("--upstream-kind", "http://c:1=openai",
                                "--ollama-default-ctx", "8192"), env)
    assert flags.upstream_kinds == (("http://c:1", "openai"),) and flags.ollama_default_ctx == 8192
    assert load_settings(_args(), {}).ollama_default_ctx == 4096
    with pytest.raises(SettingsError, match="TOOLSHIM_UPSTREAM_KIND"):
        load_settings(_args(), {"TOOLSHIM_UPSTREAM_KIND": "http://a:1=vllm"})


@pytest.mark.parametrize(("argv", "env", "fast"), [
    ((), {}, True),
    (("--no-fast-paths",), {}, False),
    ((), {"TOOLSHIM_FAST_PATHS": "0"}, False),
    ((), {"TOOLSHIM_FAST_PATHS": "false"}, False),
    ((), {"TOOLSHIM_FAST_PATHS": "off"}, False),
    ((), {"TOOLSHIM_FAST_PATHS": "1"}, True),
    (("--no-fast-paths",), {"TOOLSHIM_FAST_PATHS": "on"}, False),  # the flag wins
])
def test_fast_paths_switch(argv: tuple[str, ...], env: dict[str, str], fast: bool) -> None:
    assert load_settings(_args(*argv), env).fast_paths is fast
