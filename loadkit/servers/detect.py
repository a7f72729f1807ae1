"""``--engine auto``: probe what a server exposes, let the detector hooks name the engine, and
say what was found and why.
"""

from __future__ import annotations

import ssl
import time
from dataclasses import dataclass, field
from typing import Any

import pluggy

from loadkit.client.tls import TlsError
from loadkit.errors import UserError
from loadkit.plugins import engine_registry, get_plugin_manager
from loadkit.plugins.guard import failure_of
from loadkit.servers.detectors import match_rules
from loadkit.servers.http import get

MAX_TEXT = 64 * 1024


@dataclass(slots=True)
class Detection:
    engine: str
    api: str | None  # the endpoint family the evidence points at (e.g. "triton"), if any
    explanation: str  # "found: ..." for the user
    probes: dict[str, Any] = field(default_factory=dict)
    # True when no fingerprint matched and the generic OpenAI adapter was taken as the fallback.
    fallback: bool = False


def probe_server(
    base_url: str,
    paths: list[str] | tuple[str, ...],
    timeout_s: float = 2.0,
    headers: dict[str, str] | None = None,
    ssl_context: ssl.SSLContext | None = None,
) -> dict[str, Any]:
    """GET each path: ``{path: {"status", "headers", "json", "text"}}``; unreachable paths are
    absent. Stops early once the probing has taken 4 × ``timeout_s`` in all (a hung server).
    ``headers`` (e.g. an Authorization header for a key-protected server) go with every GET;
    https URLs use ``ssl_context`` (default: the process's, loadkit/client/tls.py)."""
    return _probe(base_url, paths, timeout_s, headers, ssl_context)[0]


def _probe(base_url: str, paths: list[str] | tuple[str, ...], timeout_s: float, headers: dict[str, str] | None,
           ssl_context: ssl.SSLContext | None) -> tuple[dict[str, Any], str | None]:  # fmt: skip
    """probe_server's answers, and the last error (a TLS failure says its reason)."""
    probes: dict[str, Any] = {}
    error = None
    deadline = time.monotonic() + 4 * timeout_s
    for path in paths:
        if time.monotonic() > deadline:
            break
        try:
            resp = get(base_url, path, timeout_s, headers, ssl_context)
        except OSError as exc:
            error = f"{'TLS: ' if isinstance(exc, TlsError) else ''}{exc}"
            continue
        probes[path] = {
            "status": resp.status,
            "headers": resp.headers,
            "json": resp.json(),
            "text": resp.text[:MAX_TEXT],
        }
    return probes, error


def probe_paths(pm: pluggy.PluginManager) -> list[str]:
    """Every registered adapter's info paths, in registration order, without repeats."""
    paths: dict[str, None] = {}
    for info in engine_registry(pm).values():
        for path in info.adapter.info_paths:
            paths.setdefault(path, None)
    return list(paths)


def detect_engine(
    base_url: str,
    pm: pluggy.PluginManager | None = None,
    timeout_s: float = 2.0,
    headers: dict[str, str] | None = None,
    ssl_context: ssl.SSLContext | None = None,
) -> Detection:
    """Which engine serves ``base_url``. UserError when nothing answers or a detector names an
    engine that is not registered. ``headers`` are sent with every probe."""
    pm = pm or get_plugin_manager()
    probes, error = _probe(base_url, probe_paths(pm), timeout_s, headers, ssl_context)
    if not probes:
        last = f"; last error: {error}" if error else ""
        raise UserError(
            f"--engine auto: nothing answered at {base_url} (tried {', '.join(probe_paths(pm))}){last}"
        )
    try:
        name = pm.hook.loadkit_detect_engine(probes=probes)
    except Exception as exc:  # a plugin's detector broke: one clear error that names it
        failure = failure_of(exc)
        if failure is None:
            raise
        raise UserError(f"--engine auto: {failure.describe()}") from exc
    registry = engine_registry(pm)
    if name not in registry:
        raise UserError(f"--engine auto: a detector named engine {name!r}, which no plugin registers")
    api, explanation = explain(name, probes, registry[name].plugin)
    match = match_rules(probes)
    fallback = name == "openai" and (match is None or match.engine != name)
    return Detection(name, api, explanation, probes, fallback)


def probe_summary(probes: dict[str, Any], body_chars: int = 200) -> dict[str, Any]:
    """What each probe saw, small enough for a report manifest: status, Server and
    Content-Type headers, the body's first ``body_chars`` characters."""
    out: dict[str, Any] = {}
    for path, probe in probes.items():
        headers = probe.get("headers") or {}
        text = " ".join(str(probe.get("text") or "").split())
        out[path] = {"status": probe.get("status"), "server": headers.get("server"),
                     "content_type": headers.get("content-type"),
                     "body": text[:body_chars] + ("…" if len(text) > body_chars else "")}  # fmt: skip
    return out


def explain(name: str, probes: dict[str, Any], plugin: str) -> tuple[str | None, str]:
    match = match_rules(probes)
    if match is not None and match.engine == name:
        api = f", api {match.api}" if match.api else ""
        return match.api, f"found: {name}{api} ({match.evidence})"
    if name == "openai":
        answered = ", ".join(f"{p} {v['status']}" for p, v in probes.items())
        return (
            None,
            f"found: openai (generic OpenAI-compatible fallback; no engine fingerprint in: {answered})",
        )
    return None, f"found: {name} (named by an installed plugin's detector; engine from {plugin})"
