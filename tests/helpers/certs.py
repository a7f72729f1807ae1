"""Throwaway certificates for TLS tests (trustme): a CA that signs a server certificate for
127.0.0.1 / localhost, a client certificate, and a second CA nobody trusts.

    @pytest.fixture(scope="module")
    def tls_files(tmp_path_factory):
        return make_tls_files(tmp_path_factory.mktemp("tls"))

    tls_files.server   # PEM: key and chain, for `loadkit sim --tls-cert`
    tls_files.ca       # PEM: the CA to trust (--ca-bundle)
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path

import trustme


@dataclass(frozen=True)
class TlsFiles:
    ca: str  # the CA that signed `server` and `client`
    server: str  # key + chain for 127.0.0.1 and localhost
    wrong_host: str  # key + chain for another name (signed by the same CA)
    client_cert: str
    client_key: str
    other_ca: str  # a CA that signed nothing here: trusting it trusts nothing
    untrusted_client: str  # key + chain of a client certificate from other_ca

    def client_context(self, **kwargs: object) -> ssl.SSLContext:
        from loadkit.client.tls import TlsSettings, client_context

        return client_context(TlsSettings(**{"ca_bundle": self.ca, **kwargs}))  # type: ignore[arg-type]

    def server_context(self, cert: str | None = None, client_ca: str | None = None) -> ssl.SSLContext:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert or self.server)
        if client_ca:
            ctx.load_verify_locations(client_ca)
            ctx.verify_mode = ssl.CERT_REQUIRED
        return ctx


def make_tls_files(directory: Path) -> TlsFiles:
    ca, other = trustme.CA(), trustme.CA()
    paths: dict[str, str] = {}

    def write(name: str, blob: trustme.Blob) -> None:
        paths[name] = str(directory / f"{name}.pem")
        blob.write_to_path(paths[name])

    write("ca", ca.cert_pem)
    write("other_ca", other.cert_pem)
    write("server", ca.issue_cert("127.0.0.1", "localhost").private_key_and_cert_chain_pem)
    write("wrong_host", ca.issue_cert("elsewhere.example").private_key_and_cert_chain_pem)
    client = ca.issue_cert("loadkit-client@example")
    write("client_cert", client.cert_chain_pems[0])
    write("client_key", client.private_key_pem)
    write("untrusted_client", other.issue_cert("stranger@example").private_key_and_cert_chain_pem)
    return TlsFiles(**paths)
