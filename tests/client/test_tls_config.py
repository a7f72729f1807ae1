"""TLS set-up outside the stream: options to one client context, the process context every
helper uses (server info, --engine auto, metrics, tokenize), error reasons, and the set-up
figures in records and reports."""

from __future__ import annotations

import argparse
import ssl
import subprocess
import sys

import pytest

from loadkit.client import tls
from loadkit.client.httpstream import Endpoint
from loadkit.client.tls import TlsConfigError, TlsError, TlsSettings, client_context, describe_error
from loadkit.engines.base import AdapterOptions
from loadkit.engines.vllm import VLLMAdapter
from loadkit.records import RequestRecord
from loadkit.servers.detect import detect_engine
from loadkit.servers.http import get
from loadkit.servers.info import describe
from loadkit.servers.metrics import scrape
from loadkit.sim.testing import sim_process
from loadkit.stats import StatsCollector
from loadkit.workload.servertok import server_builder
from tests.helpers.certs import TlsFiles, make_tls_files

MS = 1_000_000


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    return make_tls_files(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def tls_sim(tls_files: TlsFiles):
    with sim_process("--profile", "fast", "--tls-cert", tls_files.server) as sim:
        yield sim


@pytest.fixture
def process_tls():
    """Each test installs its own process context; the default comes back afterwards."""
    yield tls.use
    tls.use(TlsSettings())


def test_context_verifies_by_default_with_sni_and_alpn(tls_files):
    ctx = client_context(TlsSettings())
    assert ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname
    assert client_context(TlsSettings(insecure=True)).verify_mode == ssl.CERT_NONE
    # ALPN http/1.1 is offered (the simulator, like any HTTP/1.1 server, picks it).
    with sim_process("--profile", "fast", "--tls-cert", tls_files.server) as sim:
        from loadkit.client.tlsstream import check_tls

        seen = check_tls(Endpoint.parse(sim.url, tls_files.client_context()))
    assert seen["alpn"] == "http/1.1" and seen["version"] == "TLSv1.3" and seen["cipher"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"ca_bundle": "/no/such/ca.pem"}, "--ca-bundle /no/such/ca.pem: no such file"),
        ({"client_cert": "/no/cert.pem"}, "--client-cert /no/cert.pem: no such file"),
        ({"client_key": "KEY"}, "--client-key given without --client-cert"),
    ],
)
def test_bad_tls_options_name_the_option(kwargs, message, tls_files):
    if kwargs.get("client_key") == "KEY":
        kwargs = {"client_key": tls_files.client_key}
    with pytest.raises(TlsConfigError, match="^" + message.replace("/", ".")):
        client_context(TlsSettings(**kwargs))


def test_unusable_files_name_the_option(tls_files, tmp_path):
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate\n")
    with pytest.raises(TlsConfigError, match="--ca-bundle .*junk.pem: no usable PEM certificate"):
        client_context(TlsSettings(ca_bundle=str(junk)))
    with pytest.raises(TlsConfigError, match="the key does not belong to the certificate"):
        client_context(TlsSettings(client_cert=tls_files.client_cert, client_key=tls_files.untrusted_client))
    with pytest.raises(TlsConfigError, match="--client-key /no/key.pem: no such file"):
        client_context(TlsSettings(client_cert=tls_files.client_cert, client_key="/no/key.pem"))


def test_settings_from_options_and_manifest():
    options = argparse.Namespace(ca_bundle=" /ca.pem ", client_cert="", client_key="", insecure=True)
    settings = TlsSettings.from_options(options)
    assert settings == TlsSettings(ca_bundle="/ca.pem", insecure=True)
    manifest = settings.manifest()
    assert manifest["verify"] is False and "NOT verified" in manifest["warning"]
    assert TlsSettings.from_options(argparse.Namespace()).manifest() == {
        "verify": True, "ca_bundle": None, "client_cert": None, "client_key": None, "insecure": False}  # fmt: skip


def test_ssl_cert_file_is_honoured_by_the_default_context(tls_sim, tls_files):
    code = (
        "import sys; from loadkit.servers.http import get\n"
        f"print(get({tls_sim.url!r}, '/v1/models', 5.0).status)\n"
    )
    env = {"SSL_CERT_FILE": tls_files.ca, "PATH": "/usr/bin:/bin"}
    ok = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert ok.returncode == 0 and ok.stdout.strip() == "200", ok.stderr[-2000:]
    env["SSL_CERT_FILE"] = tls_files.other_ca
    bad = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert bad.returncode != 0 and "certificate not trusted" in bad.stderr


def test_endpoint_parse_https_takes_the_process_context(process_tls, tls_files):
    ctx = process_tls(TlsSettings(ca_bundle=tls_files.ca))
    ep = Endpoint.parse("https://example.test/v1")
    assert ep.ssl_context is ctx and ep.port == 443 and ep.scheme == "https" and ep.base_path == "/v1"
    assert Endpoint.parse("http://example.test").ssl_context is None
    with pytest.raises(ValueError, match="only http:// and https://"):
        Endpoint.parse("ftp://example.test")


def test_helpers_reach_a_tls_target_with_the_process_context(process_tls, tls_sim, tls_files):
    """Server info, --engine auto, metrics and the tokenize endpoint all go through TLS."""
    process_tls(TlsSettings(ca_bundle=tls_files.ca))
    vllm = VLLMAdapter(AdapterOptions(model="sim"))
    assert get(tls_sim.url, "/v1/models").status == 200
    assert describe(vllm, tls_sim.url).get("model")
    found = detect_engine(tls_sim.url)
    assert found.engine == "vllm" and found.explanation.startswith("found: vllm")
    metrics = scrape(vllm, tls_sim.url)
    assert "running" in metrics and "waiting" in metrics
    count = server_builder(tls_sim.url + "/tokenize", "vllm", "sim").count
    assert count("one two three") >= 3


def test_helpers_say_why_tls_failed(process_tls, tls_sim, tls_files):
    process_tls(TlsSettings(ca_bundle=tls_files.other_ca))
    with pytest.raises(TlsError, match="^certificate not trusted"):
        get(tls_sim.url, "/v1/models")
    from loadkit.errors import UserError

    with pytest.raises(UserError, match="last error: TLS: certificate not trusted"):
        detect_engine(tls_sim.url, timeout_s=1.0)
    # An explicit context wins over the process's.
    assert get(tls_sim.url, "/v1/models", ssl_context=tls_files.client_context()).status == 200


@pytest.mark.parametrize(
    ("reason", "expected"),
    [
        ("TLSV13_ALERT_CERTIFICATE_REQUIRED", "the server requires a client certificate: give --client-cert"),
        ("TLSV1_ALERT_UNKNOWN_CA", "the server refused loadkit's client certificate"),
        ("TLSV1_ALERT_PROTOCOL_VERSION", "protocol version: no TLS version"),
        ("WRONG_VERSION_NUMBER", "the server did not answer in TLS"),
        ("SSLV3_ALERT_HANDSHAKE_FAILURE", "handshake failure"),
        ("DECRYPTION_FAILED_OR_BAD_RECORD_MAC", "TLS error: DECRYPTION_FAILED_OR_BAD_RECORD_MAC"),
    ],
)
def test_alert_reasons_become_advice(reason, expected):
    exc = ssl.SSLError(1, f"[SSL: {reason}] ...")
    exc.reason = reason
    assert describe_error(exc).startswith(expected)


def test_setup_figures_in_the_report():
    """connect_ms and tls_ms per new connection (any outcome), TTFT with connect for ok ones."""
    collector = StatsCollector()
    base = 10_000 * MS
    opened = RequestRecord("a", "e", "openai", t_start_ns=base, t_connect_ns=base + MS, t_connected_ns=base + 3 * MS,
                           t_tls_ns=base + 10 * MS, t_send_ns=base + 11 * MS, t_end_ns=base + 50 * MS,
                           event_t_ns=[base + 31 * MS, base + 40 * MS], event_tokens=[1, 1], n_out=2)  # fmt: skip
    reused = RequestRecord("b", "e", "openai", t_start_ns=base, t_send_ns=base + MS // 10, t_end_ns=base + 30 * MS,
                           event_t_ns=[base + 20 * MS], event_tokens=[1], n_out=1)  # fmt: skip
    refused = RequestRecord("c", "e", "openai", outcome="tls_error", t_start_ns=base, t_send_ns=base,
                            t_connect_ns=base, t_connected_ns=base + 2 * MS, t_end_ns=base + 5 * MS)  # fmt: skip
    for r in (opened, reused, refused):
        collector.add(r)
    engine = collector.report()["engines"]["e"]
    assert engine["outcomes"] == {"ok": 2, "tls_error": 1}
    assert engine["connect_ms"]["count"] == 2 and engine["connect_ms"]["max"] == pytest.approx(2.0, rel=1e-3)
    assert engine["tls_ms"]["count"] == 1 and engine["tls_ms"]["max"] == pytest.approx(7.0, rel=1e-3)
    assert engine["ttft_ms"]["max"] == pytest.approx(20.0, rel=1e-3)  # from the write, not the connect
    assert engine["ttft_with_connect_ms"]["max"] == pytest.approx(31.0, rel=1e-3)
    assert opened.to_json()["ttft_with_connect_ms"] == pytest.approx(31.0)
    assert reused.to_json()["connect_ms"] is None and reused.to_json()["new_connection"] is False
    from loadkit.report import build_html

    html = build_html(collector.report(), None)
    section = html[html.index('<section id="connections">') :]
    section = section[: section.index("</section>")]
    assert "TLS handshake p99" in section and "<td>e</td><td>2</td>" in section.replace(" ", "")


def test_sim_tls_options_are_checked(tls_files, tmp_path):
    from loadkit.cli import main

    assert main(["sim", "--tls-key", tls_files.client_key]) == 2
    junk = tmp_path / "junk.pem"
    junk.write_text("nothing")
    assert main(["sim", "--port", "0", "--tls-cert", str(junk)]) == 2
