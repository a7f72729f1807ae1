"""Micro-benchmark: CPU per event of the read path, plain vs TLS.

One loopback TCP connection; the writer sends N vLLM-shaped SSE events, one HTTP chunk per
write, one TLS record per event when ``https``; the reader takes them through exactly what
the stream timer runs per read: ``recv_stamped`` with a kernel receive stamp (plain) or
``TlsConn.recv_stamped`` (TLS: the same stamped read, the ciphertext through an SSLObject).
Writes and reads alternate, so every read holds one event, as at a stream's pace. The
writer's encryption is timed apart and left out.

    python benchmarks/bench_tls_read.py --events 200000
"""

from __future__ import annotations

import argparse
import os
import socket
import ssl
import sys
import tempfile
import time

import trustme

from loadkit.client.stamps import SO_TIMESTAMPNS, recv_stamped
from loadkit.client.tlsstream import TlsConn

EVENT = (b'data: {"id":"cmpl-1","object":"text_completion","created":1700000000,"model":"sim",'
         b'"choices":[{"index":0,"text":" word","logprobs":null,"finish_reason":null}]}\n\n')  # fmt: skip
CHUNK = b"%x\r\n%s\r\n" % (len(EVENT), EVENT)


def tls_pair(a: socket.socket, b: socket.socket) -> tuple[TlsConn, ssl.SSLObject, ssl.MemoryBIO]:
    """A client TlsConn on ``a`` and a server SSLObject (memory BIOs) whose output goes to ``b``."""
    ca = trustme.CA()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "server.pem")
        ca.issue_cert("localhost").private_key_and_cert_chain_pem.write_to_path(path)
        server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        server_ctx.load_cert_chain(path)
    client_ctx = ssl.create_default_context()
    ca.configure_trust(client_ctx)
    s_in, s_out = ssl.MemoryBIO(), ssl.MemoryBIO()
    server = server_ctx.wrap_bio(s_in, s_out, server_side=True)
    client = TlsConn(client_ctx, "localhost")
    for _ in range(8):  # both handshakes by hand: client over the socket, server over its BIOs
        for side in (client.obj, server):
            try:
                side.do_handshake()
            except ssl.SSLWantReadError:
                pass
        s_in.write(client._out.read())
        a_bytes = s_out.read()
        if a_bytes:
            b.sendall(a_bytes)
            client._in.write(a.recv(65536))
    return client, server, s_out


def run(events: int, use_tls: bool, kernel: bool) -> tuple[float, float]:
    """(µs of CPU per event on the read side, µs per event spent encrypting on the write side)."""
    a, b = _tcp_pair()
    if kernel:
        a.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    tls = server = s_out = None
    if use_tls:
        tls, server, s_out = tls_pair(a, b)
        # Session tickets and the like first, so the loop times events only.
        b.sendall(_record(server, s_out, CHUNK))
        tls.recv_stamped(a, kernel)
    read_cpu = write_cpu = 0.0
    for _ in range(events):
        t0 = time.thread_time()
        data = _record(server, s_out, CHUNK) if server is not None else CHUNK
        t1 = time.thread_time()
        b.sendall(data)
        t2 = time.thread_time()
        got = tls.recv_stamped(a, kernel)[0] if tls is not None else recv_stamped(a, kernel)[0]
        t3 = time.thread_time()
        assert got == CHUNK, got[:40]
        write_cpu += t1 - t0
        read_cpu += t3 - t2
    a.close()
    b.close()
    return 1e6 * read_cpu / events, 1e6 * write_cpu / events


def _record(server: ssl.SSLObject | None, out: ssl.MemoryBIO | None, data: bytes) -> bytes:
    assert server is not None and out is not None
    server.write(data)
    return out.read()


def _tcp_pair() -> tuple[socket.socket, socket.socket]:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    a = socket.create_connection(listener.getsockname())
    b, _ = listener.accept()
    listener.close()
    for s in (a, b):
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return a, b


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--events", type=int, default=200_000)
    p.add_argument("--repeat", type=int, default=3, help="runs per mode; the least CPU is kept")
    args = p.parse_args(argv)
    results = {}
    for name, use_tls in (("http", False), ("https", True)):
        runs = [run(args.events, use_tls, kernel=True) for _ in range(args.repeat)]
        results[name] = min(r[0] for r in runs)
        extra = f", the writer's encryption {min(r[1] for r in runs):.2f} µs (left out)" if use_tls else ""
        print(
            f"{name:5s}: read path {results[name]:.2f} µs CPU per event (recvmsg + kernel stamp{' + decrypt' if use_tls else ''}){extra}"
        )
    print(
        f"TLS adds {results['https'] - results['http']:.2f} µs per event ({results['https'] / results['http']:.2f}x the plain read)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
