"""The OpenAI Agents SDK's default (Responses) model running a tool loop against toolshim."""

from __future__ import annotations

import openai
import pytest
from agents import Agent, OpenAIResponsesModel, Runner, function_tool, set_tracing_disabled
from support.fake_ollama import FakeOllama, Reply, tool_call


@pytest.fixture(autouse=True)
def _no_tracing() -> None:
    set_tracing_disabled(True)  # no trace export: the tests never leave 127.0.0.1


@pytest.mark.parametrize("streamed", [False, True])
async def test_agent_tool_loop(fake: FakeOllama, proxy_url: str, streamed: bool) -> None:
    asked: list[str] = []

    @function_tool
    def get_weather(city: str) -> str:
        """Weather for a city."""
        asked.append(city)
        return f"sunny in {city}"

    fake.reply("qwen3:8b", Reply(tool_calls=[tool_call("get_weather", {"city": "Tokyo"},
                                                       "call_agent00001")]))
    fake.reply("qwen3:8b", Reply(content=["It is ", "sunny in Tokyo."]))
    client = openai.AsyncOpenAI(base_url=proxy_url + "/v1", api_key="unused", max_retries=0)
    try:
        agent = Agent(name="weather", instructions="Answer with the tool.", tools=[get_weather],
                      model=OpenAIResponsesModel(model="qwen3:8b", openai_client=client))
        if streamed:
            run = Runner.run_streamed(agent, "weather in Tokyo?")
            kinds = [event.type async for event in run.stream_events()]
            assert "raw_response_event" in kinds
            final = run.final_output
        else:
            final = (await Runner.run(agent, "weather in Tokyo?")).final_output
    finally:
        await client.close()
    assert asked == ["Tokyo"]
    assert final == "It is sunny in Tokyo."
    second = fake.chat_requests()[-1]["messages"]
    assert second[0] == {"role": "system", "content": "Answer with the tool."}
    assert second[-2]["tool_calls"][0]["function"]["name"] == "get_weather"
    assert second[-1] == {"role": "tool", "tool_call_id": "call_agent00001",
                          "content": "sunny in Tokyo"}
