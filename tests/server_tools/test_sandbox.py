from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path

import orjson
import pytest

from proxy.server_tools import sandbox
from proxy.server_tools.local import ToolError
from proxy.server_tools.sandbox import Sandbox


@pytest.fixture
async def box(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Sandbox]:
    monkeypatch.setattr(sandbox, "WORKER_MODULE", "support.spinning_worker")
    box = Sandbox()
    yield box
    await box.aclose()


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


async def test_a_worker_is_reused_and_a_cancelled_call_kills_it(box: Sandbox) -> None:
    first = int(await box.run("pid", {}, 5))
    assert int(await box.run("pid", {}, 5)) == first  # reused
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(box.run("echo", {"spin": True}, 5), 0.5)
    await asyncio.sleep(0.2)
    assert not _alive(first)
    assert int(await box.run("pid", {}, 5)) != first  # a fresh one
    assert await box.run("echo", {"a": 1}, 5) == '{"a":1}'


async def test_a_worker_gets_none_of_toolshims_environment(
        box: Sandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLSHIM_API_KEYS", "tsk-secret")
    environ = orjson.loads(await box.run("environ", {}, 5))
    assert "TOOLSHIM_API_KEYS" not in environ and "tsk-secret" not in str(environ)
    assert set(environ) <= {"PATH", "LC_CTYPE"}


async def test_aclose_ends_every_worker(box: Sandbox) -> None:
    pids = [int(p) for p in await asyncio.gather(box.run("pid", {}, 5), box.run("pid", {}, 5))]
    busy = asyncio.ensure_future(box.run("echo", {"spin": True}, 60))
    await asyncio.sleep(0.3)
    await box.aclose()
    assert not any(_alive(p) for p in pids)
    busy.cancel()
    await asyncio.gather(busy, return_exceptions=True)
    with pytest.raises(ToolError, match="shutting down"):
        await box.run("pid", {}, 5)


async def test_errors_come_back_as_tool_errors(box: Sandbox) -> None:
    with pytest.raises(ToolError, match="unknown builtin"):
        await box.run("nope", {}, 5)
    with pytest.raises(ToolError, match="expression"):
        await box.run("calculator", {}, 5)
    assert os.getpid() != int(await box.run("pid", {}, 5))
