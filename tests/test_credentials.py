"""The key a client sent, in every door's form: what is masked and what keys a client's
stored things."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from proxy.credentials import client_keys, owner_digest
from proxy.observability.redact import MASK, Redactor

KEY = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E, exclude_characters="&#+%"),
              min_size=8, max_size=40)


def test_every_door_form_is_a_key_without_its_scheme() -> None:
    headers = {"authorization": "Bearer sk-client-1234", "x-api-key": " sk-x-5678 ",
               "x-goog-api-key": "AIza-goog-9012"}
    assert client_keys(headers, "alt=sse&key=AIza-query-3456") == [
        "sk-client-1234", "sk-x-5678", "AIza-goog-9012", "AIza-query-3456"]
    assert client_keys({"authorization": "tokenwithoutscheme"}) == ["tokenwithoutscheme"]
    assert client_keys({}, "alt=sse") == []


@given(KEY, KEY)
def test_two_clients_are_two_owners_whatever_form_their_keys_take(a: str, b: str) -> None:
    forms = [({"authorization": f"Bearer {a}"}, ""), ({"x-api-key": a}, ""),
             ({"x-goog-api-key": a}, ""), ({}, f"key={a}")]
    owners = {owner_digest(headers, query) for headers, query in forms}
    assert len(owners) == 1  # one key is one client, whichever door it came through
    owner = owners.pop()
    assert a not in owner  # a digest: the key is never kept
    if a.strip() != b.strip():
        assert owner_digest({"x-api-key": b}) != owner


def test_a_request_without_a_key_is_nobody() -> None:
    assert owner_digest({}) == "" == owner_digest({"authorization": "   "}, "key=")


def test_a_gemini_key_sent_as_a_query_parameter_is_masked() -> None:
    # an upstream's error text that quotes the key the client sent on ?key=
    redactor = Redactor(["sk-operator-0001"]).for_request({}, "key=AIza-query-secret-77")
    assert redactor.mask("bad key AIza-query-secret-77") == f"bad key {MASK}"
    goog = Redactor().for_request({"x-goog-api-key": "AIza-header-secret-88"})
    assert goog.mask("AIza-header-secret-88") == MASK
