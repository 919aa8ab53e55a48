"""A scripted model that plays a competent coding model from what is in the request alone.

It drives a real agent through one task, "read file A and write what it says to
file B": it reads the tools the agent offers and the conversation so far, calls
the agent's own read tool, then its write tool (arguments built from each tool's
JSON schema), and answers in text once the write's result came back. Nothing is
queued ahead: each answer is decided from the request, so any agent that offers
a read and a write tool can be driven. It sits behind `FakeOllama.script`, so the
wire format is the fake Ollama's /v1 (whole tool calls, Ollama's framing).

The task it understands: the last user text names two absolute paths, the file to
read first and the file to write second; what it writes is the first line it read,
upper-cased (so the test can tell it was really read).
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from support.fake_ollama import Reply, tool_call

_PATH = re.compile(r"(/[\w./-]+\.txt)\b")
# Read tools number their lines: Claude Code `     1→text`, others `1\ttext` or `1: text`.
_NUMBERED = re.compile(r"^\s*\d+(?:→|\t|: |\|)")
_PATH_KEYS = ("file_path", "absolute_path", "path", "filePath", "filename", "file")
_TEXT_KEYS = ("content", "contents", "text", "new_string", "newString")


def play(body: dict[str, Any]) -> Reply:
    """The next answer to `body`, an OpenAI chat request."""
    tools = {t["function"]["name"]: t["function"] for t in body.get("tools") or []
             if isinstance(t, dict) and isinstance(t.get("function"), dict)}
    task = _task(body.get("messages") or [])
    if not tools or task is None:
        return Reply(content=["OK."])  # an agent's side request (titles, summaries)
    source, target = task
    results = _tool_results(body["messages"])
    reader, writer = _find(tools, "read"), _find(tools, "write") or _find(tools, "edit")
    if reader is None or writer is None:
        return Reply(content=["I have no tool to read or write files."])
    if not results:
        return Reply(content=["I will read the file first."], tool_calls=[
            tool_call(reader["name"], _arguments(reader, source, ""), "call_read0001")])
    if len(results) == 1:
        first_line = _first_line(results[0])
        return Reply(tool_calls=[tool_call(
            writer["name"], _arguments(writer, target, first_line.upper() + "\n"),
            "call_write001")])
    return Reply(content=[f"Done: {target} holds the first line of {source}, upper-cased."])


def _task(messages: list[dict[str, Any]]) -> tuple[str, str] | None:
    for message in reversed(messages):
        if message.get("role") != "user":
            continue
        paths = _PATH.findall(_text(message.get("content")))
        if len(paths) >= 2:
            return paths[0], paths[1]
    return None


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def _tool_results(messages: list[dict[str, Any]]) -> list[str]:
    """What the tools answered in this task, oldest first."""
    return [_text(m.get("content")) for m in messages if m.get("role") == "tool"]


def _find(tools: dict[str, dict[str, Any]], verb: str) -> dict[str, Any] | None:
    """The tool whose name says `verb` and whose schema takes a path."""
    for name, function in tools.items():
        props = (function.get("parameters") or {}).get("properties") or {}
        if verb in name.lower() and any(k in props for k in _PATH_KEYS):
            return function
    return None


def _arguments(function: dict[str, Any], path: str, text: str) -> dict[str, Any]:
    """Arguments that fit the tool's schema: the path and text where its properties take
    them, the other required properties with a plain value of their type."""
    schema = function.get("parameters") or {}
    props: dict[str, Any] = schema.get("properties") or {}
    out: dict[str, Any] = {}
    for key in props:
        if key in _PATH_KEYS:
            out[key] = path
        elif key in _TEXT_KEYS:
            out[key] = text
    for key in schema.get("required") or []:
        if key not in out:
            out[key] = {"string": "", "integer": 0, "number": 0, "boolean": False,
                        "array": [], "object": {}}.get(props.get(key, {}).get("type"), "")
    return out


def _first_line(result: str) -> str:
    for line in result.splitlines():
        text = _NUMBERED.sub("", line, count=1).strip()
        if text and not text.startswith("<"):
            return text
    return ""


def play_as_text(body: dict[str, Any]) -> Reply:
    """`play`, but the calls written as text in the hermes format (`<tool_call>{...}`), as
    many local models do: toolshim must recover them into real calls."""
    reply = play(body)
    if not reply.tool_calls:
        return reply
    calls = "".join(
        "<tool_call>\n" + orjson.dumps({"name": c["function"]["name"], "arguments":
                                        orjson.loads(c["function"]["arguments"])}).decode()
        + "\n</tool_call>" for c in reply.tool_calls)
    text = "".join(reply.content) + "\n" + calls
    return Reply(content=[text[i:i + 16] for i in range(0, len(text), 16)])
