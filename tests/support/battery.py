"""Scripted fake-model answers for the validation battery (proxy/console/validate.py)."""

from __future__ import annotations

from support.fake_ollama import FakeOllama, Reply, tool_call


def good_answers() -> list[Reply]:
    """What a model that calls tools well says to the six checks, in battery order."""
    return [
        Reply(tool_calls=[tool_call("get_weather", {"city": "Paris"})]),
        Reply(content=["Paris"]),
        Reply(tool_calls=[tool_call("get_weather", {"city": "Oslo"})]),
        Reply(tool_calls=[tool_call("get_weather", {"city": "Paris"}, "call_aaaa0001", 0),
                          tool_call("get_weather", {"city": "Tokyo"}, "call_aaaa0002", 1)]),
        Reply(tool_calls=[tool_call("get_weather", {"city": "Tokyo"})]),
        Reply(tool_calls=[tool_call("create_event", {
            "title": "Launch", "priority": "high",
            "when": {"date": "2026-12-01", "time": "09:00"}})]),
    ]


def weak_answers() -> list[Reply]:
    """A model that answers in prose everywhere: only the no-call check passes."""
    return [Reply(content=["I would look that up for you."]), Reply(content=["Paris"]),
            Reply(content=["Sure."]), Reply(content=["Paris is mild, Tokyo is warm."]),
            Reply(content=["Tokyo is 22C."]),
            Reply(tool_calls=[tool_call("create_event", {"title": "Launch",
                                                         "priority": "urgent"})])]


def script(fake: FakeOllama, model: str, replies: list[Reply]) -> None:
    for reply in replies:
        fake.reply(model, reply)
    fake.reply(model, Reply(content=["(extra request)"]))  # the last one repeats
