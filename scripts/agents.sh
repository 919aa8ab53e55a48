#!/usr/bin/env bash
# Installs the pinned coding agents that the `agents` test tier runs (tests/agents/), from
# npm into a cache directory (default .agents/, git-ignored; TOOLSHIM_AGENTS_DIR moves it).
# Idempotent: an agent already installed at its pinned version is not fetched again.
# Without npm it does nothing (the tier then skips, saying why).
set -euo pipefail
cd "$(dirname "$0")/.."
DIR="${TOOLSHIM_AGENTS_DIR:-$PWD/.agents}"

# One pinned package per agent; the tests name the binaries they need.
AGENTS=(
    "@anthropic-ai/claude-code@2.1.197"
    "@google/gemini-cli@0.61.0"
    "opencode-ai@1.18.33"
    "@qwen-code/qwen-code@0.15.10"
    "@continuedev/cli@1.5.47"
    "@openai/codex@0.171.0"
)

if ! command -v npm >/dev/null 2>&1; then
    echo "agents.sh: npm not found, no agent installed" >&2
    exit 0
fi
mkdir -p "$DIR"
missing=()
for spec in "${AGENTS[@]}"; do
    name="${spec%@*}"
    version="${spec##*@}"
    manifest="$DIR/node_modules/$name/package.json"
    if [ -f "$manifest" ] && \
       [ "$(node -p "require(process.argv[1]).version" "$manifest")" = "$version" ]; then
        continue
    fi
    missing+=("$spec")
done
if [ "${#missing[@]}" -gt 0 ]; then
    npm install --prefix "$DIR" --no-audit --no-fund --loglevel=error "${missing[@]}"
fi
