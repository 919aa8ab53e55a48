"""Refusal signatures, fed the exact bodies docs/backends.md quotes."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from proxy.backends.refusals import Refusal, classify_refusal

OLLAMA_V1 = (
    b'{"error":{"message":"registry.ollama.ai/library/gemma3:4b does not support tools",'
    b'"type":"invalid_request_error","param":null,"code":null}}\n'
)
OLLAMA_V1_LEGACY = OLLAMA_V1.replace(b"invalid_request_error", b"api_error")
OLLAMA_NATIVE = b'{"error":"registry.ollama.ai/library/gemma3:4b does not support tools"}'
OLLAMA_OLD_PREFIX = b'{"error":"llama3 does not support tools"}'
VLLM_AUTO = (
    b'{"error":{"message":"\\"auto\\" tool choice requires --enable-auto-tool-choice and '
    b'--tool-call-parser to be set","type":"BadRequestError","param":null,"code":400}}'
)
VLLM_AUTO_FLAT = (
    b'{"object":"error","message":"\\"auto\\" tool choice requires --enable-auto-tool-choice'
    b' and --tool-call-parser to be set","type":"BadRequestError","param":null,"code":400}'
)
VLLM_REQUIRED = (
    b'{"error":{"message":"tool_choice=\\"required\\" requires --tool-call-parser to be set",'
    b'"type":"BadRequestError","param":null,"code":400}}'
)
VLLM_NAMED = (
    b'{"error":{"message":"tool_choice=function \\"get_weather\\" requires --tool-call-parser'
    b' to be set","type":"BadRequestError","param":null,"code":400}}'
)
LLAMA_TOOLS = (
    b'{"error":{"code":500,"message":"tools param requires --jinja flag","type":"server_error"}}'
)
LLAMA_CHOICE = (
    b'{"error":{"code":500,"message":"tool_choice param requires --jinja flag",'
    b'"type":"server_error"}}'
)
OPENROUTER_TOOLS = (
    b'{"error":{"message":"No endpoints found that support tool use. To learn more about '
    b'provider routing, visit: https://openrouter.ai/docs/provider-routing","code":404}}'
)
OPENROUTER_CHOICE = (
    b'{"error":{"message":"No endpoints found that support the provided \'tool_choice\' '
    b'value.","code":404}}'
)


@pytest.mark.parametrize(
    ("status", "body", "kind", "backend"),
    [
        (400, OLLAMA_V1, "tools", "ollama"),
        (400, OLLAMA_V1_LEGACY, "tools", "ollama"),
        (400, OLLAMA_NATIVE, "tools", "ollama"),
        (400, OLLAMA_OLD_PREFIX, "tools", "ollama"),
        (400, VLLM_AUTO, "tools", "vllm"),
        (400, VLLM_AUTO_FLAT, "tools", "vllm"),
        (400, VLLM_REQUIRED, "tool_choice", "vllm"),
        (400, VLLM_NAMED, "tool_choice", "vllm"),
        (500, LLAMA_TOOLS, "tools", "llama.cpp"),
        (500, LLAMA_CHOICE, "tool_choice", "llama.cpp"),
        (404, OPENROUTER_TOOLS, "tools", "openrouter"),
        (404, OPENROUTER_CHOICE, "tool_choice", "openrouter"),
        (400, b'{"error":{"message":"This model does not support function calling"}}',
         "tools", "generic"),
        (400, b'{"error":{"message":"Tools are not supported for this model"}}',
         "tools", "generic"),
        (400, b'{"error":{"message":"model foo does not support tool use"}}', "tools", "generic"),
    ],
)
def test_recognises_backend_refusals(status: int, body: bytes, kind: str, backend: str) -> None:
    refusal = classify_refusal(status, body)
    assert refusal is not None
    assert (refusal.kind, refusal.backend) == (kind, backend)
    assert refusal.message == _message(body)


def _message(body: bytes) -> str:
    data = orjson.loads(body)
    error = data.get("error", data)
    return error if isinstance(error, str) else str(error["message"])


def test_ollama_message_is_kept_verbatim_as_evidence() -> None:
    assert classify_refusal(400, OLLAMA_V1) == Refusal(
        "tools", "ollama", "registry.ollama.ai/library/gemma3:4b does not support tools"
    )


@pytest.mark.parametrize(
    ("status", "body"),
    [
        # model not found (R7), every backend
        (404, b'{"error":"model \'nosuch\' not found"}'),
        (404, (b'{"error":{"message":"model \'nosuch\' not found","type":"not_found_error",'
              b'"param":null,"code":null}}\n')),
        (404, (b'{"error":{"message":"The model `nosuch` does not exist.","type":"NotFoundError",'
              b'"param":null,"code":404}}')),
        # other capabilities Ollama gates
        (400, b'{"error":"\\"test\\" does not support thinking"}'),
        (400, b'{"error":"\\"nomic\\" does not support chat"}'),
        (400, b'{"error":"registry.ollama.ai/library/test:latest does not support insert"}'),
        # request validation and context length
        (400, b'{"error":{"message":"[] is too short - \'messages\'","type":"invalid_request_error"}}'),
        (400, (b'{"error":{"message":"When using `tool_choice`, `tools` must be set.",'
              b'"type":"BadRequestError","param":null,"code":400}}')),
        (400, (b'{"error":{"code":400,"message":"the request exceeds the available context size,'
              b' try increasing it","type":"exceed_context_size_error"}}')),
        (400, (b'{"error":{"message":"This model\'s maximum context length is 8192 tokens",'
              b'"type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}')),
        (400, b'{"error":"invalid tool call arguments"}'),
        # server errors that are not a jinja refusal
        (500, b'{"error":{"code":500,"message":"model crashed","type":"server_error"}}'),
        (502, b'{"error":"bad gateway"}'),
        # a refusal wording under the wrong status is not that backend's refusal
        (500, OLLAMA_NATIVE),
        (400, LLAMA_TOOLS),
        (200, OLLAMA_V1),
        # non-JSON, odd JSON
        (400, b""),
        (400, b"does not support tools"),
        (400, b"<html>400 Bad Request</html>"),
        (400, b"\xff\xfe\x00garbage"),
        (400, b"[1, 2, 3]"),
        (400, b'"does not support tools"'),
        (400, b'{"error":null}'),
        (400, b'{"error":{"message":42}}'),
        (400, b'{"message":"does not support tools"}'),
        (500, b"tools param requires --jinja flag"),
    ],
)
def test_everything_else_is_not_a_refusal(status: int, body: bytes) -> None:
    assert classify_refusal(status, body) is None


@given(st.integers(min_value=100, max_value=599), st.binary(max_size=200))
def test_never_raises_on_any_body(status: int, body: bytes) -> None:
    result = classify_refusal(status, body)
    assert result is None or isinstance(result, Refusal)


@given(st.text(max_size=80))
def test_success_status_is_never_a_refusal(prefix: str) -> None:
    body = orjson.dumps({"error": prefix + " does not support tools"})
    assert classify_refusal(200, body) is None
    assert classify_refusal(400, body) is not None
