"""Server metrics scraped during a run, kept beside the client stats.

One greenlet on the reporting node (local or master) scrapes every target's Prometheus
endpoint every `--scrape-interval` seconds through the target's adapter (which knows the
engine's metric names), so a TTFT spike can be laid next to the queue that caused it.
A failed scrape is a row with its error, counted, never a crash.
"""

from __future__ import annotations

import logging
import math
from array import array
from typing import Any

from loadkit.servers.metrics import scraper_for
from loadkit.servers.targets import Target

log = logging.getLogger("loadkit")
MAX_SAMPLES = 24 * 3600  # one a second for a day, per target: bounded memory


class SampleLog:
    """Scrape rows stored as columns of doubles (8 bytes a value, not a dict per row), so a
    day of scrapes stays small; rows are rebuilt as {"t", "values", "error"} when read."""

    def __init__(self) -> None:
        self.t = array("d")
        self.columns: dict[str, array[float]] = {}
        self.errors: dict[int, str] = {}

    def __len__(self) -> int:
        return len(self.t)

    def append(self, row: dict[str, Any]) -> None:
        n = len(self.t)
        self.t.append(float(row["t"]))
        for key, value in row["values"].items():
            column = self.columns.get(key)
            if column is None:
                column = self.columns[key] = array("d", [math.nan]) * n
            column.append(float(value) if value is not None else math.nan)
        for column in self.columns.values():
            if len(column) == n:  # a metric this scrape did not report
                column.append(math.nan)
        if row.get("error"):
            self.errors[n] = str(row["error"])

    def _row(self, i: int) -> dict[str, Any]:
        values = {k: c[i] for k, c in self.columns.items() if not math.isnan(c[i])}
        return {"t": self.t[i], "values": values, "error": self.errors.get(i)}

    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return [self._row(i) for i in range(*index.indices(len(self.t)))]
        return self._row(range(len(self.t))[index])

    def rows(self) -> list[dict[str, Any]]:
        return self[:]


class ServerMetrics:
    def __init__(self, targets: list[Target], interval_s: float) -> None:
        self.interval_s = interval_s
        self.samples: dict[str, SampleLog] = {t.name: SampleLog() for t in targets}
        self._scrapers = self._build(targets)
        self.greenlet: Any = None

    @staticmethod
    def _build(targets: list[Target]) -> dict[str, Any]:
        out = {}
        for t in targets:
            scraper = scraper_for(t, timeout_s=2.0)  # None: the engine has nothing to scrape
            if scraper is not None:
                out[t.name] = scraper
        return out

    def start(self) -> None:
        import gevent

        if self._scrapers and self.interval_s > 0:
            self.greenlet = gevent.spawn(self._loop)

    def _loop(self) -> None:
        import gevent

        while True:
            self.scrape_once()
            gevent.sleep(self.interval_s)

    def scrape_once(self) -> None:
        for name, scraper in self._scrapers.items():
            rows = self.samples[name]
            if len(rows) < MAX_SAMPLES:
                rows.append(scraper.sample())

    def stop(self) -> None:
        if self.greenlet is not None:
            self.greenlet.kill(block=False)
            self.greenlet = None

    def section(self) -> dict[str, Any]:
        return {
            name: {
                "interval_s": self.interval_s,
                "samples": rows.rows(),
                "errors": len(rows.errors),
            }
            for name, rows in self.samples.items()
            if name in self._scrapers
        }
