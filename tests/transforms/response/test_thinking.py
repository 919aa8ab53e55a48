from __future__ import annotations

import itertools

import pytest
from factories import text_chunk as _chunk
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from proxy.formats.detect import orphan_close
from proxy.transforms.response.thinking import ThinkingSplit
from proxy.types import Chunk, ReasoningPolicy


def _run(
    policy: ReasoningPolicy, pieces: list[str], finish: bool = True
) -> tuple[str, str, list[Chunk]]:
    stage = ThinkingSplit(policy)
    out: list[Chunk] = []
    for piece in pieces:
        out += stage.feed(_chunk(piece))
    if finish:
        out += stage.feed(_chunk(finish="stop"))
    out += stage.flush()
    content = "".join(c["choices"][0]["delta"].get("content") or "" for c in out)
    reasoning = "".join(c["choices"][0]["delta"].get("reasoning_content") or "" for c in out)
    return content, reasoning, out


TEXT = "<think>\nI should list it.\n</think>\n\nHere is the answer."


def test_move_puts_reasoning_in_reasoning_content() -> None:
    content, reasoning, _ = _run("move", [TEXT])
    assert content == "\n\nHere is the answer."
    assert reasoning == "\nI should list it.\n"


def test_strip_removes_reasoning() -> None:
    content, reasoning, _ = _run("strip", [TEXT])
    assert content == "\n\nHere is the answer."
    assert reasoning == ""


def test_pass_leaves_chunks_untouched() -> None:
    stage = ThinkingSplit("pass")
    chunk = _chunk(TEXT)
    assert stage.feed(chunk) == [chunk]
    assert stage.flush() == []


def test_orphan_close_tag_is_dropped_and_text_after_is_content() -> None:
    content, reasoning, _ = _run("move", ["forced open reasoning</thi", "nk>Answer"])
    assert content == "forced open reasoningAnswer"
    assert reasoning == ""


def test_kimi_tool_section_ends_unclosed_reasoning() -> None:
    text = "<think>need weather<|tool_calls_section_begin|><|tool_call_begin|>x"
    content, reasoning, _ = _run("move", [text])
    assert reasoning == "need weather"
    assert content == "<|tool_calls_section_begin|><|tool_call_begin|>x"


_SECTION = (
    "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
    '<|tool_call_argument_begin|>{"city": "A"}<|tool_call_end|><|tool_calls_section_end|>'
)


@pytest.mark.parametrize("thought", [
    "I could call " + _SECTION + " but the user only asked a definition.",
    "Kimi's format uses <|tool_calls_section_begin|> tokens, not relevant.",
])
@pytest.mark.parametrize("size", [1, 5, 1000])
def test_a_section_marker_before_a_close_tag_is_reasoning(thought: str, size: int) -> None:
    text = "<think>\n" + thought + "\n</think>\nA barometer measures air pressure."
    pieces = [text[at : at + size] for at in range(0, len(text), size)]
    content, reasoning, _ = _run("move", pieces)
    assert content == "\nA barometer measures air pressure."
    assert reasoning == "\n" + thought + "\n"


def test_a_section_marker_in_unclosed_reasoning_is_released_at_the_end() -> None:
    text = "<think>need weather" + _SECTION
    for size in (1, 3, 1000):
        content, reasoning, _ = _run("move", [text[at : at + size]
                                             for at in range(0, len(text), size)])
        assert (content, reasoning) == (_SECTION, "need weather")


def test_unfinished_stream_flushes_held_partial_tag() -> None:
    content, _, _ = _run("strip", ["Hello <thi"], finish=False)
    assert content == "Hello <thi"


def test_other_fields_and_choices_pass_through() -> None:
    stage = ThinkingSplit("move")
    chunk = _chunk("<think>a</think>b", role="assistant", custom=1)
    chunk["choices"].append(
        {"index": 1, "delta": {"content": "<think>x</think>"}, "finish_reason": None}
    )
    chunk["usage"] = None
    (out,) = stage.feed(chunk)
    assert out["choices"][0]["delta"] == {
        "role": "assistant",
        "custom": 1,
        "content": "b",
        "reasoning_content": "a",
    }
    assert out["choices"][1] == chunk["choices"][1]
    assert chunk["choices"][0]["delta"]["content"] == "<think>a</think>b"  # input not mutated


def test_existing_reasoning_content_is_kept() -> None:
    stage = ThinkingSplit("move")
    (out,) = stage.feed(_chunk("<think>b</think>", reasoning_content="a"))
    assert out["choices"][0]["delta"]["reasoning_content"] == "ab"


def test_held_text_is_released_with_the_finish_chunk() -> None:
    _, _, out = _run("strip", ["text <"], finish=True)
    assert out[-1]["choices"][0]["finish_reason"] == "stop"
    assert out[-1]["choices"][0]["delta"]["content"] == "<"


def test_all_reasoning_chunk_is_swallowed() -> None:
    stage = ThinkingSplit("strip")
    assert stage.feed(_chunk("<think>only thoughts")) == []


@pytest.mark.parametrize("policy", ["strip", "move"])
@settings(max_examples=150, deadline=None)
@given(
    text=st.lists(
        st.sampled_from(
            [
                "<think>",
                "</think>",
                "<",
                "think",
                ">",
                "a",
                " b\n",
                "</",
                "<|tool_calls_section_begin|>",
            ]
        ),
        max_size=14,
    ).map("".join),
    cuts=st.lists(st.integers(0, 200), max_size=6),
)
def test_split_invariance(policy: ReasoningPolicy, text: str, cuts: list[int]) -> None:
    # A reply that opens inside reasoning (a close tag before any open tag) is
    # moved whole only when it comes whole; streamed, only within its first piece.
    assume("</think>" not in text.split("<think>")[0])
    bounds = sorted({0, len(text), *(c for c in cuts if c <= len(text))})
    pieces = [text[a:b] for a, b in itertools.pairwise(bounds)]
    assert _run(policy, pieces)[:2] == _run(policy, [text])[:2]
    content, reasoning, _ = _run(policy, pieces)
    assert len(content) + len(reasoning) <= len(text)


def test_a_whole_answer_starting_inside_reasoning_is_moved() -> None:
    stage = ThinkingSplit("move")
    out = stage.feed(_chunk("\nI should greet.\n</think>\n\nHello!"))
    out += stage.flush()
    content = "".join(c["choices"][0]["delta"].get("content") or "" for c in out)
    reasoning = "".join(c["choices"][0]["delta"].get("reasoning_content") or "" for c in out)
    assert (content, reasoning) == ("\n\nHello!", "\nI should greet.\n")
    assert [o.kind for o in stage.observations] == ["reasoning_open"]


def test_a_stream_learned_to_start_inside_reasoning_moves_it() -> None:
    stage = ThinkingSplit("move", starts_inside=True)
    out = [c for piece in ("I should", " greet.</th", "ink>Hello!") for c in stage.feed(_chunk(piece))]
    out += stage.flush()
    content = "".join(c["choices"][0]["delta"].get("content") or "" for c in out)
    reasoning = "".join(c["choices"][0]["delta"].get("reasoning_content") or "" for c in out)
    assert (content, reasoning) == ("Hello!", "I should greet.")
    assert stage.observations == [], "already known: nothing new to learn"


@pytest.mark.parametrize("policy", ["move", "strip"])
def test_a_run_counts_up_to_the_first_text_that_may_hold_a_tag(policy: ReasoningPolicy) -> None:
    stage = ThinkingSplit(policy)
    texts = ["It is", " sunny", " <b", "ut", " x"]
    assert stage.plain_run_ok(texts, "".join(texts)) == 2
    for text in texts[:2]:  # each counted text is a one-by-one yes
        assert stage.plain_ok(text)
    assert not stage.plain_ok(texts[2])
    assert ThinkingSplit("pass").plain_run_ok(texts, "".join(texts)) == 5
    assert ThinkingSplit(policy, starts_inside=True).plain_run_ok(["a", "b"], "ab") == 0


# Every family's reasoning markers are <think>'s equals: (open, close, reasoning, answer,
# source). The text between the markers goes to reasoning_content (move) or away (strip).
FAMILIES = [
    ("<seed:think>", "</seed:think>", "Budget.", "Out.",
     "vllm tests/tool_parsers/test_seed_oss_tool_parser.py::test_extract_tool_calls"),
    ("<|channel>", "<channel|>", "Let me think about this...", "The answer is 42.",
     "ollama model/parsers/gemma4_test.go TestGemma4Parser/thinking_then_content"),
    ("<mm:think>", "</mm:think>", "Weigh.", "Out.", "vllm minimax_m3 reasoning markers"),
    ("<|think:start|>", "<|think:end|>", "Plan.", "Out.", "vllm solar_open2 markers"),
    ("<|open|>think<|sep|>", "<|close|>think<|sep|>", "Hmm.", "Yes.",
     "vllm vllm/reasoning/kimi_k3_reasoning_parser.py"),
    ("[THINK]", "[/THINK]", "Short thought.", "The reply.", "ollama model/parsers/ministral.go"),
    ("<|START_THINKING|>", "<|END_THINKING|>", "A plan.", "The reply.",
     "llama.cpp common/chat-parser.cpp command_r7b"),
]


@pytest.mark.parametrize(("opener", "closer", "thought", "answer", "source"), FAMILIES,
                         ids=[f[0] for f in FAMILIES])
@pytest.mark.parametrize("size", [1, 2, 3, 7, 1000])
def test_every_familys_markers_are_thinks_equals(
    opener: str, closer: str, thought: str, answer: str, source: str, size: int
) -> None:
    text = f"{opener}{thought}{closer}{answer}"
    pieces = [text[i : i + size] for i in range(0, len(text), size)]
    assert _run("move", pieces)[:2] == (answer, thought), source
    assert _run("strip", pieces)[:2] == (answer, ""), source


@pytest.mark.parametrize(("opener", "closer", "thought", "answer", "source"), FAMILIES,
                         ids=[f[0] for f in FAMILIES])
def test_every_familys_lone_close_means_all_before_was_reasoning(
    opener: str, closer: str, thought: str, answer: str, source: str
) -> None:
    # Thinking forced open by the prompt: only the closing marker appears.
    assert _run("move", [f"{thought}{closer}{answer}"])[:2] == (answer, thought), source
    learned = ThinkingSplit("move", starts_inside=True)
    out = [c for piece in (thought[:2], thought[2:] + closer[:3], closer[3:] + answer)
           for c in learned.feed(_chunk(piece))] + learned.flush()
    content = "".join(c["choices"][0]["delta"].get("content") or "" for c in out)
    reasoning = "".join(c["choices"][0]["delta"].get("reasoning_content") or "" for c in out)
    assert (content, reasoning) == (answer, thought), source


def test_a_close_marker_of_another_family_does_not_end_the_block() -> None:
    # `[/THINK]` inside `<seed:think>` is a thought about Mistral, not the end.
    text = "<seed:think>Mistral ends with [/THINK] here.</seed:think>Out."
    assert _run("move", [text])[:2] == ("Out.", "Mistral ends with [/THINK] here.")


def test_truncated_command_r7b_thinking_is_all_reasoning() -> None:
    # The miss: a Command R7B reply cut inside its thinking kept it as text.
    text = '<|START_THINKING|>I will call <|START_ACTION|>[{"tool_name": "get_weather"'
    assert _run("strip", [text[:20], text[20:]])[:2] == ("", "")
    assert _run("move", [text])[:2] == ("", text.removeprefix("<|START_THINKING|>"))


@pytest.mark.parametrize("policy", ["strip", "move"])
@settings(max_examples=150, deadline=None)
@given(
    text=st.lists(st.sampled_from(["[THINK]", "[/THINK]", "<|channel>", "<channel|>", "[",
                                   "<", "|", "a", " b\n", "THINK]", "<seed:think>",
                                   "</seed:think>"]),
                  max_size=14).map("".join),
    cuts=st.lists(st.integers(0, 200), max_size=6),
)
def test_split_invariance_for_other_families(
    policy: ReasoningPolicy, text: str, cuts: list[int]
) -> None:
    # As test_split_invariance: a reply opening inside reasoning is exempt.
    assume(orphan_close(text) is None)
    bounds = sorted({0, len(text), *(c for c in cuts if c <= len(text))})
    pieces = [text[a:b] for a, b in itertools.pairwise(bounds)]
    assert _run(policy, pieces)[:2] == _run(policy, [text])[:2]


@pytest.mark.parametrize("size", [1, 2, 5, 1000])
def test_gemma4s_channel_name_is_markup(size: int) -> None:
    # ollama model/parsers/gemma4_test.go TestGemma4Parser_Streaming: "thought\n" goes.
    text = "<|channel>thought\nLet me think...<channel|>The answer is 42."
    pieces = [text[i : i + size] for i in range(0, len(text), size)]
    assert _run("move", pieces)[:2] == ("The answer is 42.", "Let me think...")
    other = "<|channel>thoughtful<channel|>A"  # not the name: all of it is reasoning
    assert _run("move", [other[i : i + size] for i in range(0, len(other), size)])[:2] == (
        "A", "thoughtful")
