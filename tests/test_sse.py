"""SSE decoding: whole events only, whatever the TCP pieces look like."""

from __future__ import annotations

import orjson
from hypothesis import given
from hypothesis import strategies as st

from proxy import sse
from proxy.sse import DONE_FRAME, SseDecoder, SseEvent, encode_data


def _decode(pieces: list[bytes]) -> list[SseEvent]:
    decoder = SseDecoder()
    return [event for piece in pieces for event in decoder.feed(piece)] + decoder.flush()


def test_ollama_stream_decodes_to_events() -> None:
    body = (b'data: {"a":1}\n\n'
            b': keep-alive\n\n'
            b'event: message\ndata: {"b":2}\n\n'
            b'data: [DONE]\n\n')
    events = _decode([body])
    assert [e.data for e in events] == [b'{"a":1}', b'{"b":2}', b"[DONE]"]
    assert events[1].event == "message"
    assert events[2].is_done


def test_crlf_split_between_pieces() -> None:
    events = _decode([b"data: x\r", b"\n\r", b"\ndata: y\r\n\r\n"])
    assert [e.data for e in events] == [b"x", b"y"]


def test_multi_line_data_joins_with_newline() -> None:
    assert _decode([b"data: a\ndata: b\n\n"])[0].data == b"a\nb"


def test_unfinished_event_is_pending_not_emitted() -> None:
    decoder = SseDecoder()
    assert decoder.feed(b'data: {"cut') == []
    assert decoder.flush() == []  # an event cut before its blank line is not an event


def test_encoding_is_openai_framing() -> None:
    assert encode_data(b'{"x":1}') == b'data: {"x":1}\n\n'
    assert DONE_FRAME == b"data: [DONE]\n\n"


_payloads = st.lists(
    st.dictionaries(st.text(max_size=5), st.one_of(st.text(max_size=20), st.integers(-2**53, 2**53)),
                    max_size=3).map(orjson.dumps), min_size=1, max_size=8)


@given(payloads=_payloads, cuts=st.lists(st.integers(min_value=0, max_value=4000), max_size=20),
       newline=st.sampled_from([b"\n", b"\r\n", b"\r"]))
def test_any_split_yields_the_same_events(payloads: list[bytes], cuts: list[int],
                                          newline: bytes) -> None:
    body = b"".join(b"data: " + p + newline + newline for p in payloads)
    points = sorted({c % (len(body) + 1) for c in cuts})
    pieces = [body[a:b] for a, b in zip([0, *points], [*points, len(body)])]
    assert [e.data for e in _decode(pieces)] == payloads


_EVENT_PIECES = st.lists(st.sampled_from(
    [b"data: ", b"data:", b'{"', b'{"a":1}', b"}", b"\n", b"\n\n", b"\r\n", b"x", b"event: e\n",
     b'data: {"a":1}\n\n', b'data: {"b":"}\\n"}\n\n']), max_size=8).map(b"".join)


@given(_EVENT_PIECES)
def test_one_line_event_is_a_read_of_exactly_one_one_line_event(data: bytes) -> None:
    assert sse.one_line_event(data) == (sse.one_line_events(data) == 1)


@given(st.lists(st.binary(max_size=12).map(lambda b: b'{"' + b.replace(b"\n", b"").replace(
    b"\r", b"") + b'}'), min_size=1, max_size=5))
def test_a_read_of_one_line_events_is_counted_and_split_back(payloads: list[bytes]) -> None:
    body = b"".join(b"data: " + p + b"\n\n" for p in payloads)
    assert sse.one_line_events(body) == len(payloads)
    assert sse.event_payloads(body) == payloads
    assert sse.one_line_events(body + b"\n") == 0  # a stray line break: not such a read
