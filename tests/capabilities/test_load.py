from __future__ import annotations

import textwrap

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.capabilities.load import Problem, parse_capabilities
from proxy.capabilities.schema import Capabilities

from .strategies import documents, render

GOOD = """\
version: 1
defaults:                     # every model
  tools: auto
  max_tools: 64
models:
  "gemma3:*":
    tools: off
  "qwen3*":
    tools: native
    deny_tools: [read_file, write_file]
    system_prompt: {append: "Use the bash tool."}
  "llama3.2*":
    max_tools: 8
    parallel_tool_calls: false
    schema: {drop_keywords: [additionalProperties, "$schema"], inline_refs: true}
learned:
  "custom-model:latest":
    tools: off
    source: runtime_error
    at: "2026-11-22T10:00:00Z"
    evidence: "custom-model:latest does not support tools"
"""


def only_problem(text: str) -> Problem:
    caps, problems = parse_capabilities(textwrap.dedent(text), "caps.yaml")
    assert caps is None
    assert len(problems) == 1, problems
    return problems[0]


def test_design_example_is_valid() -> None:
    caps, problems = parse_capabilities(GOOD)
    assert problems == []
    assert caps is not None
    assert caps.models["gemma3:*"].tools == "off"  # YAML 1.2: `off` is a string
    assert caps.models["llama3.2*"].schema_ is not None
    assert caps.models["llama3.2*"].schema_.drop_keywords == ["additionalProperties", "$schema"]
    assert caps.learned["custom-model:latest"].source == "runtime_error"


@pytest.mark.parametrize("text", ["", "\n\n", "# only a comment\n# and another\n", "---\n"])
def test_empty_file_means_all_defaults(text: str) -> None:
    assert parse_capabilities(text) == (Capabilities(), [])


@pytest.mark.parametrize("text", ["models:\nlearned:\n# nothing learned yet\n", "defaults:\n"])
def test_empty_sections_are_valid(text: str) -> None:
    caps, problems = parse_capabilities(text)
    assert problems == []
    assert caps == Capabilities()


CASES = [
    # (name, text, line, words in the message)
    ("unknown top key", "version: 1\nmodel:\n  x: {}\n", 2, ["unknown key 'model'", "'models'"]),
    (
        "unknown entry key",
        'models:\n  "qwen3*":\n    tools: native\n    toolz: off\n',
        4,
        ["models.'qwen3*'.toolz", "unknown key 'toolz'", "did you mean 'tools'"],
    ),
    (
        "unknown schema key",
        "defaults:\n  schema:\n    inline_ref: true\n",
        3,
        ["defaults.schema.inline_ref", "unknown key"],
    ),
    (
        "bad enum",
        "defaults:\n  max_tools: 3\n  tools: sometimes\n",
        3,
        ["defaults.tools", "'emulate'"],
    ),
    ("wrong type", "defaults:\n  max_tools: eight\n", 2, ["defaults.max_tools", "integer"]),
    ("no coercion", 'defaults:\n  max_tools: "8"\n', 2, ["max_tools", "integer"]),
    ("bool is not an int", "defaults:\n  max_tools: true\n", 2, ["max_tools"]),
    ("negative budget", "defaults:\n  max_tools: -1\n", 2, ["greater than or equal to 0"]),
    ("null not allowed", "defaults:\n  tools: null\n", 2, ["may not be null"]),
    (
        "bad glob",
        'models:\n  "llama*": {}\n  "qwen[3*":\n    tools: off\n',
        3,
        ["unclosed '['", "qwen[3*"],
    ),
    (
        "bad list item",
        "models:\n  x:\n    deny_tools:\n      - a\n      - 7\n",
        5,
        ["deny_tools[1]", "string"],
    ),
    (
        "bad tool_format",
        "defaults:\n\n  tool_format: hermez\n",
        3,
        ["unknown tool_format 'hermez'"],
    ),
    (
        "bad drop_tool_choice",
        "defaults:\n  drop_tool_choice: [auto, sometimes]\n",
        2,
        ["drop_tool_choice[1]"],
    ),
    ("section not a mapping", "version: 1\nmodels: [a, b]\n", 2, ["models", "dictionary"]),
    ("entry not a mapping", "models:\n  a: {}\n  b: native\n", 3, ["models.b"]),
    ("wrong version", "version: 2\n", 1, ["version", "1"]),
    ("bool version", "version: true\n", 1, ["integer 1"]),
    (
        "learned needs source",
        'learned:\n  "m:latest":\n    tools: off\n    at: "2026-11-22T10:00:00Z"\n',
        2,
        ["learned.'m:latest'.source", "required key 'source' is missing"],
    ),
    (
        "learned bad timestamp",
        'learned:\n  "m:latest":\n    source: probe\n    at: yesterday\n',
        4,
        ["ISO-8601"],
    ),
    (
        "rename not reversible",
        "defaults:\n  rename:\n    a: x\n    b: x\n",
        2,
        ["'a' and 'b' both rename to 'x'"],
    ),
    ("number as model key", "models:\n  1.5:\n    tools: off\n", 2, ["(key)", "string"]),
    ("duplicate key", "defaults:\n  tools: off\n  tools: native\n", 3, ["duplicate key"]),
    ("duplicate model", 'models:\n  "a": {}\n  "b": {}\n  "a": {}\n', 4, ["duplicate key"]),
    ("syntax error", "defaults:\n  tools: [off\n  max_tools: 3\n", 3, ["YAML"]),
    ("bad indentation", "defaults:\n  tools: off\n max_tools: 3\n", 3, ["YAML"]),
    ("tab indentation", "defaults:\n\ttools: off\n", 2, ["YAML"]),
    ("two documents", "version: 1\n---\nversion: 1\n", 2, ["YAML"]),
    ("top level list", "- tools: off\n", 1, ["top level must be a mapping", "list"]),
    ("top level scalar", "tools\n", None, ["top level must be a mapping", "single value"]),
    ("top level list after comments", "# hi\n\n- a\n", 3, ["top level must be a mapping"]),
    (
        "same model twice",
        'models:\n  qwen3: {}\n  "qwen3:latest":\n    tools: off\n',
        3,
        ["'qwen3' and 'qwen3:latest' both name 'qwen3:latest'"],
    ),
    (
        "same model twice, case",
        "models:\n  Qwen3:8B: {}\n  qwen3:8b: {}\n",
        3,
        ["both name 'qwen3:8b'"],
    ),
    (
        "a key valid only in another section",
        "models:\n  x:\n    prepend: hi\n",
        3,
        ["models.x.prepend: key 'prepend' is not valid here"],
    ),
]


@pytest.mark.parametrize("key", ["source", "at", "evidence", "upstream", "validation",
                                 "correction"])
@pytest.mark.parametrize("where", ["models:\n  x:\n    ", "defaults:\n  "])
def test_learned_bookkeeping_elsewhere_says_where_it_belongs(key: str, where: str) -> None:
    # Copied from a learned entry by hand: "did you mean 'source'?" for 'source' was
    # the only hint, and it named the key itself.
    problem = only_problem(where + key + ": x\n")
    assert problem.message.endswith(f"key {key!r} is only valid under learned: "
                                    "(the proxy's bookkeeping)"), problem
    assert "did you mean" not in problem.message


@pytest.mark.parametrize(
    ("text", "line", "words"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_problem_names_the_line(text: str, line: int | None, words: list[str]) -> None:
    problem = only_problem(text)
    assert problem.path == "caps.yaml"
    assert problem.line == line, problem
    for word in words:
        assert word in problem.message, problem


def test_every_problem_is_reported_in_line_order() -> None:
    text = "defaults:\n  tools: nope\nmodels:\n  a:\n    toolz: 1\n    max_tools: x\n"
    caps, problems = parse_capabilities(text, "c.yaml")
    assert caps is None
    assert [p.line for p in problems] == [2, 5, 6]


def test_problem_str_is_editor_clickable() -> None:
    assert str(Problem("c.yaml", 3, "bad")) == "c.yaml:3: bad"
    assert str(Problem("c.yaml", None, "bad")) == "c.yaml: bad"


def test_merge_key_errors_still_get_a_line() -> None:
    text = "base: &b {tools: nope}\n"
    problem = only_problem(text)
    assert problem.line == 1  # `base` is itself unknown: reported at its key


def test_alias_values_are_resolved() -> None:
    text = "defaults: &d\n  tools: off\nmodels:\n  x: *d\n"
    caps, problems = parse_capabilities(text)
    assert problems == []
    assert caps is not None and caps.models["x"].tools == "off"


def test_alias_bomb_is_refused() -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 7)]
    problem = only_problem("\n".join(lines) + "\n")
    assert "too deep or too large" in problem.message


def test_anchored_scalars_keep_their_type() -> None:
    text = (
        "defaults:\n  system_role: &no false\n  max_tools: &n 0x10\n"
        "models:\n  x:\n    recover_text_calls: *no\n"
    )
    caps, problems = parse_capabilities(text)
    assert problems == []
    assert caps is not None
    assert caps.defaults.system_role is False
    assert caps.defaults.max_tools == 16
    assert caps.models["x"].recover_text_calls is False


def test_unquoted_timestamp_is_accepted() -> None:
    text = (
        "learned:\n  m:latest:\n    tools: off\n    source: probe\n    at: 2026-11-22T10:00:00Z\n"
    )
    caps, problems = parse_capabilities(text)
    assert problems == []
    assert caps is not None and caps.learned["m:latest"].at == "2026-11-22T10:00:00Z"


def test_yaml_1_1_booleans_are_not_modes() -> None:
    # Under a %YAML 1.1 directive `off` is the boolean false, not a tool mode.
    problem = only_problem("%YAML 1.1\n---\ndefaults:\n  tools: off\n")
    assert problem.line == 4
    assert "defaults.tools" in problem.message


def test_block_scalars_keep_their_text() -> None:
    text = "defaults:\n  system_prompt:\n    append: |\n      line one\n      line two\n"
    caps, _ = parse_capabilities(text)
    assert caps is not None and caps.defaults.system_prompt is not None
    assert caps.defaults.system_prompt.append == "line one\nline two\n"


@settings(max_examples=60, deadline=None)
@given(documents)
def test_rendered_documents_parse_back_to_the_same_data(data: dict[str, object]) -> None:
    caps, problems = parse_capabilities(render(data))
    assert problems == []
    assert caps is not None
    assert caps.model_dump(by_alias=True, exclude_unset=True) == data


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_never_raises_on_arbitrary_text(text: str) -> None:
    caps, problems = parse_capabilities(text)
    assert (caps is None) == bool(problems)


YAMLISH = st.lists(
    st.sampled_from(
        [
            "models:",
            "defaults:",
            "learned:",
            "  ",
            "- ",
            "tools: ",
            "off",
            "*",
            "&a ",
            "*a",
            "[",
            "]",
            "{",
            "}",
            ": ",
            "\n",
            "\t",
            '"',
            "'",
            "#",
            "qwen3*",
            "<<: ",
            "? ",
            "|",
            "1",
        ]
    ),
    max_size=40,
).map("".join)


@settings(max_examples=300, deadline=None)
@given(YAMLISH)
def test_never_raises_on_yaml_like_text(text: str) -> None:
    caps, problems = parse_capabilities(text, "f.yaml")
    assert (caps is None) == bool(problems)
    for problem in problems:
        assert problem.line is None or problem.line >= 1
        assert str(problem).startswith("f.yaml:")
