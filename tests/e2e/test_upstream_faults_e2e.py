"""Upstream faults map to the right status: a reset is a 502, only a timeout is a 504."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Literal

import openai
import pytest
from support.resetting import resetting_upstream
from support.servers import serve

from proxy.app import create_app
from proxy.settings import Settings


@pytest.mark.parametrize("when", ["before", "during"])
def test_a_reset_during_a_non_streamed_answer_is_a_502(
        when: Literal["before", "during"], caps_path: Path,
        new_sdk: Callable[..., openai.OpenAI]) -> None:
    with resetting_upstream(when) as upstream:
        settings = Settings(upstreams=(upstream,), capabilities=str(caps_path), probe=False,
                            reload_interval=0.0)
        with serve(create_app(settings)) as proxy:
            client = new_sdk(proxy)
            with pytest.raises(openai.APIStatusError) as failure:
                client.chat.completions.create(
                    model="qwen3:8b", messages=[{"role": "user", "content": "hi"}])
    assert failure.value.status_code == 502
    body = failure.value.body
    assert isinstance(body, dict)
    assert body["code"] == "upstream_unavailable" and body["type"] == "api_error"
