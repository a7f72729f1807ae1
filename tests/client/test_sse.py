from hypothesis import given, settings
from hypothesis import strategies as st

from loadkit.client.sse import NDJSONDecoder, SSEDecoder, SSEEvent

STREAM = (
    "\ufeff: keep-alive comment\r\n"
    "event: delta\r\n"
    "id: 7\r\n"
    'data: {"text": "h\u00e9llo \U0001f600"}\r\n'
    "\r\n"
    "data: line one\n"
    "data: line two\n"
    "\n"
    "data:no-space\r"
    "\r"
    "retry: 3000\n"
    "data\n"
    "\n"
    ": ping\n\n"
    "event: ignored-no-data\n\n"
    "data: [DONE]\n\n"
).encode()

EXPECTED = [
    SSEEvent('{"text": "h\u00e9llo \U0001f600"}', "delta", "7", None),
    SSEEvent("line one\nline two", "message", "7", None),
    SSEEvent("no-space", "message", "7", None),
    SSEEvent("", "message", "7", 3000),
    SSEEvent("[DONE]", "message", "7", 3000),
]


def decode_in_pieces(data: bytes, cuts: list[int]) -> list[SSEEvent]:
    dec = SSEDecoder()
    out: list[SSEEvent] = []
    prev = 0
    for cut in sorted(set(cuts)) + [len(data)]:
        out += dec.feed(data[prev:cut])
        prev = cut
    out += dec.close()
    return out


def test_whole_stream_decodes_to_expected_events():
    assert decode_in_pieces(STREAM, []) == EXPECTED


def test_every_single_split_point_gives_same_events():
    for cut in range(len(STREAM) + 1):
        assert decode_in_pieces(STREAM, [cut]) == EXPECTED, f"split at byte {cut}"


def test_byte_by_byte():
    assert decode_in_pieces(STREAM, list(range(len(STREAM)))) == EXPECTED


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=len(STREAM)), max_size=25))
def test_any_set_of_split_points_gives_same_events(cuts):
    assert decode_in_pieces(STREAM, cuts) == EXPECTED


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.text(
            alphabet=st.characters(blacklist_characters="\r\n", blacklist_categories=["Cs"]), max_size=20
        ),
        min_size=1,
        max_size=8,
    ),
    st.sampled_from(["\n", "\r\n", "\r"]),
    st.data(),
)
def test_generated_streams_roundtrip_at_any_split(payloads, eol, data):
    raw = "".join(f"data: {p}{eol}{eol}" for p in payloads).encode()
    cuts = data.draw(st.lists(st.integers(0, len(raw)), max_size=10))
    assert [e.data for e in decode_in_pieces(raw, cuts)] == payloads


def test_cut_event_is_pending_not_dispatched():
    dec = SSEDecoder()
    assert dec.feed(b"data: partial") == []
    assert dec.pending
    assert dec.close() == []


def test_split_utf8_character_waits_for_rest():
    dec = SSEDecoder()
    raw = "data: \u20ac\n\n".encode()
    assert dec.feed(raw[:7]) == []
    assert dec.feed(raw[7:]) == [SSEEvent("\u20ac")]


def test_invalid_utf8_raises():
    import pytest

    with pytest.raises(UnicodeDecodeError):
        SSEDecoder().feed(b"data: \xff\xfe\n\n")


def test_truncated_utf8_at_close_raises():
    import pytest

    dec = SSEDecoder()
    dec.feed("data: \u20ac".encode()[:-1])
    with pytest.raises(UnicodeDecodeError):
        dec.close()


def test_ndjson_lines_any_split():
    raw = b'{"a": 1}\n{"b": "\xc3\xa9"}\r\n\n{"c": 3}'
    for cut in range(len(raw) + 1):
        dec = NDJSONDecoder()
        out = dec.feed(raw[:cut]) + dec.feed(raw[cut:]) + dec.close()
        assert [e.data for e in out] == ['{"a": 1}', '{"b": "\u00e9"}', '{"c": 3}']
