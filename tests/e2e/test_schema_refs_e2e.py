"""`$ref`s in a client's tool schema: only refs inside the schema are followed.

A ref to a file or URL must never be read or fetched by the proxy (that was a
local file read into `dropped_calls` reasons, SSRF, and a frozen event loop);
such a tool's calls go unchecked. Refs to the schema's own `$defs` still check.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from support.fake_ollama import FakeOllama, Reply, tool_call
from support.raw_server import raw_server

from proxy.transforms.response import checks
from proxy.transforms.response.checks import CallVerdict, SchemaCache, check_call

# The process runs with warnings as errors under pytest only: there jsonschema's
# "remote retrieval is deprecated" warning (issued after the fetch) would abort a
# fetch before its content is used, hiding exactly the leak these tests look for.
pytestmark = pytest.mark.filterwarnings(
    "ignore:Automatically retrieving remote references:DeprecationWarning")

MSG: list[Any] = [{"role": "user", "content": "go"}]
MARK = "REF_TARGET_WAS_READ_7f3a"
"""a required property only the ref's target names: it shows up in a drop reason if read."""


def _tool(parameters: dict[str, Any]) -> list[Any]:
    return [{"type": "function", "function": {"name": "f", "parameters": parameters}}]


@pytest.fixture
def listener() -> Iterator[tuple[str, list[bytes]]]:
    """A loopback HTTP server that records every connection and answers with a schema
    requiring MARK, so a proxy that fetched it would drop the call (and not hang)."""
    got: list[bytes] = []
    body = b'{"type":"object","required":["%s"]}' % MARK.encode()

    def handle(conn: socket.socket) -> None:
        got.append(conn.recv(65536))
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body))

    with raw_server(handle, timeout=2) as url:
        yield url, got


def _ask(fake: FakeOllama, client: openai.OpenAI, parameters: dict[str, Any],
         arguments: dict[str, Any], stream: bool) -> str:
    """The whole answer's (or stream's) text, after the model calls f(arguments)."""
    fake.reply("qwen3:8b", Reply(tool_calls=[tool_call("f", arguments)]))
    raw = client.chat.completions.with_raw_response.create(
        model="qwen3:8b", messages=MSG, tools=_tool(parameters), stream=stream)
    return raw.http_response.read().decode()


@pytest.mark.parametrize("stream", [False, True])
def test_a_file_ref_is_never_read(fake: FakeOllama, client: openai.OpenAI, tmp_path: Path,
                                  stream: bool) -> None:
    target = tmp_path / "schema.json"
    target.write_text(json.dumps({"type": "object", "required": [MARK]}))
    text = _ask(fake, client, {"$ref": target.as_uri()}, {}, stream)
    assert MARK not in text
    assert '"name":"f"' in text and '"dropped"' not in text


@pytest.mark.parametrize("stream", [False, True])
def test_an_http_ref_is_never_fetched(fake: FakeOllama, client: openai.OpenAI,
                                      listener: tuple[str, list[bytes]], stream: bool) -> None:
    url, got = listener
    # Nested under a local ref and beside a base URI: every shape, not only the root.
    parameters = {"$id": url + "/root.json", "type": "object",
                  "properties": {"a": {"$ref": "#/$defs/a"}},
                  "$defs": {"a": {"$ref": url + "/a.json"}}}
    text = _ask(fake, client, parameters, {"a": 1}, stream)
    assert got == []
    assert MARK not in text and '"dropped"' not in text


def test_a_relative_ref_is_not_fetched_from_the_schemas_base(
        fake: FakeOllama, client: openai.OpenAI, listener: tuple[str, list[bytes]]) -> None:
    url, got = listener
    text = _ask(fake, client, {"$id": url + "/root.json", "$ref": "other.json"}, {}, False)
    assert got == []
    assert MARK not in text


def test_the_validator_itself_never_fetches(listener: tuple[str, list[bytes]],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The registry is the last line: even a ref the up-front scan missed resolves only
    locally, and an unresolvable one leaves the call unchecked."""
    url, got = listener
    monkeypatch.setattr(checks, "_refers_outside", lambda schema: False)
    offered = {"f": {"type": "object", "properties": {"a": {"$ref": url + "/a.json"}}}}
    verdict = check_call("f", '{"a": 1}', offered, "drop", {}, SchemaCache())
    assert got == []
    assert verdict == CallVerdict(True, "f", '{"a": 1}')


LOCAL = {"type": "object", "$defs": {"city": {"type": "string"}},
         "definitions": {"units": {"enum": ["c", "f"]}},
         "properties": {"city": {"$ref": "#/$defs/city"},
                        "units": {"$ref": "#/definitions/units"}},
         "required": ["city"]}


@pytest.mark.parametrize(("arguments", "kept"), [
    ({"city": "Tokyo", "units": "c"}, True),
    ({"city": 5}, False),
    ({"city": "Tokyo", "units": "k"}, False),
])
def test_local_refs_still_check(fake: FakeOllama, client: openai.OpenAI,
                                arguments: dict[str, Any], kept: bool) -> None:
    fake.reply("qwen3:8b", Reply(tool_calls=[tool_call("f", arguments)]))
    done = client.chat.completions.create(model="qwen3:8b", messages=MSG, tools=_tool(LOCAL))
    assert bool(done.choices[0].message.tool_calls) is kept
