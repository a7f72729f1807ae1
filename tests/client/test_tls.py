"""The stream timer over TLS: the simulator's streams through a real TLS stack (its own
``--tls-cert``), certificates from a throwaway CA (trustme). Verified, untrusted, wrong host,
mTLS, ``--insecure``, handshake failures; timing against the server's own write times; set-up
figures apart from TTFT. Runs again under gevent's monkey patching (the Locust path)."""

from __future__ import annotations

import socket
import ssl
import warnings

import pytest

from loadkit import types as t
from loadkit.client.httpstream import ConnectionPool, Endpoint
from loadkit.client.timer import Timeouts, run_request
from loadkit.engines.base import AdapterOptions
from loadkit.engines.openai import OpenAIAdapter
from loadkit.records import connect_ms, tls_ms, ttft_ms, ttft_with_connect_ms
from loadkit.sim.testing import sim_process
from tests.helpers.certs import TlsFiles, make_tls_files
from tests.helpers.openai_chunks import DONE, ROLE, USAGE, delta
from tests.helpers.scripted_server import END_CHUNK, Script, ScriptedServer, ScriptedServerProcess

REQ = t.GenerationRequest(prompt="hello", max_tokens=12, extra_body={"ignore_eos": True})


def adapter() -> OpenAIAdapter:
    return OpenAIAdapter(AdapterOptions(model="sim", api="completions"))


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    return make_tls_files(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def tls_sim(tls_files: TlsFiles):
    with sim_process("--profile", "fast", "--tls-cert", tls_files.server) as sim:
        yield sim


@pytest.fixture(scope="module")
def mtls_sim(tls_files: TlsFiles):
    with sim_process(
        "--profile", "fast", "--tls-cert", tls_files.server, "--tls-client-ca", tls_files.ca
    ) as sim:
        yield sim


def run(url: str, ctx: ssl.SSLContext, **kwargs):
    """One completions request to the simulator."""
    return run_request(adapter(), Endpoint.parse(url, ctx), REQ, **kwargs)


def run_scripted(url: str, ctx: ssl.SSLContext, **kwargs):
    return run_request(OpenAIAdapter(), Endpoint.parse(url, ctx), REQ, **kwargs)


def test_verified_stream_matches_the_servers_truth(tls_sim, tls_files):
    assert tls_sim.url.startswith("https://127.0.0.1:")
    rec = run(tls_sim.url, tls_files.client_context(), request_id="tls-verified")
    assert rec.outcome == t.OK, rec.error
    assert rec.n_out == 12 and rec.n_out_source == "usage" and rec.text
    truth = {r["request_id"]: r for r in tls_sim.wait_truth(1)}["tls-verified"]
    assert len(truth["t_token_ns"]) == len(rec.event_t_ns)
    for seen, sent in zip(rec.event_t_ns, truth["t_token_ns"], strict=True):
        # Same monotonic clock: each decrypted event after the server wrote it, within a few ms.
        assert 0 <= seen - sent < 5_000_000
    assert connect_ms(rec) is not None and tls_ms(rec) is not None and tls_ms(rec) > 0
    assert rec.t_connect_ns <= rec.t_connected_ns <= rec.t_tls_ns <= rec.t_send_ns
    line = rec.to_json()
    assert line["new_connection"] is True and line["tls_ms"] == tls_ms(rec)
    assert line["t_start_ns"] == rec.t_start_ns <= line["t_send_ns"]


def test_reused_tls_connection_has_no_setup_figures(tls_sim, tls_files):
    pool = ConnectionPool()
    ctx = tls_files.client_context()
    recs = [run(tls_sim.url, ctx, pool=pool) for _ in range(3)]
    pool.close()
    assert [r.outcome for r in recs] == [t.OK] * 3, [r.error for r in recs]
    assert recs[0].to_json()["new_connection"] and tls_ms(recs[0]) is not None
    for r in recs[1:]:
        assert r.to_json()["new_connection"] is False
        assert connect_ms(r) is None and tls_ms(r) is None  # not measured, never 0
        assert ttft_with_connect_ms(r) == pytest.approx(ttft_ms(r), abs=0.5)


def test_untrusted_ca_is_tls_error_with_the_reason(tls_sim, tls_files):
    rec = run(tls_sim.url, tls_files.client_context(ca_bundle=tls_files.other_ca))
    assert rec.outcome == t.TLS_ERROR
    assert rec.error.startswith("certificate not trusted") and "--ca-bundle" in rec.error
    assert rec.http_status is None and rec.event_t_ns == []


def test_wrong_hostname_is_tls_error(tls_files):
    server = tls_files.server_context(tls_files.wrong_host)
    with ScriptedServer(
        lambda _r: Script(writes=[(0, delta("a")), (0, DONE), (0, END_CHUNK)]), server
    ) as srv:
        rec = run_scripted(srv.url, tls_files.client_context())
    assert rec.outcome == t.TLS_ERROR
    assert rec.error.startswith("hostname mismatch") and "127.0.0.1" in rec.error


def test_insecure_accepts_untrusted_and_wrong_host(tls_sim, tls_files):
    insecure = tls_files.client_context(ca_bundle=tls_files.other_ca, insecure=True)
    assert run(tls_sim.url, insecure).outcome == t.OK
    server = tls_files.server_context(tls_files.wrong_host)
    with ScriptedServer(
        lambda _r: Script(writes=[(0, delta("a")), (0, DONE), (0, END_CHUNK)]), server
    ) as srv:
        rec = run_scripted(srv.url, insecure)
    assert rec.outcome == t.OK, rec.error


def test_mtls_required_without_client_cert_is_tls_error(mtls_sim, tls_files):
    rec = run(mtls_sim.url, tls_files.client_context())
    assert rec.outcome == t.TLS_ERROR, rec.error
    assert "client certificate" in rec.error and "--client-cert" in rec.error


def test_mtls_with_client_cert_streams(mtls_sim, tls_files):
    ctx = tls_files.client_context(client_cert=tls_files.client_cert, client_key=tls_files.client_key)
    rec = run(mtls_sim.url, ctx)
    assert rec.outcome == t.OK, rec.error
    assert rec.n_out == 12


def test_mtls_with_a_certificate_the_server_does_not_trust(mtls_sim, tls_files):
    rec = run(mtls_sim.url, tls_files.client_context(client_cert=tls_files.untrusted_client))
    assert rec.outcome == t.TLS_ERROR, rec.error
    assert "client certificate" in rec.error


def test_mtls_refusal_during_a_tls12_handshake_names_the_client_certificate(tls_files):
    """TLS 1.2 servers refuse inside the handshake (an alert the client reads)."""
    server = tls_files.server_context(client_ca=tls_files.ca)
    server.maximum_version = ssl.TLSVersion.TLSv1_2
    with ScriptedServer(
        lambda _r: Script(writes=[(0, delta("a")), (0, DONE), (0, END_CHUNK)]), server
    ) as srv:
        rec = run_scripted(srv.url, tls_files.client_context())
    assert rec.outcome == t.TLS_ERROR
    assert rec.error.startswith("handshake failure") and "--client-cert" in rec.error


def test_no_common_protocol_version_is_tls_error(tls_files):
    server = tls_files.server_context()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        server.minimum_version = ssl.TLSVersion.TLSv1
        server.maximum_version = ssl.TLSVersion.TLSv1_1  # loadkit's client asks for 1.2 at least
    server.set_ciphers("DEFAULT:@SECLEVEL=0")
    with ScriptedServer(lambda _r: Script(), server) as srv:
        rec = run_scripted(srv.url, tls_files.client_context())
    assert rec.outcome == t.TLS_ERROR
    assert rec.error.startswith("protocol version")


def test_plain_http_server_behind_https_url(tls_files):
    """A plain HTTP server answers the ClientHello with a 400, as real ones do."""
    import threading

    plain = socket.socket()
    plain.bind(("127.0.0.1", 0))
    plain.listen(4)

    def answer() -> None:
        conn, _ = plain.accept()
        with conn:
            conn.recv(4096)
            conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")

    threading.Thread(target=answer, daemon=True).start()
    try:
        rec = run_scripted(f"https://127.0.0.1:{plain.getsockname()[1]}", tls_files.client_context())
    finally:
        plain.close()
    assert rec.outcome == t.TLS_ERROR
    assert "did not answer in TLS" in rec.error and "http://" in rec.error


def test_handshake_timeout_is_tls_error_within_the_limit(tls_files):
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(4)  # connects complete (backlog); nobody ever answers the ClientHello
    try:
        url = f"https://127.0.0.1:{silent.getsockname()[1]}"
        rec = run_scripted(url, tls_files.client_context(), timeouts=Timeouts(handshake_s=0.3))
    finally:
        silent.close()
    assert rec.outcome == t.TLS_ERROR
    assert rec.error.startswith("handshake timeout") and "0.3 s" in rec.error
    assert 250 <= (rec.t_end_ns - rec.t_start_ns) / 1e6 < 2000


def test_ttft_starts_at_the_write_not_before_the_handshake(tls_files):
    """The server waits 0.3 s before its handshake: that is tls_ms and TTFT-with-connect, not TTFT."""
    writes = [(0.0, ROLE), (0.02, delta("a")), (0, USAGE), (0, DONE), (0, END_CHUNK)]
    with ScriptedServer(
        lambda _r: Script(writes=writes), tls_files.server_context(), handshake_delay_s=0.3
    ) as srv:
        rec = run_scripted(srv.url, tls_files.client_context())
    assert rec.outcome == t.OK, rec.error
    assert tls_ms(rec) >= 290
    assert 15 <= ttft_ms(rec) < 250
    assert ttft_with_connect_ms(rec) == pytest.approx(ttft_ms(rec) + connect_ms(rec) + tls_ms(rec), abs=2)


def test_event_stamps_over_tls_are_the_arrival_of_each_record(tls_files):
    """Server writes timed in another process: every event is stamped at or after its write,
    within a few ms, through TLS records as through plain chunks."""
    writes = [(0.0, ROLE)] + [(0.004, delta(f"w{i}")) for i in range(40)] + [(0.0, DONE), (0.0, END_CHUNK)]
    with ScriptedServerProcess(Script(writes=writes), tls_files.server_context()) as srv:
        rec = run_scripted(srv.url, tls_files.client_context())
        truth = srv.write_times()
    assert rec.outcome == t.OK, rec.error
    assert len(rec.event_t_ns) == 40
    for seen, sent in zip(rec.event_t_ns, truth[1:41], strict=True):
        assert 0 <= seen - sent < 5_000_000
    assert rec.text == "".join(f"w{i}" for i in range(40))


def test_pooled_tls_connection_closed_by_the_server_is_retried_fresh(tls_files):
    writes = [(0, delta("a")), (0, DONE), (0, END_CHUNK)]
    # The server closes after every answer while its head promises keep-alive.
    with ScriptedServer(lambda _r: Script(writes=writes, close=True), tls_files.server_context()) as srv:
        pool = ConnectionPool()
        recs = [run_scripted(srv.url, tls_files.client_context(), pool=pool) for _ in range(3)]
        pool.close()
    assert [r.outcome for r in recs] == [t.OK] * 3, [r.error for r in recs]
    assert all(tls_ms(r) is not None for r in recs)  # each one had to open (and time) its own


def test_http_error_body_over_tls_reaches_the_user(tls_files):
    head = b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 2\r\nContent-Length: 27\r\n\r\n"
    script = Script(head=head, writes=[(0, b'{"error":"slow down there"}')])
    with ScriptedServer(lambda _r: script, tls_files.server_context()) as srv:
        rec = run_scripted(srv.url, tls_files.client_context())
    assert rec.outcome == "http_error:429" and "slow down there" in (rec.error or "")
    assert rec.retry_after_s == 2.0


def memory_pair(tls_files: TlsFiles):
    """A client TlsConn and a server SSLObject joined in memory, handshake done."""
    from loadkit.client.tlsstream import TlsConn

    s_in, s_out = ssl.MemoryBIO(), ssl.MemoryBIO()
    server = tls_files.server_context().wrap_bio(s_in, s_out, server_side=True)
    client = TlsConn(tls_files.client_context(), "localhost")
    for _ in range(10):
        for side in (client.obj, server):
            try:
                side.do_handshake()
            except ssl.SSLWantReadError:
                pass
        s_in.write(client._out.read())
        client._in.write(s_out.read())
    assert client.decrypt(b"") == b""  # session tickets: no plaintext
    return client, server, s_out


@pytest.mark.parametrize("cut", [1, 5, 24, 25, 26, 40, 60])
def test_decrypt_hands_on_each_record_when_complete(tls_files, cut):
    """Records split anywhere across reads, several in one read, close_notify behind data."""
    client, server, out = memory_pair(tls_files)
    server.write(b"one")
    server.write(b"two" * 10)
    both = out.read()
    first_end = 5 + int.from_bytes(both[3:5], "big")  # record header: type, version, length
    if cut < first_end:
        assert client.decrypt(both[:cut]) == b""  # part of the first record: nothing yet
        assert client.decrypt(both[cut:]) == b"one" + b"two" * 10  # the rest completes both
    else:
        assert client.decrypt(both[:cut]) == b"one"  # the first, and part of the second
        assert client.decrypt(both[cut:]) == b"two" * 10
    server.write(b"x" * 20_000)  # two records (16 KiB + the rest)
    big = out.read()
    assert client.decrypt(big[:16_000]) == b""
    assert client.decrypt(big[16_000:17_000]) == b"x" * 16_384
    assert client.decrypt(big[17_000:]) == b"x" * (20_000 - 16_384)
    server.write(b"last")
    with pytest.raises(ssl.SSLWantReadError):
        server.unwrap()  # writes close_notify, then waits for ours
    assert client.decrypt(out.read()) == b"last" and client.closed
    assert client.decrypt(b"") is None  # after close_notify: the end


def test_decrypt_of_a_corrupted_record_is_a_tls_error(tls_files):
    from loadkit.client.tls import TlsError

    client, server, out = memory_pair(tls_files)
    server.write(b"hello")
    record = bytearray(out.read())
    record[-3] ^= 0xFF  # flip bits in the authentication tag
    with pytest.raises(TlsError, match="TLS error"):
        client.decrypt(bytes(record))


@pytest.mark.slow
def test_tls_under_gevent_monkey_patching():
    """This module again with gevent's sockets (what Locust runs): reads go through the hub's
    TlsArrivalQueue, the handshake through gevent's cooperative recv."""
    import subprocess
    import sys

    code = (
        "from gevent import monkey; monkey.patch_all()\n"
        "import sys, pytest\n"
        "from loadkit.client.hubreads import ArrivalQueue\n"
        "import socket; s = socket.socket(); assert ArrivalQueue.usable(s); s.close()\n"
        "sys.exit(pytest.main(['tests/client/test_tls.py', '-q', '-x', '-p', 'no:cacheprovider', '-p', 'no:anyio',"
        " '-p', 'no:trio', '-k', 'not under_gevent', '-rs']))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout and "skipped" not in proc.stdout
