"""Gemini as a backend: Google's OpenAI-compatible endpoint as an `openai` upstream with
--upstream-key-env, and the shipped `gemini-*` entry's schema rules, each shown against a
fake that answers 400 the way Google does for what its function declarations reject."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from support.fake_gemini_openai import FakeGeminiOpenAI, schema_problems
from support.servers import serve

from proxy.app import create_app
from proxy.settings import Settings

KEY = "AIza-test-upstream-key"
CITY = {"type": "string"}

RULES: dict[str, dict[str, Any]] = {
    "$schema": {"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
                "properties": {"city": CITY}},
    "additionalProperties": {"type": "object", "properties": {"city": CITY},
                             "additionalProperties": False},
    "propertyNames": {"type": "object", "properties": {"city": CITY},
                      "propertyNames": {"pattern": "^[a-z]+$"}},
    "const": {"type": "object", "properties": {"unit": {"type": "string", "const": "C"}}},
    "$ref": {"type": "object", "properties": {"place": {"$ref": "#/$defs/place"}},
             "$defs": {"place": {"type": "object", "properties": {"city": CITY}}}},
    "type array": {"type": "object", "properties": {"note": {"type": ["string", "null"]}}},
    "format": {"type": "object", "properties": {"id": {"type": "string", "format": "uuid"}}},
}


@pytest.fixture
def google(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[FakeGeminiOpenAI, str]]:
    fake = FakeGeminiOpenAI(KEY)
    monkeypatch.setenv("TEST_GEMINI_KEY", KEY)
    with serve(fake.app, lifespan="off") as url:
        yield fake, url + "/v1beta/openai"


@pytest.fixture
def client(google: tuple[FakeGeminiOpenAI, str], tmp_path: Path,
           new_sdk: Callable[..., openai.OpenAI]) -> Iterator[openai.OpenAI]:
    _, upstream = google
    settings = Settings.model_validate({
        "upstreams": (upstream,), "upstream_key_envs": ((upstream, "TEST_GEMINI_KEY"),),
        "upstream_kinds": ((upstream, "openai"),), "probe": False,
        # a missing file starts as the shipped one, with its gemini-* entry
        "capabilities": str(tmp_path / "capabilities.yaml"), "reload_interval": 0.0})
    with serve(create_app(settings)) as url:
        yield new_sdk(url)


def _ask(client: openai.OpenAI, model: str, schema: dict[str, Any]) -> Any:
    return client.chat.completions.create(model=model, messages=[
        {"role": "user", "content": "hi"}], tools=[{"type": "function", "function": {
            "name": "lookup", "parameters": schema}}])


@pytest.mark.parametrize("rule", list(RULES))
def test_each_schema_rule(client: openai.OpenAI, google: tuple[FakeGeminiOpenAI, str],
                          rule: str) -> None:
    fake, _ = google
    # The fake refuses the schema as Google does: without the gemini-* entry, a 400.
    with pytest.raises(openai.BadRequestError) as refused:
        _ask(client, "other-model", RULES[rule])
    shown = str(refused.value.body)
    assert ("Unknown name" in shown or "not repeating" in shown or "format" in shown)
    assert KEY not in shown
    # With it, the schema is rewritten into what Gemini takes, and the model answers.
    answer = _ask(client, "gemini-2.5-flash", RULES[rule])
    assert answer.choices[0].message.content == "Hello from Gemini"
    sent = fake.requests[-1]["tools"][0]["function"]["parameters"]
    assert schema_problems(sent, "p") == []


def test_openai_compatible_path_and_key(client: openai.OpenAI,
                                        google: tuple[FakeGeminiOpenAI, str]) -> None:
    fake, _ = google
    answer = client.chat.completions.create(model="gemini-2.5-flash",
                                            messages=[{"role": "user", "content": "hi"}])
    assert answer.choices[0].message.content == "Hello from Gemini"  # reached …/openai/chat/…
    assert len(fake.requests) == 1
    # listed by Google as models/gemini-2.5-flash: known to toolshim by the name clients use
    assert "gemini-2.5-flash" in {m.id for m in client.models.list()}
