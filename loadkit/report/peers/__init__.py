"""Peers' result files read as loadkit reports: GuideLLM's benchmarks.json, AIPerf's profile export,
vLLM's bench serve JSON, SGLang's bench_serving JSONL, genai-bench's run files.

``read_peer(path)`` detects the format from the content (not the file name), runs the matching
importer and returns a loadkit-shaped report dict (see ``common.py`` for the extra keys
``source``, ``unmapped`` and ``definitions``). ``loadkit compare`` calls it for any argument
that is not a loadkit report; ``loadkit import FILE -o DIR`` writes the result as report.json.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from loadkit.report.peers import aiperf, genai_bench, guidellm, sglang, vllm
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
    Importer("vllm", vllm.EXPECTS, vllm.detect, vllm.convert),
    Importer("sglang", sglang.EXPECTS, sglang.detect, sglang.convert),
    Importer("genai-bench", genai_bench.EXPECTS, genai_bench.detect, genai_bench.convert),
)


def read_json(path: Path) -> Any:
    """The file's JSON (gzip-compressed or not), or a list of its lines' JSON objects when it is
    JSON Lines (SGLang's bench_serving appends one object a line); PeerFormatError naming the file
    (and the line) otherwise."""
    try:
        raw = path.read_bytes()
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        raise PeerFormatError(f"{path}: cannot read it: {exc}") from None
    try:
        return _loads(raw)
    except ValueError as exc:
        lines = _json_lines(path, raw)
        if lines is None:
            raise PeerFormatError(f"{path}: not JSON ({exc}); {expected()}") from None
        return lines


def _loads(raw: bytes) -> Any:
    """JSON, or Python's json.dumps dialect of it: vLLM and SGLang write ``"request_rate": Infinity``
    (and NaN where a figure is empty), which orjson refuses and the standard library reads."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        if b"Infinity" not in raw and b"NaN" not in raw:
            raise
        return json.loads(raw)


def _json_lines(path: Path, raw: bytes) -> list[Any] | None:
    """JSON Lines, if the first line is a JSON object of its own (a pretty-printed JSON file's first
    line never is); a later line that does not parse (a run cut short mid-write) is an error naming it."""
    rows = raw.splitlines()
    try:
        first = _loads(rows[0]) if rows else None
    except ValueError:
        return None
    if not isinstance(first, dict):
        return None
    out = [first]
    for number, row in enumerate(rows[1:], start=2):
        if not row.strip():
            continue
        try:
            out.append(_loads(row))
        except ValueError as exc:
            raise PeerFormatError(f"{path}: line {number}: not JSON ({exc}); the file is JSON Lines, one "
                                  "object a line") from None  # fmt: skip
    return out


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


def folder_entry(folder: Path) -> Path | None:
    """The file that stands for a peer's result folder: genai-bench's experiment folder is read
    through its experiment_metadata.json (which reads every run file beside it)."""
    entry = folder / genai_bench.METADATA
    return entry if entry.is_file() else None


def read_peer(path: str | Path) -> dict[str, Any]:
    """Read one peer result file (or a folder ``folder_entry`` knows) into a loadkit-shaped report dict."""
    file = Path(path)
    if file.is_dir():
        entry = folder_entry(file)
        if entry is None:
            raise PeerFormatError(f"{file}: a folder, and not one loadkit can import (a genai-bench experiment "
                                  f"folder holds {genai_bench.METADATA}); give a result file")  # fmt: skip
        file = entry
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


__all__ = ["IMPORTERS", "PeerFormatError", "convert", "detect", "folder_entry", "notes", "read_peer"]
