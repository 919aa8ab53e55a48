"""Codex's own Responses tools (`custom`, `local_shell`) <-> chat function tools. Pure.

Codex CLI offers its `apply_patch` as a `custom` (freeform) tool whose input is
raw text following a Lark grammar, and some models get a `local_shell` tool;
a chat backend knows only function tools. Each becomes a function tool the
model can call (one string `input`; a `command` array), and the model's call
goes back to the client as the item the client offered the tool as
(`custom_tool_call` with the raw `input`, `local_shell_call` with an `exec`
action), so Codex runs it as if the model had spoken Responses natively.
Item shapes follow codex-rs/protocol/src/models.rs (`ResponseItem::CustomToolCall`,
`LocalShellCall`, `LocalShellExecAction`) and the openai SDK's response types.
"""

from __future__ import annotations

from typing import Any

import orjson

from proxy.types import JSON, ToolDef

CUSTOM = "custom"
LOCAL_SHELL = "local_shell"

GRAMMAR_BUDGET = 6000
"""characters of a custom tool's grammar carried in its description: Codex's
apply_patch grammar is about 1 KB, and a huge grammar must not eat a small window."""

_LOCAL_SHELL_SCHEMA: JSON = {
    "type": "object",
    "properties": {
        "command": {"type": "array", "items": {"type": "string"}, "minItems": 1,
                    "description": "the program and its arguments, e.g. "
                                   "[\"bash\", \"-lc\", \"ls -la\"]"},
        "workdir": {"type": "string", "description": "directory to run it in"},
        "timeout_ms": {"type": "integer", "minimum": 1},
    },
    "required": ["command"],
}
_LOCAL_SHELL_TEXT = ("Run a command on the user's machine and get its output. `command` is "
                     "the argument vector (no shell unless you call one).")
_INPUT_ONLY: JSON = {"type": "object", "properties": {"input": {"type": "string"}},
                     "required": ["input"]}


def name_of(tool: JSON) -> str | None:
    """The name a tool is called by: `local_shell` has none of its own."""
    if tool.get("type") == LOCAL_SHELL:
        return LOCAL_SHELL
    name = tool.get("name")
    return name if isinstance(name, str) else None


def kinds(tools: list[JSON]) -> dict[str, str]:
    """Tool name -> `custom` / `local_shell`, for the names whose calls are not function calls."""
    return {name: tool["type"] for tool in tools
            if tool.get("type") in (CUSTOM, LOCAL_SHELL) and (name := name_of(tool))}


def chat_tool(tool: JSON) -> ToolDef:
    """A kept Responses tool (function, custom or local_shell) as a chat function tool."""
    kind = tool.get("type")
    if kind == LOCAL_SHELL:
        return {"type": "function", "function": {
            "name": LOCAL_SHELL, "description": _LOCAL_SHELL_TEXT,
            "parameters": _LOCAL_SHELL_SCHEMA}}
    function: JSON = {"name": tool["name"]}
    if kind == CUSTOM:
        function["description"] = custom_description(tool)
        function["parameters"] = _INPUT_ONLY
        return {"type": "function", "function": function}
    for key in ("description", "parameters", "strict"):
        if tool.get(key) is not None:
            function[key] = tool[key]
    return {"type": "function", "function": function}


def custom_description(tool: JSON, budget: int = GRAMMAR_BUDGET) -> str:
    """The tool's own description, then what its one `input` string must look like."""
    own = tool.get("description")
    head = f"{own}\n\n" if isinstance(own, str) and own else ""
    fmt = tool.get("format")
    if not isinstance(fmt, dict) or fmt.get("type") != "grammar":
        return head + "Call it with one argument, `input`: free-form text, given as is."
    syntax = fmt.get("syntax") if isinstance(fmt.get("syntax"), str) else "lark"
    definition = fmt.get("definition")
    shown = definition if isinstance(definition, str) else ""
    if len(shown) > budget:
        cut = shown.rfind("\n", 0, budget)
        cut = cut if cut > 0 else budget
        shown = (f"{shown[:cut]}\n... ({len(shown) - cut} more characters of the grammar "
                 "left out)")
    return (f"{head}Call it with one argument, `input`: the raw text itself (not JSON, not "
            f"quoted, no code fence), which must follow this {syntax} grammar:\n{shown}")


def custom_tool_problem(tool: JSON) -> tuple[str, str] | None:
    """(field, reason) when a `custom` tool is malformed, else None."""
    name = tool.get("name")
    if not isinstance(name, str) or not name:
        return "name", "a custom tool needs a name"
    fmt = tool.get("format")
    if fmt is not None and not (isinstance(fmt, dict) and fmt.get("type") in ("text", "grammar")):
        return "format", 'must be {"type": "text"} or a grammar'
    if isinstance(fmt, dict) and fmt.get("type") == "grammar" and not isinstance(
            fmt.get("definition"), str):
        return "format.definition", "a grammar needs its definition as a string"
    return None


# --- calls: chat arguments <-> the client's items -------------------------------


def item_fields(kind: str, arguments: str) -> JSON:
    """The fields a checked call's JSON arguments give its `custom_tool_call` /
    `local_shell_call` item. The flow checked them against `chat_tool`'s schema,
    so a shape it let through (repair, `keep`) is read leniently, never raised on."""
    try:
        args: Any = orjson.loads(arguments) if arguments else {}
    except orjson.JSONDecodeError:
        args = arguments  # only `invalid_tool_calls: keep` lets such a call through
    if kind == CUSTOM:
        if isinstance(args, dict) and isinstance(args.get("input"), str):
            return {"input": args["input"]}
        return {"input": args if isinstance(args, str) else arguments}
    args = args if isinstance(args, dict) else {}
    command = args.get("command")
    action: JSON = {"type": "exec",
                    "command": [str(c) for c in command] if isinstance(command, list) else [],
                    "env": {}, "timeout_ms": None, "working_directory": None, "user": None}
    if isinstance(args.get("workdir"), str):
        action["working_directory"] = args["workdir"]
    if isinstance(args.get("timeout_ms"), int):
        action["timeout_ms"] = args["timeout_ms"]
    return {"action": action}


def chat_arguments(item: JSON) -> str:
    """A `custom_tool_call` / `local_shell_call` item's call as chat JSON arguments."""
    if item.get("type") == "custom_tool_call":
        return orjson.dumps({"input": item.get("input", "")}).decode()
    action: JSON = item["action"] if isinstance(item.get("action"), dict) else {}
    args: JSON = {"command": action.get("command") or []}
    if isinstance(action.get("working_directory"), str):
        args["workdir"] = action["working_directory"]
    if isinstance(action.get("timeout_ms"), int):
        args["timeout_ms"] = action["timeout_ms"]
    return orjson.dumps(args).decode()
