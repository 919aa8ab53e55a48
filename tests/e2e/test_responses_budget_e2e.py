"""The Responses store is bounded in bytes (--responses-store-mb), through the openai SDK."""

from __future__ import annotations

import logging
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import openai
import pytest
from support.servers import serve

from proxy.app import create_app
from proxy.settings_sources import load_settings

TEXT = "word " * 8_000  # 40 KB of input: a stored conversation weighs about that


def _gone(client: openai.OpenAI, response_id: str) -> None:
    with pytest.raises(openai.NotFoundError) as info:
        client.responses.create(model="qwen3:8b", input="and?", previous_response_id=response_id)
    assert info.value.code == "previous_response_not_found"


def test_oldest_responses_make_room_in_bytes(make_settings: Callable[..., Any],
                                             new_sdk: Callable[..., openai.OpenAI]) -> None:
    # 0.1 MiB holds two 40 KB conversations, not three; the count bound (1000) is far off.
    with serve(create_app(make_settings(responses_store_mb=0.1))) as url:
        client = new_sdk(url)
        first, second, third = (client.responses.create(model="qwen3:8b", input=TEXT)
                                for _ in range(3))
        _gone(client, first.id)
        assert client.responses.retrieve(second.id).id == second.id
        client.responses.create(model="qwen3:8b", input="short", previous_response_id=third.id)


@pytest.mark.parametrize("stream", [False, True])
def test_a_response_larger_than_the_budget_is_not_stored(
        make_settings: Callable[..., Any], new_sdk: Callable[..., openai.OpenAI],
        caplog: pytest.LogCaptureFixture, stream: bool) -> None:
    caplog.set_level(logging.INFO, logger="toolshim")
    with serve(create_app(make_settings(responses_store_mb=0.02))) as url:
        client = new_sdk(url)
        small = client.responses.create(model="qwen3:8b", input="hi")
        if stream:
            events = list(client.responses.create(model="qwen3:8b", input=TEXT, stream=True))
            big_id = events[-1].response.id
        else:
            big_id = client.responses.create(model="qwen3:8b", input=TEXT).id
        _gone(client, big_id)
        with pytest.raises(openai.NotFoundError):
            client.responses.retrieve(big_id)
        assert client.responses.retrieve(small.id).id == small.id  # nothing was pushed out
    assert any("not stored: larger than --responses-store-mb" in r.getMessage()
               for r in caplog.records)


def test_the_budget_setting_from_flag_and_env() -> None:
    assert load_settings(None, {}).responses_store_mb == 256
    assert load_settings(None, {"TOOLSHIM_RESPONSES_STORE_MB": "8"}).responses_store_mb == 8
    done = subprocess.run([sys.executable, "-m", "proxy", "--help"], capture_output=True,
                          text=True, check=False)
    assert "--responses-store-mb" in done.stdout and "TOOLSHIM_RESPONSES_STORE_MB" in done.stdout
