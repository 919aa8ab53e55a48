"""/v1/responses end to end through the real openai SDK, against the fake Ollama."""

from __future__ import annotations

import itertools
import json
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from support.capfile import edit_and_wait
from support.fake_ollama import FakeOllama, Reply, tool_call
from support.leaving import leave_mid_stream, wait_for_cancel
from support.log_lines import request_lines
from support.servers import serve
from support.tools import WEATHER_RESPONSES

from proxy.app import create_app


def _types(events: list[Any]) -> list[str]:
    return [e.type for e in events]


def _assert_well_ordered(events: list[Any]) -> None:
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert _types(events)[:2] == ["response.created", "response.in_progress"]
    assert events[-1].type in ("response.completed", "response.incomplete", "response.failed")


def test_create_whole(client: openai.OpenAI, fake: FakeOllama) -> None:
    done = client.responses.create(model="qwen3:8b", input="hi", instructions="Be brief.",
                                   temperature=0.2, top_p=0.9, metadata={"k": "v"})
    assert done.object == "response" and done.id.startswith("resp_")
    assert done.status == "completed" and done.output_text == "Hello from qwen3:8b"
    assert done.output[0].type == "message" and done.output[0].content[0].type == "output_text"
    assert done.usage is not None
    assert (done.usage.input_tokens, done.usage.output_tokens, done.usage.total_tokens) == \
        (12, 5, 17)
    assert (done.model, done.instructions, done.temperature, done.top_p) == \
        ("qwen3:8b", "Be brief.", 0.2, 0.9)
    assert done.tool_choice == "auto" and done.parallel_tool_calls is True and done.tools == []
    sent = fake.chat_requests()[-1]
    assert sent["messages"] == [{"role": "system", "content": "Be brief."},
                                {"role": "user", "content": "hi"}]
    assert (sent["temperature"], sent["top_p"]) == (0.2, 0.9) and "metadata" not in sent


def test_create_streamed_events_in_order(client: openai.OpenAI, fake: FakeOllama) -> None:
    fake.reply("qwen3:8b", Reply(content=["one ", "two ", "three"]))
    events = list(client.responses.create(model="qwen3:8b", input="count", stream=True))
    _assert_well_ordered(events)
    # Text that reaches toolshim in one read is one delta: 1 to 3 of them here.
    deltas = [e.delta for e in events if e.type == "response.output_text.delta"]
    assert _types(events) == [
        "response.created", "response.in_progress", "response.output_item.added",
        "response.content_part.added", *["response.output_text.delta"] * len(deltas),
        "response.output_text.done", "response.content_part.done",
        "response.output_item.done", "response.completed"]
    assert 1 <= len(deltas) <= 3 and all(deltas) and "".join(deltas) == "one two three"
    final = events[-1].response
    assert final.output_text == "one two three" and final.usage.total_tokens == 17


@pytest.mark.parametrize("tools", [False, True])
def test_a_slow_stream_makes_one_delta_per_piece_in_order(
        client: openai.OpenAI, fake: FakeOllama, tools: bool) -> None:
    # Pieces 20 ms apart reach toolshim one read each, while it waits: their events are
    # written from the upstream's read callback (asgi/direct_send.py), the rest by the
    # task, all from one builder: one numbering, one delta per piece, the same text.
    pieces = [f"w{i} " for i in range(12)]
    fake.reply("qwen3:8b", Reply(content=pieces, delay=0.02))
    extra: dict[str, Any] = {"tools": [WEATHER_RESPONSES]} if tools else {}
    events = list(client.responses.create(model="qwen3:8b", input="count", stream=True,
                                          **extra))
    _assert_well_ordered(events)
    deltas = [e.delta for e in events if e.type == "response.output_text.delta"]
    assert deltas == pieces
    assert events[-1].response.output_text == "".join(pieces)
    assert _types(events)[-4:] == ["response.output_text.done", "response.content_part.done",
                                   "response.output_item.done", "response.completed"]


def test_stream_helper_accumulates(client: openai.OpenAI, fake: FakeOllama) -> None:
    fake.reply("qwen3:8b", Reply(content=["Hel", "lo", "!"]))
    with client.responses.stream(model="qwen3:8b", input="hi") as stream:
        texts = [e.snapshot for e in stream if e.type == "response.output_text.delta"]
        final = stream.get_final_response()
    assert texts and texts[-1] == "Hello!"  # one snapshot per delta (a read's text is one)
    assert all(later.startswith(earlier) and later != earlier
               for earlier, later in itertools.pairwise(texts))
    assert final.output_text == "Hello!" and final.status == "completed"


def test_stream_helper_accumulates_a_call(client: openai.OpenAI, fake: FakeOllama) -> None:
    fake.reply("qwen3:8b", Reply(tool_calls=[tool_call("get_weather", {"city": "Tokyo"})]))
    with client.responses.stream(model="qwen3:8b", input="weather?",
                                 tools=[WEATHER_RESPONSES]) as stream:
        kinds = [e.type for e in stream]
        final = stream.get_final_response()
    assert "response.function_call_arguments.delta" in kinds
    assert "response.function_call_arguments.done" in kinds
    call = final.output[0]
    assert call.type == "function_call" and call.name == "get_weather"
    assert call.parsed_arguments == {"city": "Tokyo"}


@pytest.mark.parametrize("stream", [False, True])
def test_function_tool_round_trip(client: openai.OpenAI, fake: FakeOllama, stream: bool) -> None:
    fake.reply("qwen3:8b", Reply(tool_calls=[tool_call("get_weather", {"city": "Tokyo"},
                                                       "call_k3x9a0qz")]))
    fake.reply("qwen3:8b", Reply(content=["Sunny in Tokyo."]))
    first = _create(client, stream, model="qwen3:8b", input="weather in Tokyo?",
                    tools=[WEATHER_RESPONSES], tool_choice="required")
    calls = [item for item in first.output if item.type == "function_call"]
    assert [(c.name, c.arguments, c.call_id) for c in calls] == [
        ("get_weather", '{"city":"Tokyo"}', "call_k3x9a0qz")]
    assert fake.chat_requests()[-1]["tools"] == [{"type": "function", "function": {
        k: WEATHER_RESPONSES[k] for k in ("name", "description", "parameters", "strict")}}]
    assert fake.chat_requests()[-1]["tool_choice"] == "required"
    second = _create(client, stream, model="qwen3:8b", tools=[WEATHER_RESPONSES], input=[
        {"role": "user", "content": "weather in Tokyo?"},
        {"type": "function_call", "call_id": calls[0].call_id, "name": calls[0].name,
         "arguments": calls[0].arguments},
        {"type": "function_call_output", "call_id": calls[0].call_id, "output": "sunny"}])
    assert second.output_text == "Sunny in Tokyo."
    assert fake.chat_requests()[-1]["messages"][1:] == [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_k3x9a0qz", "type": "function",
             "function": {"name": "get_weather", "arguments": '{"city":"Tokyo"}'}}]},
        {"role": "tool", "tool_call_id": "call_k3x9a0qz", "content": "sunny"}]


def _create(client: openai.OpenAI, stream: bool, **kwargs: Any) -> Any:
    if not stream:
        return client.responses.create(**kwargs)
    events = list(client.responses.create(stream=True, **kwargs))
    _assert_well_ordered(events)
    return events[-1].response


@pytest.mark.parametrize("stream", [False, True])
def test_previous_response_id_continues(client: openai.OpenAI, fake: FakeOllama,
                                        stream: bool) -> None:
    fake.reply("qwen3:8b", Reply(content=["Nice to meet you, Ada."]))
    fake.reply("qwen3:8b", Reply(content=["You are Ada."]))
    first = _create(client, stream, model="qwen3:8b", input="I am Ada.", instructions="Old.")
    second = _create(client, stream, model="qwen3:8b", input="Who am I?",
                     previous_response_id=first.id, instructions="New.")
    assert second.output_text == "You are Ada." and second.previous_response_id == first.id
    assert fake.chat_requests()[-1]["messages"] == [
        {"role": "system", "content": "New."},
        {"role": "user", "content": "I am Ada."},
        {"role": "assistant", "content": "Nice to meet you, Ada."},
        {"role": "user", "content": "Who am I?"}]


def test_unknown_previous_response_is_404(client: openai.OpenAI, fake: FakeOllama) -> None:
    with pytest.raises(openai.NotFoundError) as info:
        client.responses.create(model="qwen3:8b", input="hi", previous_response_id="resp_nope")
    assert info.value.code == "previous_response_not_found"
    assert fake.chat_requests() == []


def test_store_false_keeps_nothing(client: openai.OpenAI) -> None:
    done = client.responses.create(model="qwen3:8b", input="hi", store=False)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(done.id)
    with pytest.raises(openai.NotFoundError) as info:
        client.responses.create(model="qwen3:8b", input="more", previous_response_id=done.id)
    assert info.value.code == "previous_response_not_found"


def test_get_and_delete(client: openai.OpenAI) -> None:
    done = client.responses.create(model="qwen3:8b", input="hi")
    again = client.responses.retrieve(done.id)
    assert again.id == done.id and again.output_text == done.output_text
    client.responses.delete(done.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(done.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.delete(done.id)


def test_get_and_delete_are_logged_one_line_each(
        client: openai.OpenAI, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="toolshim")
    done = client.responses.create(model="qwen3:8b", input="hi")
    client.responses.retrieve(done.id)
    client.responses.delete(done.id)
    for call in (client.responses.retrieve, client.responses.delete):
        with pytest.raises(openai.NotFoundError):
            call(done.id)
    # The create's line is written once its answer is sent: its place may vary.
    lines = [(r["endpoint"], r["status"], r.get("error"), r.get("model"))
             for r in request_lines(caplog) if r["endpoint"] != "responses"]
    gone = f"no stored response with id {done.id!r}"
    assert lines == [("responses.retrieve", 200, None, "qwen3:8b"),
                     ("responses.delete", 200, None, None),
                     ("responses.retrieve", 404, gone, None),
                     ("responses.delete", 404, gone, None)]



def test_a_stored_response_belongs_to_the_api_key_that_made_it(
        make_settings: Callable[..., Any], new_sdk: Callable[..., openai.OpenAI]) -> None:
    # Several keys are several clients: one's stored answers (its conversation) are not
    # another's to read, continue or delete. Unknown to them, as an id never made.
    with serve(create_app(make_settings(api_keys=("key-alice-0123456789",
                                                  "key-bob-0123456789")))) as url:
        alice, bob = new_sdk(url, "key-alice-0123456789"), new_sdk(url, "key-bob-0123456789")
        done = alice.responses.create(model="qwen3:8b", input="my secret plan")
        with pytest.raises(openai.NotFoundError):
            bob.responses.retrieve(done.id)
        with pytest.raises(openai.NotFoundError) as info:
            bob.responses.create(model="qwen3:8b", input="and?", previous_response_id=done.id)
        assert info.value.code == "previous_response_not_found"
        with pytest.raises(openai.NotFoundError):
            bob.responses.delete(done.id)
        assert alice.responses.retrieve(done.id).id == done.id  # still there, still hers
        alice.responses.create(model="qwen3:8b", input="and?", previous_response_id=done.id)
        alice.responses.delete(done.id)


def test_expired_response_is_gone(make_settings: Callable[..., Any],
                                  new_sdk: Callable[..., openai.OpenAI]) -> None:
    with serve(create_app(make_settings(responses_ttl=0.2))) as url:
        client = new_sdk(url)
        done = client.responses.create(model="qwen3:8b", input="hi")
        time.sleep(0.4)
        with pytest.raises(openai.NotFoundError) as info:
            client.responses.create(model="qwen3:8b", input="x", previous_response_id=done.id)
        assert info.value.code == "previous_response_not_found"


def test_length_stop_is_incomplete(client: openai.OpenAI, fake: FakeOllama) -> None:
    fake.reply("qwen3:8b", Reply(content=["trunc"], finish="length"))
    done = client.responses.create(model="qwen3:8b", input="long", max_output_tokens=5)
    assert done.status == "incomplete" and done.incomplete_details is not None
    assert done.incomplete_details.reason == "max_output_tokens"
    assert fake.chat_requests()[-1]["max_tokens"] == 5
    events = list(client.responses.create(model="qwen3:8b", input="long", stream=True))
    assert events[-1].type == "response.incomplete"


# --- tool policy: the chat flow's behaviour, reached through /v1/responses ----------


@pytest.mark.parametrize("stream", [False, True])
def test_hosted_tools_are_stripped_and_counted(client: openai.OpenAI, fake: FakeOllama,
                                               stream: bool) -> None:
    raw = client.responses.with_raw_response.create(
        model="qwen3:8b", input="hi", stream=stream,
        tools=[{"type": "web_search"}, {"type": "file_search", "vector_store_ids": ["vs_1"]},
               {"type": "code_interpreter", "container": {"type": "auto"}}, WEATHER_RESPONSES])
    assert raw.headers["x-toolshim-tools-stripped"] == "3"
    assert [t["function"]["name"] for t in fake.chat_requests()[-1]["tools"]] == ["get_weather"]


def test_profile_deny_list_strips_and_counts_with_hosted(
        fake: FakeOllama, new_sdk: Callable[..., openai.OpenAI],
        make_settings: Callable[..., Any], caps_path: Path) -> None:
    caps_path.write_text('version: 1\nmodels:\n  "qwen3*":\n    tools: native\n'
                         '    deny_tools: [read_file]\n')
    read = {**WEATHER_RESPONSES, "name": "read_file"}
    with serve(create_app(make_settings())) as url:
        raw = new_sdk(url).responses.with_raw_response.create(
            model="qwen3:8b", input="hi", tools=[{"type": "web_search"}, WEATHER_RESPONSES, read])
        assert raw.parse().status == "completed"
    assert raw.headers["x-toolshim-tools-stripped"] == "2"
    assert [t["function"]["name"] for t in fake.chat_requests()[-1]["tools"]] == ["get_weather"]


def test_only_hosted_tools_send_none(client: openai.OpenAI, fake: FakeOllama) -> None:
    done = client.responses.create(model="qwen3:8b", input="hi",
                                   tools=[{"type": "web_search"}], tool_choice="required")
    assert done.output_text == "Hello from qwen3:8b" and done.tools == []
    assert "tools" not in fake.chat_requests()[-1] and "tool_choice" not in fake.chat_requests()[-1]


@pytest.mark.parametrize("stream", [False, True])
def test_refusal_retries_with_emulated_tools(fake: FakeOllama,
                                             new_sdk: Callable[..., openai.OpenAI],
                                             make_settings: Callable[..., Any],
                                             stream: bool,
                                             caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="toolshim")
    # Ollama's exact 400 for a model without tools: the shipped fallback describes the
    # tools in the prompt, and the call the model writes as text comes back as a call.
    fake.reply("gemma3:4b", Reply(content=[
        'Checking.\n<tool_call>\n{"name": "get_weather", ', '"arguments": {"city": "Oslo"}}',
        "\n</tool_call>"]))
    with serve(create_app(make_settings(probe=False))) as url:
        raw = new_sdk(url).responses.with_raw_response.create(
            model="gemma3:4b", input="hi", tools=[WEATHER_RESPONSES], stream=stream)
        assert raw.headers["x-toolshim-retries"] == "1"
        assert raw.headers["x-toolshim-rung"] == "emulate"
        done = raw.parse() if not stream else list(raw.parse())[-1].response
    calls = [item for item in done.output if item.type == "function_call"]
    assert [(c.name, json.loads(c.arguments)) for c in calls] == [
        ("get_weather", {"city": "Oslo"})]
    sent = fake.chat_requests()
    assert "tools" in sent[0] and "tools" not in sent[1]
    assert "get_weather" in sent[1]["messages"][0]["content"]
    # The log line says how much of the prompt the description took.
    [line] = [r for r in request_lines(caplog) if r["endpoint"] == "responses"]
    assert line["rung"] == "emulate"
    assert line["emulated_chars"] == len(sent[1]["messages"][0]["content"])


@pytest.mark.parametrize("stream", [False, True])
def test_hallucinated_call_is_dropped(client: openai.OpenAI, fake: FakeOllama,
                                      stream: bool) -> None:
    fake.reply("qwen3:8b", Reply(tool_calls=[
        tool_call("get_weather", {"city": "Tokyo"}, "call_aaaaaaaa"),
        tool_call("launch_rockets", {"count": 3}, "call_bbbbbbbb", 1)]))
    raw = client.responses.with_raw_response.create(model="qwen3:8b", input="weather?",
                                                    tools=[WEATHER_RESPONSES], stream=stream)
    if not stream:  # a stream's headers leave before any call exists
        assert raw.headers["x-toolshim-calls-dropped"] == "1"
    done = raw.parse() if not stream else list(raw.parse())[-1].response
    assert [(i.type, getattr(i, "name", None)) for i in done.output] == [
        ("function_call", "get_weather")]


@pytest.mark.parametrize("stream", [False, True])
def test_text_call_is_recovered(client: openai.OpenAI, fake: FakeOllama, stream: bool) -> None:
    text = 'Let me check.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Tokyo"}}' \
           '\n</tool_call>'
    fake.reply("qwen3:8b", Reply(content=[text[i:i + 7] for i in range(0, len(text), 7)]))
    done = _create(client, stream, model="qwen3:8b", input="weather?", tools=[WEATHER_RESPONSES])
    assert [i.type for i in done.output] == ["message", "function_call"]
    assert done.output_text.strip() == "Let me check."
    call = done.output[1]
    assert (call.name, call.arguments) == ("get_weather", '{"city":"Tokyo"}')


@pytest.mark.parametrize("stream", [False, True])
def test_emulated_tools_round_trip(client: openai.OpenAI, fake: FakeOllama, caps_path: Path,
                                   proxy_url: str, stream: bool) -> None:
    edit_and_wait(caps_path, 'version: 1\nmodels:\n  "gemma3:*":\n    tools: emulate\n'
                  '    tool_format: hermes\n', proxy_url)
    text = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Tokyo"}}\n</tool_call>'
    fake.reply("gemma3:4b", Reply(content=[text[i:i + 5] for i in range(0, len(text), 5)]))
    done = _create(client, stream, model="gemma3:4b", tools=[WEATHER_RESPONSES], input=[
        {"role": "user", "content": "weather in Paris?"},
        {"type": "function_call", "call_id": "call_1", "name": "get_weather",
         "arguments": '{"city": "Paris"}'},
        {"type": "function_call_output", "call_id": "call_1", "output": "18C"},
        {"role": "user", "content": "and Tokyo?"}])
    assert [(i.type, i.name, i.arguments) for i in done.output] == [
        ("function_call", "get_weather", '{"city":"Tokyo"}')]
    sent = fake.chat_requests()[-1]
    assert "tools" not in sent and "get_weather" in sent["messages"][0]["content"]


def test_reasoning_is_a_summary_item(client: openai.OpenAI, fake: FakeOllama,
                                     caps_path: Path, proxy_url: str) -> None:
    edit_and_wait(caps_path, "version: 1\nmodels:\n  qwen3*:\n    reasoning: move\n", proxy_url)
    fake.reply("qwen3:8b", Reply(content=["<think>", "sum it", "</think>", "42"]))
    events = list(client.responses.create(model="qwen3:8b", input="6*7?", stream=True))
    _assert_well_ordered(events)
    kinds = _types(events)
    assert "response.reasoning_summary_text.delta" in kinds
    final = events[-1].response
    assert [i.type for i in final.output] == ["reasoning", "message"]
    assert final.output[0].summary[0].text == "sum it" and final.output_text == "42"


# --- errors -------------------------------------------------------------------------


def test_unknown_model_is_the_chat_404(client: openai.OpenAI) -> None:
    with pytest.raises(openai.NotFoundError) as info:
        client.responses.create(model="nosuch", input="hi")
    assert info.value.body == {  # what chat answers: never another model
        "message": "The model `nosuch` does not exist or you do not have access to it.",
        "type": "invalid_request_error", "param": "model", "code": "model_not_found"}


@pytest.mark.parametrize(("body", "field"), [
    ({"model": "qwen3:8b"}, "input"),
    ({"model": "qwen3:8b", "input": 3}, "input"),
    ({"model": "qwen3:8b", "input": [{"type": "message", "role": "wizard", "content": "x"}]},
     "input.0.role"),
    ({"model": "qwen3:8b", "input": [{"type": "function_call_output", "output": "x"}]},
     "input.0.call_id"),
    ({"model": "qwen3:8b", "input": "x", "tool_choice": "sometimes"}, "tool_choice"),
    ({"model": "qwen3:8b", "input": "x", "tools": [{"type": "function"}]}, "tools.0.name"),
    ({"model": "qwen3:8b", "input": "x", "temperature": "hot"}, "temperature"),
])
def test_malformed_body_is_400_naming_the_field(proxy_url: str, body: Any, field: str) -> None:
    answer = httpx.post(proxy_url + "/v1/responses", json=body)
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["param"] == field and field in error["message"]
    assert error["type"] == "invalid_request_error"


def test_reset_mid_stream_ends_with_response_failed(client: openai.OpenAI,
                                                    fake: FakeOllama) -> None:
    # A pause between events so the two pieces reach toolshim before the reset does.
    fake.reply("qwen3:8b", Reply(content=["one", "two", "three"], reset_after=2, delay=0.05))
    events = list(client.responses.create(model="qwen3:8b", input="count", stream=True))
    _assert_well_ordered(events)
    assert events[-1].type == "response.failed"
    assert events[-1].response.error is not None
    assert "".join(e.delta for e in events if e.type == "response.output_text.delta") == "onetwo"


def test_upstream_error_event_ends_with_response_failed(client: openai.OpenAI,
                                                        fake: FakeOllama) -> None:
    fake.reply("qwen3:8b", Reply(raw_events=[
        (b'data: {"error":{"message":"CUDA out of memory","type":"InternalServerError",'
         b'"param":null,"code":500}}\n\n'), b"data: [DONE]\n\n"]))
    events = list(client.responses.create(model="qwen3:8b", input="hi", stream=True))
    assert events[-1].type == "response.failed"
    assert "CUDA out of memory" in events[-1].response.error.message


def test_client_disconnect_closes_upstream(fake: FakeOllama, proxy_url: str) -> None:
    fake.reply("qwen3:8b", Reply(content=[f"piece {i} " for i in range(50)], delay=0.05))
    leave_mid_stream(proxy_url + "/v1/responses",
                     {"model": "qwen3:8b", "input": "go", "stream": True})
    wait_for_cancel(fake)
    assert fake.abandoned == 1


def test_counted_and_logged_like_chat(client: openai.OpenAI, proxy_url: str,
                                      fake: FakeOllama) -> None:
    client.responses.create(model="qwen3:8b", input="hi")
    list(client.responses.create(model="qwen3:8b", input="hi", stream=True))
    scrape = httpx.get(proxy_url + "/metrics").text
    assert 'toolshim_requests_total{endpoint="responses",model="qwen3:8b",status="200"} 2.0' \
        in scrape


def test_api_keys_apply(make_settings: Callable[..., Any],
                        new_sdk: Callable[..., openai.OpenAI]) -> None:
    with serve(create_app(make_settings(api_keys=("sk-good",)))) as url:
        with pytest.raises(openai.AuthenticationError):
            new_sdk(url, api_key="sk-bad").responses.create(model="qwen3:8b", input="hi")
        done = new_sdk(url, api_key="sk-good").responses.create(model="qwen3:8b", input="hi")
        assert done.status == "completed"


def test_body_over_limit_is_413(make_settings: Callable[..., Any],
                                new_sdk: Callable[..., openai.OpenAI]) -> None:
    with serve(create_app(make_settings(max_body_bytes=200))) as url, \
            pytest.raises(openai.APIStatusError) as info:
        new_sdk(url).responses.create(model="qwen3:8b", input="x" * 500)
    assert info.value.status_code == 413 and info.value.code == "request_too_large"


def test_client_leaving_before_the_body_frees_the_upstream(fake: FakeOllama,
                                                           proxy_url: str) -> None:
    fake.reply("qwen3:8b", Reply(content=[f"piece {i} " for i in range(50)], delay=0.05))
    with httpx.stream("POST", proxy_url + "/v1/responses",
                      json={"model": "qwen3:8b", "input": "go", "stream": True}) as response:
        assert response.status_code == 200  # headers only: not one body byte read
    wait_for_cancel(fake)
    assert fake.abandoned == 1
