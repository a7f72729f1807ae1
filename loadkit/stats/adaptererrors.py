"""The report's ``adapter_errors``: requests whose engine adapter raised (outcome
``adapter_error``, client/adaptererr.py), one row per target and kind of error, with the first
traceback.

Each row is a (target, template of the error) pair (stats/msgtemplate.py: numbers and ids
masked), with its count, the first error text and the traceback of the first failure of its
kind (the client formats one per kind and process, not one per request). The first time a
node sees a kind it prints one line; later ones are only counted, so a parser failing on every
request does not flood the console. A section of the collector (stats/sections.py): merged
exactly across workers (counts add; example and traceback are the earliest by wall clock).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from loadkit.records import RequestRecord
from loadkit.stats.msgtemplate import template_of
from loadkit.types import ADAPTER_ERROR

log = logging.getLogger("loadkit.stats")

MAX_KINDS = 32  # per node: bounds memory, the snapshot and the console


class Kind:
    __slots__ = ("count", "adapter", "example", "at_ns", "traceback")

    def __init__(self, count: int, adapter: str, example: str, at_ns: int, traceback: str | None) -> None:
        self.count, self.adapter, self.example, self.at_ns, self.traceback = (
            count,
            adapter,
            example,
            at_ns,
            traceback,
        )

    def take(self, other: Kind) -> None:
        self.count += other.count
        if (other.at_ns, other.example) < (self.at_ns, self.example):
            self.example, self.at_ns, self.adapter = other.example, other.at_ns, other.adapter
            self.traceback = other.traceback or self.traceback
        elif self.traceback is None:
            self.traceback = other.traceback

    def to_wire(self) -> list[Any]:
        return [self.count, self.adapter, self.example, self.at_ns, self.traceback]


class AdapterErrors:
    """(target, template) → Kind on one node, and how many fit no kept row (``other``)."""

    def __init__(self) -> None:
        self.kinds: dict[tuple[str, str], Kind] = {}
        self.other = 0

    def add(self, record: RequestRecord) -> None:
        if record.outcome != ADAPTER_ERROR:
            return
        text = record.error or ""
        key = (record.engine, template_of(text))
        kind = Kind(1, record.adapter, text, time.time_ns(), record.traceback)
        if key not in self.kinds and len(self.kinds) < MAX_KINDS:
            log.error("loadkit: target %r: adapter_error: %s (one line per kind of error: later ones are counted "
                      "in the report, whose adapter_errors has the first traceback)", record.engine, text)  # fmt: skip
        self._put(key, kind)

    def _put(self, key: tuple[str, str], kind: Kind) -> None:
        found = self.kinds.get(key)
        if found is not None:
            found.take(kind)
        elif len(self.kinds) < MAX_KINDS:
            self.kinds[key] = kind
        else:
            self.other += kind.count

    def merge(self, other: AdapterErrors) -> None:
        for key, kind in other.kinds.items():
            self._put(key, Kind(*kind.to_wire()))
        self.other += other.other

    def to_wire(self) -> dict[str, Any]:
        return {"kinds": [[engine, template, *kind.to_wire()] for (engine, template), kind in self.kinds.items()],
                "other": self.other}  # fmt: skip

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> AdapterErrors:
        out = cls()
        for engine, template, count, adapter, example, at_ns, traceback in data["kinds"]:
            out._put((str(engine), str(template)), Kind(int(count), str(adapter), str(example), int(at_ns),
                                                        None if traceback is None else str(traceback)))  # fmt: skip
        out.other = int(data["other"])
        return out

    def report(self) -> dict[str, Any]:
        """Most frequent first; ``other``: adapter errors of kinds no node had room for."""
        ranked = sorted(self.kinds.items(), key=lambda kv: (-kv[1].count, kv[0]))
        return {"kinds": [{"engine": engine, "adapter": kind.adapter, "count": kind.count, "message": kind.example,
                           "template": template, "traceback": kind.traceback}
                          for (engine, template), kind in ranked],
                "other": self.other}  # fmt: skip
