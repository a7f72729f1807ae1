"""Mooncake JSONL rows: ``{timestamp (ms), input_length, output_length, hash_ids}`` per line.

Replay builds a row's prompt from one block of ``block_tokens`` tokens per hash id
(mooncake.py), so a row needs ceil(input_length / block_tokens) ids. A row with fewer is a bad
row like any other: refused by default (the error counts every such row in the file and names
the first lines), dropped and counted with ``on_bad_row = "skip"``, or kept whole with
``on_bad_row = "pad"``, its missing blocks given ids of their own. Before, such a row was
replayed cut to its ids' blocks (512 tokens for one id) while ``traces inspect`` reported its
full input_length.
"""

from __future__ import annotations

import math
from pathlib import Path

import orjson

from loadkit.workload.tracerows import BadRow, RowCollector, TraceReadError, TraceRows, parse_count

_SHOWN_LINES = 5


def read_mooncake(path: Path, on_bad_row: str, order: str, block_tokens: int) -> TraceRows:
    out = RowCollector(path, on_bad_row, True, True)
    refused: list[tuple[int, BadRow]] = []  # short rows under "refuse": all counted, then refused
    rows = 0
    with path.open("rb") as fh:
        for line_no, line in enumerate(fh, 1):
            if not line.strip():
                continue
            rows += 1
            try:
                t, n_in, n_out, ids = _mooncake_row(line)
                _check_blocks(n_in, ids, block_tokens)
            except BadRow as row:
                out.bad(line_no, row)
                continue
            except _ShortRow as short:
                if on_bad_row == "pad":
                    out.pad(line_no, short.needed, short.row, n_in, n_out, t, ids)
                elif on_bad_row == "skip":
                    out.bad(line_no, short.row)
                else:
                    refused.append((line_no, short.row))
                continue
            out.add(line_no, n_in, n_out, t, ids)
    if refused:
        first_line, first = refused[0]
        lines = ", ".join(str(n) for n, _ in refused[:_SHOWN_LINES]) + (
            ", ..." if len(refused) > _SHOWN_LINES else ""
        )
        raise TraceReadError(
            f"{path}: line {first_line}: {first.detail}; {len(refused)} of {rows} rows have too "
            f"few hash_ids (lines {lines}) ({first.hint})"
        )
    return out.finish("mooncake", order, "JSON line")


class _ShortRow(Exception):
    def __init__(self, needed: int, row: BadRow) -> None:
        super().__init__(row.detail)
        self.needed, self.row = needed, row


def _check_blocks(n_in: int, ids: list[int], block_tokens: int) -> None:
    """Blocks the prompt is built from: one per ``block_tokens`` of input_length (at least one,
    as replay sends at least one token). Fewer hash ids than that is a short row."""
    needed = max(1, -(-n_in // block_tokens))
    if len(ids) < needed:
        raise _ShortRow(
            needed,
            BadRow(
                "too few hash_ids",
                f"input_length {n_in} needs {needed} hash_ids of {block_tokens} tokens (block_tokens), "
                f"the row has {len(ids)} (covering {len(ids) * block_tokens} tokens)",
                'on_bad_row = "skip" drops such rows and counts them; "pad" gives the missing blocks '
                "ids of their own, shared with no other row",
            ),
        )


def _mooncake_row(line: bytes) -> tuple[float, int, int, list[int]]:
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        # orjson's own "line N" counts within this one line; the file line is the caller's.
        raise BadRow("not JSON", f"expected a JSON object, column {exc.colno}: {exc.msg}") from None
    if not isinstance(obj, dict):
        raise BadRow("not an object", f"expected a JSON object, got {type(obj).__name__}")
    for key in ("timestamp", "input_length", "output_length", "hash_ids"):
        if key not in obj:
            raise BadRow(f"missing {key}", f"expected the key {key!r} (keys: {', '.join(sorted(obj))[:80]})")
    stamp = obj["timestamp"]
    if isinstance(stamp, bool) or not isinstance(stamp, int | float) or not math.isfinite(stamp):
        raise BadRow("bad timestamp", f"expected timestamp as a number of milliseconds, got {stamp!r}")
    ids = obj["hash_ids"]
    if not isinstance(ids, list) or not all(isinstance(h, int) and not isinstance(h, bool) for h in ids):
        raise BadRow("bad hash_ids", f"expected hash_ids as a list of integers, got {str(ids)[:40]}")
    return (
        float(stamp) / 1000.0,
        parse_count(obj["input_length"], "input_length"),
        parse_count(obj["output_length"], "output_length"),
        ids,
    )
