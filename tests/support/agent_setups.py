"""How each coding agent is pointed at toolshim: the one source both the agents tier
(tests/agents/) runs and docs/agents.md shows (tests/docs/test_agents_doc.py renders
these with the doc's values and finds each line there), so the docs cannot drift.

Data: argv, environment, files and toolshim flags per agent for a toolshim base URL,
a model name and a key; nothing is run here (`agent_env` writes a setup's files into
the fresh HOME a test gives it). The invocations are the ones that ran headless,
offline, on this project's CI machine with the pinned versions.
"""

from __future__ import annotations

import json
import os
import shlex
from dataclasses import dataclass, field
from pathlib import Path

PINS = {
    "claude": "@anthropic-ai/claude-code@2.1.197",
    "gemini": "@google/gemini-cli@0.61.0",
    "opencode": "opencode-ai@1.18.33",
    "qwen": "@qwen-code/qwen-code@0.15.10",
    "codex": "@openai/codex@0.171.0",
    "cn": "@continuedev/cli@1.5.47",
}
"""binary -> the npm package and version the tier installs (scripts/agents.sh)."""

PROMPT = "PROMPT"


@dataclass(frozen=True)
class AgentSetup:
    name: str
    binary: str
    argv: tuple[str, ...]
    """after the binary; PROMPT stands for the task."""
    env: dict[str, str]
    files: dict[str, str] = field(default_factory=dict)
    """path (relative to the agent's HOME, or absolute) -> content."""
    serve: tuple[str, ...] = ()
    """toolshim flags the agent needs besides its upstream and key: an alias for the
    vendor's own model names the agent asks for."""

    def command(self, prompt: str = PROMPT) -> list[str]:
        return [self.binary, *(prompt if a == PROMPT else a for a in self.argv)]

    def toolshim(self, upstream: str, key: str) -> str:
        """toolshim's command line for this agent, as docs/agents.md shows it."""
        return shlex.join(["toolshim", "--upstream", upstream, "--api-key", key, *self.serve])

    def shell(self) -> str:
        """The command line as docs/agents.md shows it (env first)."""
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in self.env.items())
        return f"{env} {shlex.join(self.command())}".strip()


def opencode(base: str, model: str, key: str) -> AgentSetup:
    config = {"$schema": "https://opencode.ai/config.json",
              "provider": {"toolshim": {"npm": "@ai-sdk/openai-compatible", "name": "toolshim",
                                        "options": {"baseURL": f"{base}/v1", "apiKey": key},
                                        "models": {model: {"name": model, "tool_call": True}}}},
              "model": f"toolshim/{model}", "small_model": f"toolshim/{model}",
              "autoupdate": False, "share": "disabled"}
    return AgentSetup("opencode", "opencode", ("run", "--model", f"toolshim/{model}", PROMPT),
                      {"OPENCODE_CONFIG_CONTENT": json.dumps(config, separators=(",", ":")),
                       "OPENCODE_DISABLE_AUTOUPDATE": "1",
                       "OPENCODE_DISABLE_MODELS_FETCH": "1"})


def qwen(base: str, model: str, key: str) -> AgentSetup:
    return AgentSetup("Qwen Code", "qwen",
                      ("--auth-type", "openai", "-m", model, "-p", PROMPT, "--yolo"),
                      {"OPENAI_BASE_URL": f"{base}/v1", "OPENAI_API_KEY": key,
                       "OPENAI_MODEL": model})


def codex_catalog(model: str, context: int = 32768) -> str:
    """Model metadata for a model Codex does not know. Without it Codex warns, and (0.171)
    never offers its apply_patch tool: `apply_patch_tool_type: freeform` brings it back,
    as a `custom` tool (docs/responses.md)."""
    entry = {"slug": model, "display_name": model, "description": "a local model via toolshim",
             "default_reasoning_level": None, "supported_reasoning_levels": [],
             "shell_type": "shell_command", "visibility": "list", "supported_in_api": True,
             "priority": 1, "additional_speed_tiers": [], "service_tiers": [],
             "availability_nux": None, "upgrade": None,
             "base_instructions": "You are a coding agent. Use your tools to read and change "
                                  "files.",
             "supports_reasoning_summaries": False, "default_reasoning_summary": "none",
             "support_verbosity": False, "default_verbosity": None,
             "apply_patch_tool_type": "freeform", "web_search_tool_type": "text",
             "truncation_policy": {"mode": "tokens", "limit": 10000},
             "supports_parallel_tool_calls": False, "supports_image_detail_original": False,
             "context_window": context, "max_context_window": context,
             "effective_context_window_percent": 95, "experimental_supported_tools": [],
             "input_modalities": ["text"]}
    return json.dumps({"models": [entry]}, indent=1)


def codex(base: str, model: str, key: str, home: str = "~") -> AgentSetup:
    catalog = f"{home}/.codex/toolshim-models.json"
    provider = (f'{{name="toolshim",base_url="{base}/v1",wire_api="responses",'
                'env_key="TOOLSHIM_API_KEY"}')
    return AgentSetup("Codex", "codex", (
        "exec", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox",
        "-c", "model_provider=toolshim", "-c", f"model_providers.toolshim={provider}",
        "-c", "check_for_update_on_startup=false", "-c", f'model_catalog_json="{catalog}"',
        "-m", model, PROMPT), {"TOOLSHIM_API_KEY": key},
        {".codex/toolshim-models.json": codex_catalog(model)})


def continue_cli(base: str, model: str, key: str, home: str = "~") -> AgentSetup:
    config = (f"name: toolshim\nversion: 1.0.0\nschema: v1\nmodels:\n"
              f"  - name: {model}\n    provider: openai\n    model: {model}\n"
              f"    apiBase: {base}/v1\n    apiKey: {key}\n"
              f"    roles: [chat, edit, apply]\n    capabilities: [tool_use]\n"
              f"    useResponsesApi: false\n")
    return AgentSetup("Continue", "cn",
                      ("-p", PROMPT, "--config", f"{home}/.continue/toolshim.yaml", "--auto"),
                      {"CONTINUE_TELEMETRY_ENABLED": "0"},
                      {".continue/toolshim.yaml": config})


def claude_code(base: str, model: str, key: str) -> AgentSetup:
    """Claude Code speaks the Messages door (no /v1 in its base URL) and asks for its own
    model names (sonnet, haiku for background work, opus): an alias maps them all.
    IS_SANDBOX lets bypassPermissions run as root (a container, CI)."""
    return AgentSetup("Claude Code", "claude",
                      ("-p", PROMPT, "--permission-mode", "bypassPermissions"),
                      {"IS_SANDBOX": "1", "ANTHROPIC_BASE_URL": base, "ANTHROPIC_API_KEY": key,
                       "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
                       "DISABLE_AUTOUPDATER": "1", "DISABLE_TELEMETRY": "1",
                       "DISABLE_ERROR_REPORTING": "1"},
                      serve=("--alias", f"claude-*={model}"))


GEMINI_SETTINGS = {"security": {"auth": {"selectedType": "gemini-api-key"}},
                   "privacy": {"usageStatisticsEnabled": False},
                   "general": {"enableAutoUpdate": False,
                               "enableAutoUpdateNotification": False}}
"""Without `selectedType` Gemini CLI stops with "Invalid auth method selected"."""


def gemini_cli(base: str, model: str, key: str) -> AgentSetup:
    """Gemini CLI speaks the Gemini door; its helper calls (routing, compression, loop
    detection) ask for Gemini model names, which an alias maps."""
    return AgentSetup("Gemini CLI", "gemini",
                      ("-p", PROMPT, "-m", model, "--approval-mode", "yolo"),
                      {"GOOGLE_GEMINI_BASE_URL": base, "GEMINI_API_KEY": key,
                       "GEMINI_CLI_TRUST_WORKSPACE": "true"},
                      {".gemini/settings.json": json.dumps(GEMINI_SETTINGS, indent=1)},
                      serve=("--alias", f"gemini-*={model}"))


def agent_env(setup: AgentSetup, home: Path) -> dict[str, str]:
    """The environment the agent runs in, from a fresh HOME holding the setup's files."""
    for relative, content in setup.files.items():
        (home / relative).parent.mkdir(parents=True, exist_ok=True)
        (home / relative).write_text(content)
    keep = {k: os.environ[k] for k in ("PATH", "LANG", "TERM") if k in os.environ}
    return {**keep, "HOME": str(home), **setup.env}


def alias_of(setup: AgentSetup) -> str:
    """The model-name glob the setup's `--alias` maps (the scripted toolshim maps it)."""
    return setup.serve[setup.serve.index("--alias") + 1].split("=")[0]


def all_setups(base: str, model: str, key: str, home: str = "~") -> list[AgentSetup]:
    return [claude_code(base, model, key), gemini_cli(base, model, key),
            opencode(base, model, key), qwen(base, model, key),
            codex(base, model, key, home), continue_cli(base, model, key, home)]
