"""TLS for https:// targets: the one place that builds the client context from loadkit's
options, and the reasons a TLS connection failed, said so that a user can act on them.

``Runtime.configure`` installs the context built from the run's options as this process's
(:func:`use`); every https connection loadkit opens — timed streams, server-info probes,
``--engine auto``, the tokenize endpoint, metrics scraping, the pre-flight check — takes it
from :func:`process_context` unless the caller hands it one. Without options it is the
system default: the system trust store (``SSL_CERT_FILE`` / ``SSL_CERT_DIR`` honoured),
certificate and host name verified, SNI, ALPN ``http/1.1``.
"""

from __future__ import annotations

import os
import ssl
from dataclasses import asdict, dataclass
from typing import Any

from loadkit.errors import UserError

ALPN = ["http/1.1"]
INSECURE_WARNING = (
    "--insecure: https:// targets' certificates and host names are NOT verified; anyone on the path "
    "can impersonate the server. Use it to measure a test deployment, never to trust its answers"
)

# OpenSSL's X509_V_ERR_* codes that mean "no trusted CA issued this certificate".
_UNTRUSTED = {2, 18, 19, 20, 21, 27}
_EXPIRED, _NOT_YET_VALID, _HOSTNAME_MISMATCH, _IP_MISMATCH = 10, 9, 62, 64
_CLIENT_CERT_HINT = "give --client-cert and --client-key"


class TlsConfigError(ValueError, UserError):
    """A TLS option cannot be used (missing file, not PEM, key not matching); names the option."""


class TlsError(OSError):
    """A TLS connection to a target failed; the message is the reason, in words a user acts on."""


@dataclass(frozen=True, slots=True)
class TlsSettings:
    """The TLS options of a run (paths as given; None = not given)."""

    ca_bundle: str | None = None
    client_cert: str | None = None
    client_key: str | None = None
    insecure: bool = False

    @classmethod
    def from_options(cls, options: Any) -> TlsSettings:
        def path(name: str) -> str | None:
            return str(getattr(options, name, "") or "").strip() or None

        return cls(
            path("ca_bundle"),
            path("client_cert"),
            path("client_key"),
            bool(getattr(options, "insecure", False)),
        )

    def manifest(self) -> dict[str, Any]:
        """What the report's manifest says about TLS (paths only, never key material)."""
        out: dict[str, Any] = {"verify": not self.insecure, **asdict(self)}
        if self.insecure:
            out["warning"] = INSECURE_WARNING
        return out


def client_context(settings: TlsSettings) -> ssl.SSLContext:
    """The client SSLContext for ``settings``; TlsConfigError names the option that is wrong."""
    try:
        ctx = ssl.create_default_context(cafile=settings.ca_bundle)
    except FileNotFoundError:
        raise TlsConfigError(f"--ca-bundle {settings.ca_bundle}: no such file") from None
    except (ssl.SSLError, OSError) as exc:
        raise TlsConfigError(
            f"--ca-bundle {settings.ca_bundle}: no usable PEM certificate in it ({exc})"
        ) from None
    ctx.set_alpn_protocols(ALPN)
    if settings.client_key and not settings.client_cert:
        raise TlsConfigError("--client-key given without --client-cert")
    if settings.client_cert:
        _load_client_cert(ctx, settings.client_cert, settings.client_key)
    if settings.insecure:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    return ctx


def _load_client_cert(ctx: ssl.SSLContext, cert: str, key: str | None) -> None:
    for option, path in (("--client-cert", cert), ("--client-key", key)):
        if path is not None and not os.path.isfile(path):
            raise TlsConfigError(f"{option} {path}: no such file")

    def no_password() -> str:
        raise TlsConfigError(f"--client-key {key or cert}: the key is encrypted; give an unencrypted PEM key")

    try:
        ctx.load_cert_chain(cert, key, password=no_password)
    except (ssl.SSLError, OSError) as exc:
        what = "--client-cert/--client-key" if key else "--client-cert"
        if "KEY_VALUES_MISMATCH" in str(getattr(exc, "reason", "")):
            raise TlsConfigError(f"{what}: the key does not belong to the certificate {cert}") from None
        given = f"{cert} {key}" if key else cert
        raise TlsConfigError(
            f"{what} {given}: not a PEM certificate and key ({getattr(exc, 'reason', None) or exc})"
        ) from None


_process: ssl.SSLContext | None = None
_process_settings: TlsSettings | None = None


def use(settings: TlsSettings) -> ssl.SSLContext:
    """Build the context for ``settings`` and make it this process's (see the module docstring).
    Built afresh every time (each Locust test start), so a CA file fixed between two runs from
    the web UI is read again."""
    global _process, _process_settings
    _process, _process_settings = client_context(settings), settings
    return _process


def process_context() -> ssl.SSLContext:
    """This process's client context: the one :func:`use` installed, else the system default."""
    return _process if _process is not None else use(TlsSettings())


def process_settings() -> TlsSettings:
    return _process_settings or TlsSettings()


def describe_error(exc: BaseException, host: str | None = None) -> str:
    """One line saying why a TLS connection failed and what to do about it."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        return _verify_reason(exc, host)
    if isinstance(exc, ssl.SSLError):
        return _alert_reason(str(exc.reason or ""), exc)
    return str(exc)


def _verify_reason(exc: ssl.SSLCertVerificationError, host: str | None) -> str:
    code, message = exc.verify_code, exc.verify_message or str(exc)
    if code in (_HOSTNAME_MISMATCH, _IP_MISMATCH):
        return (f"hostname mismatch: the server's certificate is not valid for {host or 'this host'} ({message}); "
                "use a host name the certificate holds")  # fmt: skip
    if code in _UNTRUSTED:
        return (f"certificate not trusted: {message}; give --ca-bundle with the CA that issued it "
                "(or --insecure to measure without verifying)")  # fmt: skip
    if code in (_EXPIRED, _NOT_YET_VALID):
        return f"certificate not valid now: {message}"
    return f"certificate verification failed: {message}"


def _alert_reason(reason: str, exc: ssl.SSLError) -> str:
    if reason == "WRONG_VERSION_NUMBER" or reason == "PACKET_LENGTH_TOO_LONG":
        return "the server did not answer in TLS (a plain http:// server behind an https:// URL?)"
    if "PROTOCOL_VERSION" in reason or "UNSUPPORTED_PROTOCOL" in reason or "NO_PROTOCOLS_AVAILABLE" in reason:
        return f"protocol version: no TLS version both the server and loadkit accept ({reason})"
    if "CERTIFICATE_REQUIRED" in reason:
        return f"the server requires a client certificate: {_CLIENT_CERT_HINT}"
    if reason in ("TLSV1_ALERT_UNKNOWN_CA", "SSLV3_ALERT_BAD_CERTIFICATE", "SSLV3_ALERT_CERTIFICATE_UNKNOWN",
                  "TLSV1_ALERT_ACCESS_DENIED"):  # fmt: skip
        return f"the server refused loadkit's client certificate ({reason}): check --client-cert"
    if "HANDSHAKE_FAILURE" in reason:
        return (f"handshake failure ({reason}): the server may require a client certificate "
                f"({_CLIENT_CERT_HINT}) or share no cipher with loadkit")  # fmt: skip
    return f"TLS error: {reason or exc}"


def refused_after_handshake_reason() -> str:
    """TLS 1.3 servers check the client certificate after the client's handshake is done: a
    refusal then arrives as an alert or, often, as a reset before any answer."""
    return ("the server closed the connection right after the TLS handshake, before answering: a TLS 1.3 "
            f"server does this when it refuses the client certificate (missing or untrusted; {_CLIENT_CERT_HINT})")  # fmt: skip
