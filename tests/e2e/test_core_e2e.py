"""The proxy core through the real openai SDK, under real uvicorn and in process."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx
import openai
import pytest
from support.fake_ollama import FakeOllama, Reply
from support.leaving import leave_mid_stream, wait_for_cancel
from support.servers import free_port, serve

from proxy.app import create_app
from proxy.settings import Settings

MSG = [{"role": "user", "content": "hi"}]


def test_non_streaming_answer_passes_through(client: openai.OpenAI) -> None:
    raw = client.chat.completions.with_raw_response.create(model="qwen3:8b", messages=MSG)
    done = raw.parse()
    assert done.choices[0].message.content == "Hello from qwen3:8b"
    assert done.choices[0].finish_reason == "stop"
    assert done.usage is not None and done.usage.total_tokens == 17
    assert float(raw.headers["x-toolshim-overhead-ms"]) >= 0
    assert raw.headers["x-request-id"]


def test_a_plain_whole_answer_reaches_the_client_as_the_backend_wrote_it(
        fake: FakeOllama, client: openai.OpenAI) -> None:
    # Ollama's Go encoder writes "&" as \u0026. With nothing for the stages to change,
    # the client gets those bytes, not a re-encoding of the same completion; a call
    # that must be checked makes the answer rebuilt (here dropped: no tool offered).
    plain = (b'{"id":"chatcmpl-88","object":"chat.completion","created":1755000000,'
             b'"model":"qwen3:8b","system_fingerprint":"fp_ollama","choices":[{"index":0,'
             b'"message":{"role":"assistant","content":"Tom \\u0026 Jerry"},'
             b'"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":5,'
             b'"total_tokens":17}}\n')
    called = plain.replace(b'"content":"Tom \\u0026 Jerry"}', b'"content":"Tom \\u0026 Jerry",'
                           b'"tool_calls":[{"id":"call_1","index":0,"type":"function",'
                           b'"function":{"name":"nowhere","arguments":"{}"}}]}')
    for body, as_written in ((plain, True), (called, False)):
        fake.reply("qwen3:8b", Reply(body=body))
        raw = client.chat.completions.with_raw_response.create(model="qwen3:8b", messages=MSG)
        assert raw.parse().choices[0].message.content == "Tom & Jerry"
        assert (raw.http_response.content == body) is as_written
        assert raw.parse().choices[0].message.tool_calls is None


def test_streaming_answer_and_usage(client: openai.OpenAI) -> None:
    stream = client.chat.completions.create(model="qwen3:8b", messages=MSG, stream=True,
                                            stream_options={"include_usage": True})
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Hello from qwen3:8b"
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert finishes[-1] == "stop"
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert chunks[-1].usage.total_tokens == 17


async def test_async_sdk_in_process(aclient: openai.AsyncOpenAI) -> None:
    done = await aclient.chat.completions.create(model="qwen3:8b", messages=MSG)
    assert done.choices[0].message.content == "Hello from qwen3:8b"
    stream = await aclient.chat.completions.create(model="qwen3:8b", messages=MSG, stream=True)
    text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
    assert text == "Hello from qwen3:8b"


def test_stream_is_not_buffered(fake: FakeOllama, client: openai.OpenAI) -> None:
    fake.reply("qwen3:8b", Reply(content=["a", "b", "c", "d"], delay=0.3))
    started = time.monotonic()
    stream = client.chat.completions.create(model="qwen3:8b", messages=MSG, stream=True)
    first = next(iter(stream))
    first_at = time.monotonic() - started
    rest = list(stream)
    total = time.monotonic() - started
    assert first.choices[0].delta.content == "a"
    assert len(rest) >= 4
    assert first_at < 0.6 < total  # the first piece came long before the last


def test_models_are_merged_and_annotated(new_sdk: Callable[..., openai.OpenAI],
                                         fake: FakeOllama, proxy_url: str) -> None:
    models = new_sdk(proxy_url).models.list()
    by_id = {m.id: m for m in models.data}
    assert set(by_id) == {"qwen3:8b", "gemma3:4b"}
    extra: dict[str, Any] = by_id["qwen3:8b"].model_extra or {}
    assert extra["toolshim"]["tools"] in {"auto", "native", "off", "emulate"}


def test_other_v1_paths_pass_through(fake: FakeOllama, client: openai.OpenAI) -> None:
    emb = client.embeddings.create(model="qwen3:8b", input="hello")
    assert emb.data[0].embedding == [0.1, 0.2, 0.3]
    # The SDK asks for base64 unless told otherwise, and decodes it itself; the
    # body reaches the backend exactly as the SDK sent it.
    assert fake.requests[-1] == {"model": "qwen3:8b", "input": "hello",
                                 "encoding_format": "base64"}


def test_malformed_json_is_a_400_envelope(proxy_url: str) -> None:
    response = httpx.post(proxy_url + "/v1/chat/completions", content=b"{not json",
                          headers={"content-type": "application/json"})
    assert response.status_code == 400
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["type"] == "invalid_request_error"


@pytest.mark.parametrize("body", [
    {"model": "qwen3:8b", "messages": "hi"},
    {"model": "qwen3:8b"},
    {"messages": MSG},
    {"model": 3, "messages": MSG},
    {"model": "qwen3:8b", "messages": MSG, "tools": [{"type": "function"}]},
    [1, 2, 3],
])
def test_wrong_shapes_are_400_with_the_sdk(client: openai.OpenAI, body: Any) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        client.post("/chat/completions", body=body, cast_to=object)
    assert info.value.status_code == 400
    assert "invalid" in str(info.value).lower()


def test_body_over_limit_is_413(new_sdk: Callable[..., openai.OpenAI],
                                make_settings: Callable[..., Settings]) -> None:
    with serve(create_app(make_settings(max_body_bytes=1000))) as url:
        sdk = new_sdk(url)
        with pytest.raises(openai.APIStatusError) as info:
            sdk.chat.completions.create(model="qwen3:8b",
                                        messages=[{"role": "user", "content": "x" * 5000}])
    assert info.value.status_code == 413
    # The one who reads it may be the one who runs toolshim: the answer names the knob.
    assert "--max-body-bytes" in info.value.message


def test_unreachable_upstream_is_502(new_sdk: Callable[..., openai.OpenAI],
                                     make_settings: Callable[..., Settings]) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    with serve(create_app(make_settings(upstreams=(dead,), probe=False))) as url:
        sdk = new_sdk(url)
        with pytest.raises(openai.InternalServerError) as info:
            sdk.chat.completions.create(model="qwen3:8b", messages=MSG)
        assert info.value.status_code == 502
        assert httpx.get(url + "/readyz").status_code == 503
        assert httpx.get(url + "/healthz").status_code == 200


def test_slow_upstream_is_504(new_sdk: Callable[..., openai.OpenAI],
                              fake: FakeOllama, make_settings: Callable[..., Settings]) -> None:
    fake.reply("qwen3:8b", Reply(content=["late"], delay=2.0))
    with serve(create_app(make_settings(read_timeout=0.3))) as url:
        sdk = new_sdk(url)
        with pytest.raises(openai.APIStatusError) as info:
            sdk.chat.completions.create(model="qwen3:8b", messages=MSG)
    assert info.value.status_code == 504


def test_upstream_404_passes_through(fake: FakeOllama, client: openai.OpenAI) -> None:
    # Listed, then removed on the backend (`ollama rm`) before the request: its own 404.
    fake.reply("qwen3:8b", Reply(status=404, body=b'{"error":{"message":"model \'qwen3:8b\' '
                                 b'not found","type":"not_found_error","param":null,'
                                 b'"code":null}}\n'))
    with pytest.raises(openai.NotFoundError) as info:
        client.chat.completions.create(model="qwen3:8b", messages=MSG)
    assert "model 'qwen3:8b' not found" in str(info.value)


def test_an_upstream_listing_nothing_is_not_held_to_its_list(
        new_sdk: Callable[..., openai.OpenAI], make_settings: Callable[..., Settings]) -> None:
    empty = FakeOllama()  # lists `"data": null`: it may still serve what it is asked for
    with serve(empty.app, lifespan="off") as backend, \
            serve(create_app(make_settings(upstreams=(backend,)))) as url, \
            pytest.raises(openai.NotFoundError) as info:
        new_sdk(url).chat.completions.create(model="nosuch", messages=MSG)
    assert "model 'nosuch' not found" in str(info.value)  # the backend's own answer
    assert len(empty.chat_requests()) == 1


def test_model_on_no_listing_is_model_not_found(fake: FakeOllama,
                                                 client: openai.OpenAI) -> None:
    with pytest.raises(openai.NotFoundError) as info:
        client.chat.completions.create(model="nosuch", messages=MSG)
    assert info.value.code == "model_not_found"
    assert fake.chat_requests() == []  # never sent to a backend that would answer another model


def test_upstream_reset_mid_stream_ends_with_error(fake: FakeOllama,
                                                    client: openai.OpenAI) -> None:
    fake.reply("qwen3:8b", Reply(content=["one", "two", "three"], reset_after=2))
    stream = client.chat.completions.create(model="qwen3:8b", messages=MSG, stream=True)
    got: list[str] = []
    with pytest.raises(openai.APIError):
        for chunk in stream:
            got.append(chunk.choices[0].delta.content or "")
    assert got == ["one", "two"]


def test_garbage_mid_stream_ends_with_error(fake: FakeOllama, client: openai.OpenAI) -> None:
    fake.reply("qwen3:8b", Reply(raw_events=[
        (b'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"qwen3:8b",'
         b'"choices":[{"index":0,"delta":{"role":"assistant","content":"ok"},'
         b'"finish_reason":null}]}\n\n'),
        b"data: <html>oops</html>\n\n"]))
    stream = client.chat.completions.create(model="qwen3:8b", messages=MSG, stream=True)
    with pytest.raises(openai.APIError):
        list(stream)


def test_client_disconnect_closes_upstream(fake: FakeOllama, proxy_url: str) -> None:
    fake.reply("qwen3:8b", Reply(content=[f"piece {i} " for i in range(50)], delay=0.05))
    leave_mid_stream(proxy_url + "/v1/chat/completions",
                     {"model": "qwen3:8b", "messages": MSG, "stream": True})
    wait_for_cancel(fake)
    assert fake.abandoned == 1


def test_readyz_after_an_answer(client: openai.OpenAI, proxy_url: str) -> None:
    client.chat.completions.create(model="qwen3:8b", messages=MSG)
    ready = httpx.get(proxy_url + "/readyz")
    assert ready.status_code == 200 and ready.json()["status"] == "ready"


def test_unknown_route_is_openai_envelope(proxy_url: str) -> None:
    response = httpx.get(proxy_url + "/nope")
    assert response.status_code == 404
    assert response.json()["error"]["type"] == "not_found_error"


def test_client_leaving_a_slow_non_stream_request_cancels_upstream(
        fake: FakeOllama, proxy_url: str) -> None:
    fake.reply("qwen3:8b", Reply(content=["late"], delay=5.0))
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(proxy_url + "/v1/chat/completions", timeout=0.5,
                   json={"model": "qwen3:8b", "messages": MSG})
    wait_for_cancel(fake, within=4.5)  # well before the fake would have answered (5 s)
    assert fake.abandoned == 1


def test_models_are_routed_to_the_upstream_that_lists_them(new_sdk: Callable[..., openai.OpenAI], 
        fake_url: str, make_settings: Callable[..., Settings]) -> None:
    other = FakeOllama()
    other.add_model("llama3.2:3b")
    with serve(other.app, lifespan="off") as other_url, \
            serve(create_app(make_settings(upstreams=(fake_url, other_url)))) as url:
        sdk = new_sdk(url)
        done = sdk.chat.completions.create(model="llama3.2:3b", messages=MSG)
        assert done.choices[0].message.content == "Hello from llama3.2:3b"
        assert other.chat_requests()[-1]["model"] == "llama3.2:3b"
        listed = {m.id for m in sdk.models.list().data}
        assert listed == {"qwen3:8b", "gemma3:4b", "llama3.2:3b"}


@pytest.mark.parametrize(("status", "body", "expected", "says"), [
    (200, b"<html>proxy error page</html>", 502, "not a chat completion"),
    (500, b"<html>Internal Server Error</html>", 500, "Internal Server Error"),
])
def test_upstream_html_answers_become_envelopes(fake: FakeOllama, client: openai.OpenAI,
                                                status: int, body: bytes, expected: int,
                                                says: str) -> None:
    fake.reply("qwen3:8b", Reply(status=status, body=body, content_type="text/html"))
    with pytest.raises(openai.APIStatusError) as info:
        client.chat.completions.create(model="qwen3:8b", messages=MSG)
    assert info.value.status_code == expected
    assert says in str(info.value)


def test_stream_cut_without_finish_ends_with_error(fake: FakeOllama,
                                                   client: openai.OpenAI) -> None:
    fake.reply("qwen3:8b", Reply(raw_events=[
        (b'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"qwen3:8b",'
        b'"choices":[{"index":0,"delta":{"role":"assistant","content":"half"},'
        b'"finish_reason":null}]}\n\n')]))
    stream = client.chat.completions.create(model="qwen3:8b", messages=MSG, stream=True)
    got: list[str] = []
    with pytest.raises(openai.APIError) as info:
        for chunk in stream:
            got.append(chunk.choices[0].delta.content or "")
    assert got == ["half"]
    assert "before it finished" in str(info.value)


def test_upstream_mid_stream_error_event_is_passed_on(fake: FakeOllama,
                                                      client: openai.OpenAI) -> None:
    fake.reply("qwen3:8b", Reply(raw_events=[
        (b'data: {"error":{"message":"CUDA out of memory","type":"InternalServerError",'
        b'"param":null,"code":500}}\n\n'), b"data: [DONE]\n\n"]))
    stream = client.chat.completions.create(model="qwen3:8b", messages=MSG, stream=True)
    with pytest.raises(openai.APIError) as info:
        list(stream)
    assert "CUDA out of memory" in str(info.value)
