"""loadkit.testing.streamserver on a port the caller chooses, and on a free one by default."""

import http.client

import pytest

from loadkit.testing.streamserver import Stream, StreamServer, stream_server
from tests.helpers.ports import free_port

ROUTES = {("GET", "/ping"): Stream([b'{"ok": true}'], content_type="application/json", stream=False)}


def get(url: str, path: str) -> tuple[int, bytes]:
    host, port = url.split("//", 1)[1].rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=5)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def test_serves_on_the_port_given():
    port = free_port()
    with stream_server(ROUTES, port=port) as server:
        assert server.url == f"http://127.0.0.1:{port}"
        assert get(f"http://127.0.0.1:{port}", "/ping") == (200, b'{"ok": true}')


def test_port_zero_is_the_default_and_picks_a_free_one():
    with stream_server(ROUTES) as a, stream_server(ROUTES, port=0) as b:
        assert a.server_address[1] != b.server_address[1] and 0 not in (
            a.server_address[1],
            b.server_address[1],
        )
        assert get(b.url, "/ping")[0] == 200


def test_a_port_in_use_and_a_bad_port_are_named():
    with stream_server(ROUTES) as server:
        port = server.server_address[1]
        with pytest.raises(OSError, match=f"127.0.0.1:{port}"):
            StreamServer(ROUTES, port=port)
    for bad in (-1, 65536, "8000", True):
        with pytest.raises(ValueError, match="port must be an integer"):
            StreamServer(ROUTES, port=bad)
