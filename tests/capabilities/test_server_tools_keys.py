"""The `server_tools:` section and the per-model server-tool keys: validation and resolving."""

from __future__ import annotations

from proxy.capabilities.load import parse_capabilities
from proxy.capabilities.resolve import resolve_profile

GOOD = """version: 1
server_tools:
  calc: {kind: builtin, builtin: calculator}
  time: {kind: mcp, command: python, args: ["-m", "mcp_server_time"]}
defaults:
  max_iterations: 3
models:
  "qwen3*":
    server_tools: [calc, "time*"]
    server_tools_budget: 30
    max_server_tool_calls: 4
"""


def test_a_bad_definition_is_reported_with_its_line() -> None:
    text = ("version: 1\nserver_tools:\n  ok_one: {kind: builtin, builtin: echo}\n"
            "  web:\n    kind: http\n    url: https://x.example/{q}\n")
    caps, problems = parse_capabilities(text)
    assert caps is None
    assert problems[0].line == 4 and "allowed_hosts" in problems[0].message


def test_a_whole_definition_check_names_the_definition_not_its_kind() -> None:
    # An mcp entry with neither command nor url fails the definition's own check;
    # the message names `server_tools.fs`, not the union's kind tag after it.
    caps, problems = parse_capabilities("version: 1\nserver_tools:\n  fs:\n    kind: mcp\n")
    assert caps is None and problems[0].line == 3
    assert "server_tools.fs:" in problems[0].message and ".mcp" not in problems[0].message


def test_names_follow_the_function_name_rule_without_the_mcp_separator() -> None:
    for bad in ("a__b", "has space", "x" * 65):
        caps, problems = parse_capabilities(
            f"server_tools:\n  {bad!r}: {{kind: builtin, builtin: echo}}\n")
        assert caps is None and problems[0].line == 2, bad


def test_unknown_keys_inside_a_definition_are_refused_with_a_line() -> None:
    caps, problems = parse_capabilities(
        "server_tools:\n  calc:\n    kind: builtin\n    builtin: calculator\n    timeot: 3\n")
    assert caps is None and problems[0].line == 5 and "timeot" in str(problems[0])


def test_model_keys_resolve_with_defaults_and_globs() -> None:
    caps, problems = parse_capabilities(GOOD)
    assert caps is not None, problems
    assert sorted(caps.server_tools) == ["calc", "time"]
    profile = resolve_profile(caps, "qwen3:8b")
    assert profile.server_tools == ("calc", "time*")
    assert (profile.max_iterations, profile.server_tools_budget) == (3, 30)
    assert profile.max_server_tool_calls == 4
    other = resolve_profile(caps, "llama3:8b")
    assert (other.server_tools, other.max_iterations, other.server_tools_budget) == ((), 3, 120.0)
    assert other.max_server_tool_calls == 16


def test_null_and_out_of_range_limits_are_errors() -> None:
    for bad in ("max_iterations: null", "max_iterations: 0", "server_tools_budget: -1",
                "server_tools: null", "max_server_tool_calls: 0",
                "max_server_tool_calls: 257", "max_server_tool_calls: null"):
        caps, problems = parse_capabilities(f"defaults:\n  {bad}\n")
        assert caps is None and problems[0].line == 2, bad
