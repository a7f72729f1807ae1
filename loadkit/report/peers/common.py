"""What every peer importer shares: the error, the loadkit-shaped report and the unmapped list.

An importer reads a peer tool's result file and returns a dict that ``loadkit compare`` and
``loadkit report`` read like a loadkit report.json: ``engines`` with the same metric names
(``ttft_ms.p99``, ``output_tokens_per_s`` ...), plus three keys a loadkit run has not:

* ``source``: ``{tool, version, file}``;
* ``unmapped``: the dotted paths of the peer's fields that have no place in loadkit's schema
  (a reader can see what the import left behind, instead of guessing);
* ``definitions``: ``{metric: how the peer's figure differs from loadkit's}``.

A distribution the peer does not give (a percentile it does not compute) is ``None``: "not
measured", which a ``--fail-if`` rule on it treats as firing, never as a pass.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from loadkit.errors import UserError

SCHEMA = "loadkit.report/1"
STAT_KEYS = ("count", "mean", "min", "max", "p50", "p90", "p95", "p99", "p999")


class PeerFormatError(ValueError, UserError):
    """A peer result file that no importer reads, or one that lacks what its format needs."""


def distribution(count: int | None, scale: float = 1.0, **stats: float | None) -> dict[str, Any]:
    """A loadkit distribution ``{count, mean, min, max, p50 ... p999}``; absent stats are None.

    ``scale`` converts the peer's unit to loadkit's (1000 for seconds to ms).
    """
    out: dict[str, Any] = {"count": count}
    for key in STAT_KEYS[1:]:
        value = stats.get(key)
        out[key] = None if value is None else float(value) * scale
    return out


def empty_distribution() -> dict[str, Any]:
    return distribution(0)


def unmapped(data: Any, mapped: Iterable[str]) -> list[str]:
    """The dotted paths of ``data`` that nothing in ``mapped`` covers, as few as possible: a
    subtree that holds no mapped path is named once (``metrics.request_concurrency``), not leaf
    by leaf. List items are ``[i]``; a long list of like records (per-request rows) is ``[*]``."""
    used = set(mapped)

    def covered(path: str) -> bool:
        return any(path == m or path.startswith((m + ".", m + "[")) for m in used)

    def touches(path: str) -> bool:  # some mapped path lies at or below this one
        return any(m == path or m.startswith((path + ".", path + "[")) for m in used)

    def walk(node: Any, path: str) -> list[str]:
        if path and covered(path):
            return []
        if path and not touches(path):
            return [path]
        if isinstance(node, Mapping):
            return [p for k, v in node.items() for p in walk(v, f"{path}.{k}" if path else str(k))]
        if isinstance(node, list) and node and isinstance(node[0], Mapping | list):
            if len(node) > 3:
                return [f"{path}[*]"]
            return [p for i, v in enumerate(node) for p in walk(v, f"{path}[{i}]")]
        return [path]

    return sorted(dict.fromkeys(walk(data, "")))


def engine_section(*, requests: int, ok: int, failures: int, cancelled: int, outcomes: dict[str, int],
                   window_s: float | None, output_tokens: int | None, input_tokens: int | None,
                   requests_per_s: float | None, output_tokens_per_s: float | None,
                   latencies: dict[str, dict[str, Any]]) -> dict[str, Any]:  # fmt: skip
    """An engine section with the keys compare, the console and report.html read."""
    section: dict[str, Any] = {
        "requests": requests, "ok": ok, "failures": failures, "cancelled": cancelled, "outcomes": outcomes,
        "error_messages": {}, "output_tokens": output_tokens, "input_tokens": input_tokens,
        "window_s": window_s, "requests_per_s": requests_per_s,
        "ok_per_s": ok / window_s if window_s else None,
        "output_tokens_per_s": output_tokens_per_s,
        # a peer run has no SLOs in loadkit's sense: goodput not measured, so a gate on it fires
        "goodput_per_s": None, "slo": None,
    }  # fmt: skip
    for name in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms", "ttfat_ms", "answer_tpot_ms", "n_in", "n_out"):
        section[name] = latencies.get(name, empty_distribution())
    return section


def peer_report(*, tool: str, version: str | None, file: Path, engines: dict[str, dict[str, Any]],
                unmapped_paths: list[str], definitions: dict[str, str], started_unix: float | None = None,
                target: str | None = None, model: str | None = None, load: str | None = None,
                ) -> dict[str, Any]:  # fmt: skip
    """The whole report dict: loadkit's top-level keys, and the peer's provenance."""
    return {
        "schema": SCHEMA,
        "generated_unix": time.time(),
        "valid": True,
        "invalid_reasons": [],
        "errors": [],
        "warnings": [
            f"imported from {tool} {version or '(version not recorded)'}: {file.name}; "
            f"{len(unmapped_paths)} field(s) of the file do not map onto loadkit's schema "
            "(report.json 'unmapped')"
        ],  # fmt: skip
        "manifest": {
            "imported_from": tool,
            "started_unix": started_unix,
            "targets": [
                {"name": name, "engine": tool, "url": target, "server": {"model": model} if model else {}}
                for name in engines
            ],
            "load": load,
        },
        "engines": engines,
        "source": {"tool": tool, "version": version, "file": str(file)},
        "unmapped": unmapped_paths,
        "definitions": definitions,
    }
