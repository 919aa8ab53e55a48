"""Tool definitions in the shapes real coding agents send (opencode 1.18, Qwen Code 0.15,
Codex 0.171, Continue 1.5): JSON Schema 2020-12 `$schema`, zod's safe-integer bounds,
`additionalProperties: {}`, `$ref`/`$defs`, nullable unions, very long descriptions, and
15-40 tools per request. Built here (not captured whole) so each trait is named."""

from __future__ import annotations

from typing import Any

from proxy.api.responses.tools import chat_tool

SAFE = 9007199254740991  # Number.MAX_SAFE_INTEGER: zod's bounds for z.number().int()
LONG = ("Executes a given bash command in a persistent shell session with optional "
        "timeout, ensuring proper handling and security measures. " * 120)


def _fn(name: str, description: str, parameters: dict[str, Any]) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "description": description,
                                             "parameters": parameters}}


def _obj(props: dict[str, Any], required: list[str], **extra: Any) -> dict[str, Any]:
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
            "properties": props, "required": required, **extra}


def opencode_tools() -> list[dict[str, Any]]:
    int_bound = {"type": "integer", "minimum": -SAFE, "exclusiveMinimum": 0, "maximum": SAFE}
    return [
        _fn("bash", LONG, _obj({"command": {"type": "string"}, "timeout": {
            **int_bound, "description": "Optional timeout in milliseconds"},
            "workdir": {"type": "string"}, "description": {"type": "string"}},
            ["command", "description"], additionalProperties=False)),
        _fn("read", "Reads a file.", _obj({"filePath": {"type": "string"},
                                           "offset": int_bound, "limit": int_bound},
                                          ["filePath"], additionalProperties=False)),
        _fn("write", "Writes a file.", _obj({"content": {"type": "string"},
                                             "filePath": {"type": "string"}},
                                            ["content", "filePath"])),
        _fn("edit", "Edits a file.", _obj({"filePath": {"type": "string"},
                                           "oldString": {"type": "string"},
                                           "newString": {"type": "string"},
                                           "replaceAll": {"type": "boolean"}},
                                          ["filePath", "oldString", "newString"])),
        _fn("glob", "Finds files.", _obj({"pattern": {"type": "string"},
                                          "path": {"type": "string"}}, ["pattern"])),
        _fn("grep", "Searches files.", _obj({"pattern": {"type": "string"},
                                             "path": {"type": "string"},
                                             "include": {"type": "string"}}, ["pattern"])),
        _fn("task", "Runs a subagent.", _obj({"description": {"type": "string"},
                                              "prompt": {"type": "string"},
                                              "subagent_type": {"type": "string"}},
                                             ["description", "prompt", "subagent_type"])),
        _fn("todowrite", "Writes the todo list.", _obj({"todos": {"type": "array", "items": {
            "$ref": "#/$defs/todo"}}}, ["todos"], **{"$defs": {"todo": {
                "type": "object", "additionalProperties": {},
                "properties": {"content": {"type": "string"}, "status": {
                    "type": "string", "enum": ["pending", "in_progress", "completed"]}},
                "required": ["content", "status"]}}})),
        _fn("webfetch", "Fetches a URL.", _obj({"url": {"type": "string", "format": "uri"},
                                                "format": {"anyOf": [
                                                    {"type": "string"}, {"type": "null"}]},
                                                "timeout": {"type": ["number", "null"]}},
                                               ["url"])),
        _fn("skill", "Loads a skill.", _obj({"name": {"type": "string"}}, ["name"],
                                            additionalProperties={})),
    ]


def qwen_code_tools() -> list[dict[str, Any]]:
    names = ["tool_search", "agent", "task_stop", "send_message", "skill", "list_directory",
             "read_file", "grep_search", "glob", "edit", "write_file", "run_shell_command",
             "todo_write", "web_fetch", "monitor"]
    tools = [_fn(n, f"The {n} tool. " * 40, {"type": "object", "properties": {
        "absolute_path": {"type": "string"}, "limit": {"type": "number", "minimum": 1}},
        "required": ["absolute_path"]}) for n in names]
    tools[10] = _fn("write_file", "Writes content to a file.", {
        "type": "object", "properties": {"file_path": {"type": "string"},
                                         "content": {"type": "string"}},
        "required": ["file_path", "content"]})
    return tools


def codex_tools() -> list[dict[str, Any]]:
    tools = [_fn("exec_command", "Runs a command in a PTY.", {
        "type": "object", "additionalProperties": False, "required": ["cmd"],
        "properties": {"cmd": {"type": "string"}, "workdir": {"type": "string"},
                       "yield_time_ms": {"type": "number"},
                       "max_output_tokens": {"type": "number"},
                       "sandbox_permissions": {"type": "string",
                                               "enum": ["use_default", "require_escalated"]},
                       "justification": {"type": "string"},
                       "prefix_rule": {"type": "array", "items": {"type": "string"}}}})]
    tools += [_fn(n, f"Codex tool {n}.", {"type": "object", "properties": {},
                                           "additionalProperties": False})
              for n in ("write_stdin", "request_user_input", "view_image", "get_goal",
                        "create_goal", "update_goal")]
    grammar = 'start: begin_patch hunk+ end_patch\nbegin_patch: "*** Begin Patch" LF\n' * 30
    tools.append(chat_tool({"type": "custom", "name": "apply_patch", "description": LONG,
                            "format": {"type": "grammar", "syntax": "lark",
                                       "definition": grammar}}))
    return tools


def continue_tools() -> list[dict[str, Any]]:
    return [_fn(n, f"Continue's {n}.", {"type": "object", "required": ["filepath"],
                                        "properties": {"filepath": {"type": "string"},
                                                       "content": {"type": "string"}}})
            for n in ("Read", "Write", "Edit", "MultiEdit", "List", "Search", "Bash",
                      "Fetch", "Checklist", "Exit", "Status", "Diff")]


def every_agent_tool() -> list[dict[str, Any]]:
    """37 tools: more than an agent sends at once, with every trait above."""
    return opencode_tools() + qwen_code_tools() + codex_tools() + continue_tools()[:4]
