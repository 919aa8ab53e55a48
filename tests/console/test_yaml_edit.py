"""Promote and forget as text transforms: the one entry moves or goes, every other byte stays."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proxy.capabilities.load import parse_capabilities
from proxy.capabilities.resolve import normalise_model_name
from proxy.capabilities.schema import BOOKKEEPING, Capabilities
from proxy.console.yaml_edit import EditError, forget_text, promote_text
from tests.capabilities.strategies import documents, render

TODAY = "2026-11-24"
FILE = """# top comment
version: 1
defaults:
  tools: auto   # inline

models:
  # my globs
  "qwen3*":
    max_tools: 10
  llama3.2:   # plain key with a dot
    system_role: false

# learned follows; the proxy writes here
learned:
  # a person's note about gemma
  "gemma3:4b":
    tools: "off"
    drop_tool_choice: [required]
    source: "runtime_error"
    at: "2026-11-20T10:00:00Z"
    evidence: "gemma3:4b does not support tools"

  qwen2:latest:
    tool_format: hermes
    source: observed
    at: "2026-11-21T10:00:00Z"
# trailing comment
"""


def _parse(text: str) -> Capabilities:
    caps, problems = parse_capabilities(text, "capabilities.yaml")
    assert caps is not None, problems
    return caps


def _is_subsequence(small: list[str], big: list[str]) -> bool:
    it = iter(big)
    return all(any(line == other for other in it) for line in small)


def test_forget_removes_only_the_entry_lines() -> None:
    out = forget_text(FILE, "gemma3:4b")
    assert out == FILE.replace(
        '  "gemma3:4b":\n    tools: "off"\n    drop_tool_choice: [required]\n'
        '    source: "runtime_error"\n    at: "2026-11-20T10:00:00Z"\n'
        '    evidence: "gemma3:4b does not support tools"\n', "")
    assert set(_parse(out).learned) == {"qwen2:latest"}


def test_forget_matches_names_as_ollama_does() -> None:
    out = forget_text(FILE, "qwen2")
    assert "qwen2:latest" not in _parse(out).learned and "# trailing comment" in out


def test_promote_moves_the_entry_under_models_with_a_comment() -> None:
    out = promote_text(FILE, "gemma3:4b", TODAY)
    caps = _parse(out)
    assert caps.models["gemma3:4b"].tools == "off"
    assert caps.models["gemma3:4b"].drop_tool_choice == ["required"]
    assert "gemma3:4b" not in caps.learned
    assert f"  # promoted from learned: on {TODAY} (source: runtime_error, learned " \
           "2026-11-20T10:00:00Z, evidence: gemma3:4b does not support tools)\n" in out
    kept = [line for line in FILE.splitlines() if "gemma3:4b" not in line
            and line.strip() not in ('tools: "off"', "drop_tool_choice: [required]",
                                     'source: "runtime_error"', 'at: "2026-11-20T10:00:00Z"')]
    assert _is_subsequence(kept, out.splitlines())
    # the new entry sits at the end of models:, before the comment that introduces learned:
    assert out.index('"gemma3:4b":') < out.index("# learned follows")


@pytest.mark.parametrize(("text", "model", "message"), [
    (FILE, "nope:1b", "no learned entry"),
    (FILE.replace('"qwen3*"', '"gemma3:4b"'), "gemma3:4b", "already has an entry"),
    (FILE.replace("max_tools: 10", "max_tools: ["), "gemma3:4b", "has errors"),
    ("version: 1\nlearned:\n  a:\n    source: probe\n    at: '2026-11-20T10:00:00Z'\n", "a",
     "sets no behaviour"),
])
def test_promote_refuses_what_it_cannot_do(text: str, model: str, message: str) -> None:
    with pytest.raises(EditError, match=message):
        promote_text(text, model, TODAY)


def test_promote_creates_models_when_there_is_none_and_expands_flow_braces() -> None:
    bare = "version: 1\nlearned:\n  m:\n    tools: emulate\n    source: probe\n" \
           "    at: '2026-11-20T10:00:00Z'\n"
    out = promote_text(bare, "m", TODAY)
    assert _parse(out).models["m:latest"].tools == "emulate" and out.startswith("version: 1\nmodels:\n")
    braces = "version: 1\nmodels: {}  # none yet\n" + bare.removeprefix("version: 1\n")
    assert _parse(promote_text(braces, "m", TODAY)).models["m:latest"].tools == "emulate"


def test_crlf_files_stay_crlf() -> None:
    crlf = FILE.replace("\n", "\r\n")
    out = promote_text(crlf, "gemma3:4b", TODAY)
    assert "\n" not in out.replace("\r\n", "")
    assert _parse(out).models["gemma3:4b"].tools == "off"


def _with_comments(data: dict[str, Any]) -> str:
    lines = render(data).splitlines(keepends=True)
    out = ["# a person's header\n"]
    for line in lines:
        if line[:1].isalpha():
            out.append(f"# about {line.split(':')[0]}\n")
        out.append(line)
    return "".join(out)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents.filter(lambda d: bool(d.get("learned"))), st.data())
def test_edits_change_exactly_one_entry(data: dict[str, Any], draw: st.DataObject) -> None:
    text = _with_comments(data)
    before = _parse(text)
    name = draw.draw(st.sampled_from(sorted(before.learned)))
    forgotten = _parse(forget_text(text, name))
    assert forgotten.learned == {k: v for k, v in before.learned.items() if k != name}
    assert forgotten.model_copy(update={"learned": {}}) == \
        before.model_copy(update={"learned": {}})
    assert _is_subsequence([ln for ln in text.splitlines() if ln.startswith("#")],
                           forget_text(text, name).splitlines())
    try:
        promoted_text = promote_text(text, name, TODAY)
    except EditError as exc:
        assert "already has an entry" in str(exc) or "sets no behaviour" in str(exc)
        return
    promoted = _parse(promoted_text)
    assert promoted.learned == forgotten.learned and promoted.defaults == before.defaults
    new_keys = [k for k in promoted.models if k not in before.models]
    assert [normalise_model_name(k) for k in new_keys] == [normalise_model_name(name)]
    moved = before.learned[name].model_dump(
        exclude_unset=True, by_alias=True,
        exclude=set(BOOKKEEPING))
    assert promoted.models[new_keys[0]].model_dump(exclude_unset=True, by_alias=True) == moved
    for key, entry in before.models.items():
        assert promoted.models[key] == entry
    kept = [ln for ln in forget_text(text, name).splitlines() if ln.strip() != "models: {}"]
    assert _is_subsequence(kept, promoted_text.splitlines())
