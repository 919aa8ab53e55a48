"""Seed-OSS (`<seed:tool_call>` around Qwen3-Coder markup)."""

from __future__ import annotations

from sample_corpus import SCHEMAS

from proxy.formats import recover
from proxy.formats.base import ParsedCall
from proxy.formats.seed_oss import FORMAT


def test_budget_reflections_inside_thinking_are_reasoning() -> None:
    # vllm tests/tool_parsers/test_seed_oss_tool_parser.py::test_extract_tool_calls
    # [tool_call_0_thinking_budget]: stray </seed:cot_budget_reflect> tags inside the thinking.
    text = ("<seed:think>\n</seed:cot_budget_reflect>\n</seed:cot_budget_reflect>\nThe current "
            "thinking budget is 0, so I will directly start answering the question.\n</seed:think>\n"
            "<seed:tool_call>\n<function=get_weather>\n<parameter=city>Barcelona, Spain</parameter>"
            "\n</function>\n</seed:tool_call>")
    result, name = recover(text, SCHEMAS)
    assert (result.calls, result.text, name) == (
        (ParsedCall("get_weather", {"city": "Barcelona, Spain"}),), None, "seed_oss")


def test_renders_in_seeds_wrapper() -> None:
    rendered = FORMAT.render_calls([ParsedCall("bash", {"command": "ls", "timeout": 3})])
    assert rendered.startswith("<seed:tool_call>\n<function=bash>")
    assert rendered.endswith("</seed:tool_call>")
    assert "<seed:tool_call>" in FORMAT.render_tools([{"function": {"name": "bash"}}])
