"""Peers' result files read as loadkit reports: GuideLLM's benchmarks.json, AIPerf's profile export.

``read_peer(path)`` detects the format from the content (not the file name), runs the matching
importer and returns a loadkit-shaped report dict (see ``common.py`` for the extra keys
``source``, ``unmapped`` and ``definitions``). ``loadkit compare`` calls it for any argument
that is not a loadkit report; ``loadkit import FILE -o DIR`` writes the result as report.json.
"""

from __future__ import annotations

import gzip
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from loadkit.report.peers import aiperf, guidellm
from loadkit.report.peers.common import PeerFormatError


@dataclass(frozen=True)
class Importer:
    tool: str
    expects: str  # what a file of this format holds, for the unknown-format error
    detect: Callable[[Any], bool]
    convert: Callable[[Any, Path], dict[str, Any]]


IMPORTERS = (
    Importer("guidellm", guidellm.EXPECTS, guidellm.detect, guidellm.convert),
    Importer("aiperf", aiperf.EXPECTS, aiperf.detect, aiperf.convert),
)


def read_json(path: Path) -> Any:
    """The file's JSON (gzip-compressed or not); PeerFormatError naming the file otherwise."""
    try:
        raw = path.read_bytes()
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
        return orjson.loads(raw)
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        raise PeerFormatError(f"{path}: cannot read it: {exc}") from None
    except orjson.JSONDecodeError as exc:
        raise PeerFormatError(f"{path}: not JSON ({exc}); {expected()}") from None


def expected() -> str:
    return "expected a loadkit report.json or one of: " + "; ".join(
        f"{i.tool}: {i.expects}" for i in IMPORTERS
    )


def detect(data: Any) -> Importer | None:
    return next((i for i in IMPORTERS if i.detect(data)), None)


def convert(data: Any, path: Path) -> dict[str, Any]:
    """The report for already-parsed ``data`` read from ``path``."""
    importer = detect(data)
    if importer is None:
        keys = ", ".join(list(data)[:8]) if isinstance(data, dict) else type(data).__name__
        raise PeerFormatError(
            f"{path}: not a format loadkit can import (top-level keys: {keys}); {expected()}"
        )
    try:
        return importer.convert(data, path)
    except (KeyError, TypeError, IndexError, ValueError) as exc:
        if isinstance(exc, PeerFormatError):
            raise
        raise PeerFormatError(f"{path}: looks like {importer.tool}'s output but lacks what it needs: "
                              f"{type(exc).__name__}: {exc}") from None  # fmt: skip


def read_peer(path: str | Path) -> dict[str, Any]:
    """Read one peer result file into a loadkit-shaped report dict."""
    file = Path(path)
    return convert(read_json(file), file)


def notes(report: dict[str, Any]) -> list[str]:
    """Lines for compare's output: where an imported report came from and how its metrics differ."""
    source = report.get("source")
    if not isinstance(source, dict):
        return []
    lines = [f"imported from {source.get('tool')} {source.get('version') or '(version not recorded)'} "
             f"({source.get('file')}); {len(report.get('unmapped') or [])} field(s) unmapped"]  # fmt: skip
    definitions = report.get("definitions")
    if isinstance(definitions, dict):
        lines += [f"{metric}: {text}" for metric, text in definitions.items()]
    return lines


__all__ = ["IMPORTERS", "PeerFormatError", "convert", "detect", "notes", "read_peer"]
