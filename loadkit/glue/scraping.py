"""Server metrics scraped during a run, kept beside the client stats.

One greenlet on the reporting node (local or master) scrapes every target's Prometheus
endpoint every `--scrape-interval` seconds through the target's adapter (which knows the
engine's metric names), so a TTFT spike can be laid next to the queue that caused it.
A failed scrape is a row with its error, counted, never a crash.
"""

from __future__ import annotations

import logging
from typing import Any

from loadkit.targets import Target

log = logging.getLogger("loadkit")
MAX_SAMPLES = 24 * 3600  # one a second for a day, per target: bounded memory


class ServerMetrics:
    def __init__(self, targets: list[Target], interval_s: float) -> None:
        self.interval_s = interval_s
        self.samples: dict[str, list[dict[str, Any]]] = {t.name: [] for t in targets}
        self._scrapers = self._build(targets)
        self.greenlet: Any = None

    @staticmethod
    def _build(targets: list[Target]) -> dict[str, Any]:
        from loadkit.engines.metrics import MetricsScraper

        out = {}
        for t in targets:
            # Engines without a metrics endpoint (metrics_path None) or metric names are skipped.
            if t.adapter.metric_names and getattr(t.adapter, "metrics_path", "/metrics") is not None:
                out[t.name] = MetricsScraper(t.adapter, t.spec.url, timeout_s=2.0)
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
                "samples": rows,
                "errors": sum(1 for r in rows if r.get("error")),
            }
            for name, rows in self.samples.items()
            if name in self._scrapers
        }
