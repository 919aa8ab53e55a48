"""Egress as companies run it: an upstream behind a private CA (a TLS front on loopback
whose certificate a CA made in the test signed), trusted through --ca-bundle or
SSL_CERT_FILE, an untrusted one a 502 that says so, and an HTTP forward proxy from
HTTP_PROXY / HTTPS_PROXY used, or bypassed for NO_PROXY hosts. Driven by the openai SDK
against the real app under uvicorn; nothing leaves loopback."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import openai
import pytest
from support.fake_ollama import FakeOllama, Reply
from support.forward_proxy import forward_proxy
from support.leaving import leave_mid_stream, wait_for_cancel
from support.private_ca import TlsFront, server_context, tls_front
from support.servers import serve

from proxy.app import create_app
from proxy.settings import Settings

MSG = [{"role": "user", "content": "hi"}]
_PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY",
               "http_proxy", "https_proxy", "all_proxy", "no_proxy")


@pytest.fixture(autouse=True)
def _no_ambient_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    """The machine's own proxy settings must not decide these tests."""
    for name in _PROXY_VARS:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def front(fake: FakeOllama, tmp_path: Path) -> Iterator[TlsFront]:
    with tls_front(fake.app, tmp_path) as served:
        yield served


@pytest.fixture
def sdk() -> Iterator[Callable[[str], openai.OpenAI]]:
    """SDK clients that talk to toolshim directly, whatever proxy the test sets for it."""
    made: list[httpx.Client] = []

    def make(url: str) -> openai.OpenAI:
        made.append(httpx.Client(trust_env=False, timeout=20))
        return openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0,
                             http_client=made[-1])

    yield make
    for one in made:
        one.close()


def _settings(upstream: str, caps: Path, **more: object) -> Settings:
    return Settings.model_validate({"upstreams": (upstream,), "capabilities": str(caps),
                                    "reload_interval": 0.0, **more})


def _chat_both_ways(client: openai.OpenAI) -> None:
    whole = client.chat.completions.create(model="qwen3:8b", messages=MSG)  # type: ignore[arg-type]
    assert whole.choices[0].message.content == "Hello from qwen3:8b"
    stream = client.chat.completions.create(model="qwen3:8b", messages=MSG,  # type: ignore[arg-type]
                                            stream=True)
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) \
        == "Hello from qwen3:8b"


@pytest.mark.parametrize("forced", [None, "httpx"])
def test_a_private_ca_given_with_ca_bundle_is_trusted_whole_and_streamed(
        front: TlsFront, caps_path: Path, sdk: Callable[[str], openai.OpenAI],
        forced: str | None) -> None:
    chosen = ((front.url, forced),) if forced else ()
    app = create_app(_settings(front.url, caps_path, ca_bundle=front.ca_file,
                               upstream_transports=chosen))
    with serve(app) as url:
        _chat_both_ways(sdk(url))
        assert httpx.get(url + "/v1/models", trust_env=False).status_code == 200
    wire = app.state.services.upstreams[front.url].wire
    assert (wire is not None) == (forced is None)  # https without a proxy: the wire


def test_a_private_ca_given_with_ssl_cert_file_is_trusted(
        front: TlsFront, caps_path: Path, sdk: Callable[[str], openai.OpenAI],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", front.ca_file)
    with serve(create_app(_settings(front.url, caps_path))) as url:
        _chat_both_ways(sdk(url))


def test_ca_bundle_wins_over_ssl_cert_file(
        front: TlsFront, caps_path: Path, sdk: Callable[[str], openai.OpenAI],
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    with tls_front(FakeOllama().app, other) as stranger:
        monkeypatch.setenv("SSL_CERT_FILE", front.ca_file)
        settings = _settings(front.url, caps_path, ca_bundle=stranger.ca_file)
        with serve(create_app(settings)) as url, pytest.raises(openai.APIStatusError) as info:
            sdk(url).chat.completions.create(model="qwen3:8b", messages=MSG)  # type: ignore[arg-type]
    assert info.value.status_code == 502


@pytest.mark.parametrize("transport", ["httpx", "wire"])
@pytest.mark.parametrize("stream", [False, True])
def test_an_untrusted_certificate_is_a_502_that_says_so(
        front: TlsFront, caps_path: Path, sdk: Callable[[str], openai.OpenAI],
        monkeypatch: pytest.MonkeyPatch, transport: str, stream: bool) -> None:
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)  # certifi's roots: none signed it
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    settings = _settings(front.url, caps_path, upstream_transports=((front.url, transport),))
    with serve(create_app(settings)) as url, pytest.raises(openai.APIStatusError) as info:
        sdk(url).chat.completions.create(model="qwen3:8b", messages=MSG,  # type: ignore[arg-type]
                                         stream=stream)
    assert info.value.status_code == 502
    body = info.value.body
    assert isinstance(body, dict)
    assert body["code"] == "upstream_certificate_untrusted" and body["type"] == "api_error"
    assert "certificate verify failed" in body["message"]
    assert front.url.removeprefix("https://") in body["message"]  # names the upstream
    assert "--ca-bundle" in body["message"]


def test_http_proxy_carries_a_plain_upstream_and_no_proxy_bypasses_it(
        fake: FakeOllama, fake_url: str, caps_path: Path,
        sdk: Callable[[str], openai.OpenAI], monkeypatch: pytest.MonkeyPatch) -> None:
    with forward_proxy() as (proxy_url, proxy):
        # httpx leaves nothing out by default: a loopback upstream goes through it too.
        monkeypatch.setenv("HTTP_PROXY", proxy_url)
        app = create_app(_settings(fake_url, caps_path))
        with serve(app) as url:
            _chat_both_ways(sdk(url))
        assert app.state.services.upstreams[fake_url].wire is None
        assert sum("/v1/chat/completions" in s for s in proxy.seen) == 2
        assert all(s.startswith(("POST http://127.0.0.1", "GET http://127.0.0.1"))
                   for s in proxy.seen)

        proxy.seen.clear()
        monkeypatch.setenv("NO_PROXY", "localhost,127.0.0.1")
        app = create_app(_settings(fake_url, caps_path))
        with serve(app) as url:
            _chat_both_ways(sdk(url))
        assert proxy.seen == []
        assert app.state.services.upstreams[fake_url].wire is not None  # our fast transport


def test_lower_case_https_proxy_tunnels_to_a_tls_upstream(
        front: TlsFront, caps_path: Path, sdk: Callable[[str], openai.OpenAI],
        monkeypatch: pytest.MonkeyPatch) -> None:
    with forward_proxy() as (proxy_url, proxy):
        monkeypatch.setenv("https_proxy", proxy_url)
        monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")  # lower case wins, as in httpx
        with serve(create_app(_settings(front.url, caps_path, ca_bundle=front.ca_file))) as url:
            _chat_both_ways(sdk(url))
    host = front.url.removeprefix("https://")
    assert f"CONNECT {host}" in proxy.seen  # a tunnel: TLS stays end to end


def test_an_https_proxy_is_trusted_with_the_ca_bundle(
        fake_url: str, caps_path: Path, sdk: Callable[[str], openai.OpenAI],
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    context, ca_file = server_context(tmp_path)
    with forward_proxy(context) as (proxy_url, proxy):
        monkeypatch.setenv("HTTP_PROXY", proxy_url)
        with serve(create_app(_settings(fake_url, caps_path, ca_bundle=ca_file))) as url:
            _chat_both_ways(sdk(url))
        assert proxy_url.startswith("https://")
        assert sum("/v1/chat/completions" in s for s in proxy.seen) == 2
        proxy.seen.clear()
        monkeypatch.delenv("SSL_CERT_FILE", raising=False)
        monkeypatch.delenv("SSL_CERT_DIR", raising=False)
        with serve(create_app(_settings(fake_url, caps_path))) as url, \
                pytest.raises(openai.APIStatusError) as info:
            sdk(url).chat.completions.create(model="qwen3:8b", messages=MSG)  # type: ignore[arg-type]
    assert info.value.status_code == 502 and "certificate verify failed" in info.value.message


def test_a_proxy_that_refuses_the_tunnel_is_a_502_that_says_so(
        front: TlsFront, caps_path: Path, sdk: Callable[[str], openai.OpenAI],
        monkeypatch: pytest.MonkeyPatch) -> None:
    with forward_proxy() as (proxy_url, proxy):
        proxy.refuse = 407
        monkeypatch.setenv("HTTPS_PROXY", proxy_url)
        with serve(create_app(_settings(front.url, caps_path, ca_bundle=front.ca_file))) as url, \
                pytest.raises(openai.APIStatusError) as info:
            sdk(url).chat.completions.create(model="qwen3:8b", messages=MSG)  # type: ignore[arg-type]
    assert info.value.status_code == 502
    assert "proxy refused" in str(info.value.message) and "407" in str(info.value.message)


# --- the relay over httpx's transport: what it does over ours -----------------------


@pytest.fixture
def over_httpx(fake_url: str, caps_path: Path) -> Iterator[str]:
    settings = _settings(fake_url, caps_path, upstream_transports=((fake_url, "httpx"),),
                         read_timeout=1.0)
    app = create_app(settings)
    with serve(app) as url:
        assert app.state.services.upstreams[fake_url].transport is not None  # httpx's
        yield url


def test_over_httpx_a_stream_flows_before_the_answer_is_whole(
        fake: FakeOllama, over_httpx: str, sdk: Callable[[str], openai.OpenAI]) -> None:
    fake.reply("qwen3:8b", Reply(content=["first", " second", " third"], delay=0.4))
    start = time.monotonic()
    stream = sdk(over_httpx).chat.completions.create(model="qwen3:8b", messages=MSG,  # type: ignore[arg-type]
                                                      stream=True)
    first = next(c for c in stream if c.choices and c.choices[0].delta.content)
    first_at = time.monotonic() - start
    rest = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert first.choices[0].delta.content == "first" and rest == " second third"
    assert first_at < 0.6, "the first piece waited for the rest"  # the whole takes >= 1.2 s


def test_over_httpx_a_client_that_leaves_cancels_the_upstream(
        fake: FakeOllama, over_httpx: str) -> None:
    fake.reply("qwen3:8b", Reply(content=[f"piece {i} " for i in range(50)], delay=0.05))
    leave_mid_stream(over_httpx + "/v1/chat/completions",
                     {"model": "qwen3:8b", "messages": MSG, "stream": True}, trust_env=False)
    wait_for_cancel(fake)
    assert fake.abandoned == 1


def test_over_httpx_a_silent_upstream_is_a_504(
        fake: FakeOllama, over_httpx: str, sdk: Callable[[str], openai.OpenAI]) -> None:
    fake.reply("qwen3:8b", Reply(content=["late"], delay=3.0))
    with pytest.raises(openai.APIStatusError) as info:
        sdk(over_httpx).chat.completions.create(model="qwen3:8b", messages=MSG)  # type: ignore[arg-type]
    assert info.value.status_code == 504


def test_over_httpx_an_unreachable_upstream_is_a_502(
        caps_path: Path, sdk: Callable[[str], openai.OpenAI]) -> None:
    dead = "http://127.0.0.1:9"
    settings = _settings(dead, caps_path, upstream_transports=((dead, "httpx"),), probe=False)
    with serve(create_app(settings)) as url, pytest.raises(openai.APIStatusError) as info:
        sdk(url).chat.completions.create(model="qwen3:8b", messages=MSG)  # type: ignore[arg-type]
    assert info.value.status_code == 502
    assert isinstance(info.value.body, dict)
    assert info.value.body["code"] == "upstream_unavailable"


def test_probe_trusts_the_ca_bundle_too(front: TlsFront, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SSL_CERT")}

    def probe(*more: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "proxy", "probe", "qwen3:8b", "--upstream", front.url,
             "--capabilities", str(tmp_path / "c.yaml"), *more],
            env=env, capture_output=True, text=True, timeout=60, check=False)

    untrusted = probe()
    assert untrusted.returncode != 0, untrusted.stdout
    trusted = probe("--ca-bundle", front.ca_file)
    assert trusted.returncode == 0, trusted.stdout + trusted.stderr
    assert "qwen3:8b: tools native" in trusted.stdout
