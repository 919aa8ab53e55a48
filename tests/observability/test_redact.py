"""The masking rule shared by logs, client answers and the console."""

from __future__ import annotations

import orjson

from proxy.observability.redact import MASK, Redactor


def test_longest_secret_first_and_short_strings_never_masked() -> None:
    redactor = Redactor(["sk-abcdef12", "sk-abcdef12-longer", "short"])
    assert redactor.mask("sk-abcdef12-longer sk-abcdef12 short") == f"{MASK} {MASK} short"


def test_bytes_are_masked_also_where_json_escaped_them() -> None:
    secret = 'pa"ss\\word-123'
    raw = orjson.dumps({"message": f"got {secret}"})
    assert secret.encode() not in raw  # JSON wrote it escaped
    masked = Redactor([secret]).mask_bytes(raw)
    assert orjson.loads(masked) == {"message": f"got {MASK}"}


def test_unmatched_bytes_come_back_as_they_were() -> None:
    raw = b"\xff not utf-8, no secret"
    assert Redactor(["sk-abcdef12"]).mask_bytes(raw) is raw


def test_with_secrets_adds_only_what_is_new() -> None:
    base = Redactor(["sk-abcdef12"])
    assert base.with_secrets(["sk-abcdef12", "tiny"]) is base
    assert base.with_secrets(["sk-other-9999"]).mask("sk-other-9999") == MASK
