"""Probing models against a fake Ollama / vLLM that answers as docs/backends.md says."""

from __future__ import annotations

import io
from pathlib import Path

import httpx
import orjson
import pytest
import respx

from proxy.backends.probe import (
    list_models,
    probe_metadata,
    probe_model,
    probe_request,
    server_root,
)
from proxy.capabilities.load import parse_capabilities
from proxy.commands.probe import run_probe_cli
from proxy.types import Observation

ROOT = "http://ollama.test:11434"
JSON_CT = {"Content-Type": "application/json; charset=utf-8"}
V1_CT = {"Content-Type": "application/json"}


def show(capabilities: list[str] | None) -> httpx.Response:
    body: dict[str, object] = {
        "modelfile": "FROM x", "parameters": "", "template": "{{ .Prompt }}",
        "details": {"format": "gguf", "family": "gemma3"}, "model_info": {},
        "modified_at": "2025-07-07T20:22:19.184789Z",
    }
    if capabilities is not None:
        body["capabilities"] = capabilities
    return httpx.Response(200, content=orjson.dumps(body), headers=JSON_CT)


def not_found(model: str) -> httpx.Response:
    return httpx.Response(404, content=f'{{"error":"model \'{model}\' not found"}}'.encode(),
                          headers=JSON_CT)


REFUSED = httpx.Response(
    400,
    content=b'{"error":{"message":"registry.ollama.ai/library/gemma3:4b does not support tools",'
    b'"type":"invalid_request_error","param":null,"code":null}}\n',
    headers=V1_CT,
)
COMPLETION = httpx.Response(200, json={
    "id": "chatcmpl-1", "object": "chat.completion", "created": 1755000000, "model": "m",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "OK"},
                 "finish_reason": "stop"}],
})


LISTING_M = httpx.Response(200, json={"object": "list", "data": [
    {"id": "m", "object": "model", "created": 1, "owned_by": "me"}]})


@pytest.mark.parametrize(
    ("url", "root"),
    [(ROOT, ROOT), (ROOT + "/", ROOT), (ROOT + "/v1", ROOT), (ROOT + "/v1/", ROOT)],
)
def test_server_root(url: str, root: str) -> None:
    assert server_root(url) == root


@respx.mock
async def test_metadata_with_tools() -> None:
    route = respx.post(f"{ROOT}/api/show").mock(return_value=show(["completion", "tools"]))
    async with httpx.AsyncClient() as client:
        obs = await probe_metadata(client, ROOT, "qwen3:8b")
    assert obs == Observation("qwen3:8b", "probe", {
        "tools": True, "evidence": "/api/show capabilities: [completion, tools]"})
    assert orjson.loads(route.calls.last.request.content) == {"model": "qwen3:8b"}


@respx.mock
async def test_metadata_without_tools() -> None:
    respx.post(f"{ROOT}/api/show").mock(return_value=show(["completion", "vision"]))
    async with httpx.AsyncClient() as client:
        obs = await probe_metadata(client, ROOT, "gemma3:4b")
    assert obs is not None and obs.detail["tools"] is False


@pytest.mark.parametrize(
    "answer",
    [
        show(None),  # Ollama before v0.6.4
        not_found("x:latest"),
        httpx.Response(500, json={"error": "boom"}),
        httpx.Response(200, content=b"not json"),
        httpx.Response(200, json={"capabilities": "tools"}),
        httpx.ConnectError("refused"),
        httpx.ReadTimeout("slow"),
    ],
)
@respx.mock
async def test_metadata_unknown(answer: httpx.Response | Exception) -> None:
    respx.post(f"{ROOT}/api/show").mock(side_effect=[answer])
    async with httpx.AsyncClient() as client:
        assert await probe_metadata(client, ROOT, "x") is None


@respx.mock
async def test_request_accepted() -> None:
    route = respx.post(f"{ROOT}/v1/chat/completions").mock(return_value=COMPLETION)
    async with httpx.AsyncClient() as client:
        obs = await probe_request(client, ROOT, "m")
    assert obs is not None and obs.detail["tools"] is True
    sent = orjson.loads(route.calls.last.request.content)
    assert [t["function"]["name"] for t in sent["tools"]] == ["toolshim_probe"]
    assert sent["stream"] is False and sent["max_tokens"] <= 16


@pytest.mark.parametrize(
    ("answer", "evidence"),
    [
        (REFUSED, "registry.ollama.ai/library/gemma3:4b does not support tools"),
        (httpx.Response(400, json={"error": {
            "message": '"auto" tool choice requires --enable-auto-tool-choice and '
                       "--tool-call-parser to be set",
            "type": "BadRequestError", "param": None, "code": 400}}),
         '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'),
        (httpx.Response(500, json={"error": {
            "code": 500, "message": "tools param requires --jinja flag", "type": "server_error"}}),
         "tools param requires --jinja flag"),
    ],
)
@respx.mock
async def test_request_refused(answer: httpx.Response, evidence: str) -> None:
    respx.post(f"{ROOT}/v1/chat/completions").mock(return_value=answer)
    async with httpx.AsyncClient() as client:
        obs = await probe_request(client, ROOT, "m")
    assert obs == Observation("m", "probe", {"tools": False, "evidence": evidence})


@pytest.mark.parametrize(
    "answer",
    [
        httpx.Response(404, json={"error": {"message": "model 'x' not found",
                                            "type": "not_found_error", "param": None,
                                            "code": None}}),
        httpx.Response(500, json={"error": {"code": 500, "message": "oom", "type": "server_error"}}),
        httpx.ReadTimeout("loading the model"),
        httpx.ConnectError("refused"),
    ],
)
@respx.mock
async def test_request_unknown(answer: httpx.Response | Exception) -> None:
    respx.post(f"{ROOT}/v1/chat/completions").mock(side_effect=[answer])
    async with httpx.AsyncClient() as client:
        assert await probe_request(client, ROOT, "x") is None


@respx.mock
async def test_model_falls_back_to_request_when_metadata_is_silent() -> None:
    respx.post(f"{ROOT}/api/show").mock(return_value=httpx.Response(404, text="404 page not found"))
    chat = respx.post(f"{ROOT}/v1/chat/completions").mock(return_value=REFUSED)
    async with httpx.AsyncClient() as client:
        obs = await probe_model(client, ROOT, "m")
    assert obs is not None and obs.detail["tools"] is False
    assert chat.called


@respx.mock
async def test_model_skips_request_when_metadata_answers() -> None:
    respx.post(f"{ROOT}/api/show").mock(return_value=show(["completion", "tools"]))
    chat = respx.post(f"{ROOT}/v1/chat/completions").mock(return_value=COMPLETION)
    async with httpx.AsyncClient() as client:
        assert await probe_model(client, ROOT, "m") is not None
    assert not chat.called


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        (httpx.Response(200, json={"object": "list", "data": None}), []),
        (httpx.Response(200, json={"object": "list", "data": [
            {"id": "llama3.2:latest", "object": "model", "created": 1, "owned_by": "library"},
            {"object": "model"}]}), ["llama3.2:latest"]),
        (httpx.Response(503, text="down"), None),
        (httpx.ConnectError("refused"), None),
    ],
)
@respx.mock
async def test_list_models(answer: httpx.Response | Exception, expected: list[str] | None) -> None:
    respx.get(f"{ROOT}/v1/models").mock(side_effect=[answer])
    async with httpx.AsyncClient() as client:
        assert await list_models(client, ROOT) == expected


@respx.mock
async def test_cli_all_models_prints_and_records(tmp_path: Path) -> None:
    respx.get(f"{ROOT}/v1/models").mock(return_value=httpx.Response(200, json={
        "object": "list", "data": [
            {"id": "qwen3:8b", "object": "model", "created": 1, "owned_by": "library"},
            {"id": "gemma3:4b", "object": "model", "created": 1, "owned_by": "library"}]}))

    def show_for(request: httpx.Request) -> httpx.Response:
        model = orjson.loads(request.content)["model"]
        return show(["completion", "tools"] if model == "qwen3:8b" else ["completion"])

    respx.post(f"{ROOT}/api/show").mock(side_effect=show_for)
    path = tmp_path / "capabilities.yaml"
    out = io.StringIO()
    assert await run_probe_cli([], [ROOT + "/v1"], str(path), True, out) == 0
    assert out.getvalue().splitlines() == [
        ("qwen3:8b: tools native (probe: /api/show capabilities: [completion, tools]); "
         "toolshim uses: native"),
        # What it found, and what the proxy does: the shipped "gemma3:*" entry wins.
        ("gemma3:4b: tools off (probe: /api/show capabilities: [completion]); "
         "toolshim uses: emulate"),
    ]
    caps, problems = parse_capabilities(path.read_text(), str(path))
    assert caps is not None, problems
    assert caps.learned["qwen3:8b"].tools == "native"
    assert (caps.learned["gemma3:4b"].tool_support, caps.learned["gemma3:4b"].source,
            caps.learned["gemma3:4b"].upstream) == ("none", "probe", ROOT)


@respx.mock
async def test_cli_model_not_found_exits_4_and_records_nothing(tmp_path: Path) -> None:
    respx.get(f"{ROOT}/v1/models").mock(return_value=httpx.Response(500))  # no list: ask
    respx.post(f"{ROOT}/api/show").mock(return_value=not_found("nosuch:latest"))
    respx.post(f"{ROOT}/v1/chat/completions").mock(return_value=httpx.Response(
        404, json={"error": {"message": "model 'nosuch' not found", "type": "not_found_error",
                             "param": None, "code": None}}))
    path = tmp_path / "capabilities.yaml"
    out = io.StringIO()
    assert await run_probe_cli(["nosuch"], [ROOT], str(path), False, out) == 4
    assert out.getvalue() == f"nosuch: unknown: model not found on the upstream ({ROOT})\n"
    assert not path.exists()


@respx.mock
@pytest.mark.parametrize(("failure", "code", "text"), [
    (httpx.ConnectError("refused"), 3, f"upstream unreachable ({ROOT})"),
    (httpx.ReadTimeout("slow"), 6, f"upstream {ROOT} timed out after 5 s"),
    (httpx.Response(500, json={"error": {"message": "boom", "type": "api_error"}}), 5,
     f"upstream {ROOT} answered 500"),
    (httpx.Response(401, json={"error": {"message": "bad key", "type": "auth"}}), 5,
     f"upstream {ROOT} answered 401"),
])
async def test_cli_says_what_happened_with_its_own_exit_code(
        tmp_path: Path, failure: httpx.Response | Exception, code: int, text: str) -> None:
    respx.get(f"{ROOT}/v1/models").mock(side_effect=[failure])
    respx.post(f"{ROOT}/api/show").mock(side_effect=[failure])
    respx.post(f"{ROOT}/v1/chat/completions").mock(side_effect=[failure, failure])
    out = io.StringIO()
    assert await run_probe_cli(["m"], [ROOT], str(tmp_path / "c.yaml"), False, out) == code
    assert out.getvalue() == f"m: unknown: {text}\n"


async def test_cli_unreachable_for_real_exits_3(tmp_path: Path) -> None:
    import socket
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{sock.getsockname()[1]}"
    out = io.StringIO()
    assert await run_probe_cli(["m"], [dead], str(tmp_path / "c.yaml"), False, out) == 3
    assert f"upstream unreachable ({dead})" in out.getvalue()


@respx.mock
async def test_cli_tries_next_upstream(tmp_path: Path) -> None:
    other = "http://vllm.test:8000"
    respx.post(f"{ROOT}/api/show").mock(return_value=not_found("m:latest"))
    respx.post(f"{ROOT}/v1/chat/completions").mock(side_effect=httpx.ConnectError("no"))
    respx.post(f"{other}/api/show").mock(return_value=httpx.Response(404, text="Not Found"))
    respx.post(f"{other}/v1/chat/completions").mock(return_value=COMPLETION)
    respx.get(f"{ROOT}/v1/models").mock(side_effect=httpx.ConnectError("no"))
    respx.get(f"{other}/v1/models").mock(return_value=LISTING_M)
    out = io.StringIO()
    path = tmp_path / "c.yaml"
    assert await run_probe_cli(["m"], [ROOT, other + "/v1"], str(path), False, out) == 0
    assert out.getvalue() == \
        "m: tools native (probe: chat request with one tool: 200); toolshim uses: native\n"
    caps, _ = parse_capabilities(path.read_text(), str(path))
    assert caps is not None and caps.learned["m:latest"].upstream == other


@respx.mock
async def test_cli_unlistable_upstream_says_why(tmp_path: Path) -> None:
    respx.get(f"{ROOT}/v1/models").mock(side_effect=httpx.ConnectError("refused"))
    out = io.StringIO()
    assert await run_probe_cli([], [ROOT], str(tmp_path / "c.yaml"), True, out) == 3
    assert out.getvalue() == f"{ROOT}: cannot list models: upstream unreachable ({ROOT})\n"


@respx.mock
@pytest.mark.parametrize("model", ["nope", "nope:latest", "M"])
async def test_cli_a_model_no_upstream_lists_exits_4_and_records_nothing(
        tmp_path: Path, model: str) -> None:
    """llama-cpp-python answers any name with its own model: the list is asked first."""
    other = "http://llama.test:8000"
    respx.get(f"{ROOT}/v1/models").mock(return_value=LISTING_M)
    respx.get(f"{other}/v1/models").mock(return_value=LISTING_M)
    chat = respx.post(f"{other}/v1/chat/completions").mock(return_value=COMPLETION)
    path = tmp_path / "c.yaml"
    out = io.StringIO()
    assert await run_probe_cli([model], [ROOT, other], str(path), False, out) == 4
    assert out.getvalue() == \
        f"{model}: not found: no upstream lists it ({ROOT}, {other}); nothing recorded\n"
    assert not chat.called and not path.exists()


@respx.mock
async def test_cli_probes_only_where_the_model_is_listed(tmp_path: Path) -> None:
    other = "http://llama.test:8000"
    respx.get(f"{ROOT}/v1/models").mock(return_value=httpx.Response(200, json={
        "object": "list", "data": [{"id": "qwen3:8b", "object": "model", "owned_by": "x"}]}))
    respx.get(f"{other}/v1/models").mock(return_value=LISTING_M)
    respx.post(f"{other}/api/show").mock(return_value=httpx.Response(404, text="Not Found"))
    respx.post(f"{other}/v1/chat/completions").mock(return_value=COMPLETION)
    out = io.StringIO()
    assert await run_probe_cli(["m"], [ROOT, other], str(tmp_path / "c.yaml"), False, out) == 0
    assert out.getvalue().startswith("m: tools native (probe: chat request with one tool")
