"""Server-metrics scrapes kept as columns read back as the rows that were scraped."""

from __future__ import annotations

from loadkit.locust.scraping import SampleLog


def test_rows_round_trip_with_missing_metrics_and_errors():
    rows = [
        {"t": 1.0, "values": {"running": 3.0, "waiting": 0.0}, "error": None},
        {"t": 2.0, "values": {}, "error": "connection refused"},
        {"t": 3.0, "values": {"running": 5.0, "kv_usage": 0.25}, "error": None},
        {"t": 4.0, "values": {"waiting": 2.0}, "error": None},
    ]
    log = SampleLog()
    for r in rows:
        log.append(r)
    assert len(log) == 4
    assert log.rows() == rows
    assert log[-2:] == rows[-2:] and log[0] == rows[0] and log[-1] == rows[-1]
    assert len(log.errors) == 1


def test_a_day_of_scrapes_costs_bytes_not_objects():
    log = SampleLog()
    names = [f"m{i}" for i in range(8)]
    for i in range(17_280):  # a day at the default 5 s interval
        log.append({"t": float(i), "values": {n: float(i) for n in names}, "error": None})
    stored = log.t.itemsize * len(log.t) + sum(c.itemsize * len(c) for c in log.columns.values())
    assert stored == 17_280 * 9 * 8
