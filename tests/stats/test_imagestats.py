"""The images section (stats/imagestats.py): request bytes and send time, image tokens beside
text tokens (the server's count, else the expected one), TTFT by image count and by pixels;
its merge of two workers' states equals one state fed every record."""

from __future__ import annotations

import pytest

from loadkit.stats.imagestats import ImageStats
from tests.helpers.records import IMAGE_RECORDS as RECORDS
from tests.helpers.records import record


def test_the_report_buckets_ttft_and_splits_tokens():
    stats = ImageStats()
    for r in RECORDS:
        stats.add(r)
    rep = stats.report()
    assert rep["requests"] == 4 and rep["requests_with_images"] == 3
    assert rep["request_bytes"]["max"] == 5_001_000
    assert rep["send_ms"]["max"] == pytest.approx(7.0, rel=1e-3)
    assert rep["image_tokens_source"] == {"expected": 1, "usage": 2}
    assert rep["image_tokens"]["max"] == 2000  # the server's 2000, not the expected 2100
    assert rep["text_tokens"]["max"] == 70 and rep["text_tokens"]["count"] == 3
    by_count = {b["bucket"]: b["ttft_ms"]["p50"] for b in rep["ttft_ms_by_image_count"]}
    assert by_count == pytest.approx({"0": 20.0, "1": 40.0, "2": 60.0, "5+": 90.0}, rel=1e-3)
    by_pixels = {b["bucket"]: b["ttft_ms"]["count"] for b in rep["ttft_ms_by_pixels"]}
    assert by_pixels == {"0": 1, "<0.25 MP": 1, "0.25-1 MP": 1, ">=4 MP": 1}


def test_a_text_only_run_reports_bytes_and_send_time_only():
    stats = ImageStats()
    stats.add(RECORDS[0])
    rep = stats.report()
    assert rep["requests_with_images"] == 0 and "image_tokens" not in rep and rep["send_ms"]["count"] == 1


def test_merged_workers_equal_one_state():
    one, a, b = ImageStats(), ImageStats(), ImageStats()
    for i, r in enumerate(RECORDS):
        one.add(r)
        (a if i % 2 else b).add(r)
    merged = ImageStats.from_wire(a.to_wire())
    merged.merge(ImageStats.from_wire(b.to_wire()))
    assert merged.report() == one.report()


@pytest.mark.parametrize("send_ns", [3, 7_000_001, -250])  # -250: t_sent clamped before t_send
def test_the_raw_log_and_the_images_section_show_one_send_time(send_ns):
    """One formula (loadkit.formulas.send_ns, at least 0) behind both views: they agree exactly."""
    r = record()
    r.request_bytes, r.t_sent_ns = 1_000, r.t_send_ns + send_ns
    r.measure()
    stats = ImageStats()
    stats.add(r)
    line = r.to_json()
    assert stats.report()["send_ms"]["max"] == line["send_ms"] == max(send_ns, 0) / 1_000_000
    assert line["send_ms"] >= 0


def test_a_request_never_written_has_no_send_time():
    r = record()
    r.t_sent_ns = None
    stats = ImageStats()
    stats.add(r)
    assert r.to_json()["send_ms"] is None and stats.report()["send_ms"]["count"] == 0
