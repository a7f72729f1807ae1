"""The report's "Images" section (report.json ``images``, stats/imagestats.py): image tokens
beside text tokens, TTFT by image count and by pixels, request bytes and send time."""

from __future__ import annotations

from typing import Any

from loadkit.report.htmlutil import note, num, section, table

TITLE = "Images"
HEAD = ("bucket", "requests", "TTFT p50 ms", "TTFT p99 ms")


def images_section(report: dict[str, Any]) -> str:
    """Empty unless some request carried images: a text run says nothing here."""
    data = report.get("images")
    if not data or not data.get("requests_with_images"):
        return ""
    sizes = table(
        ("figure", "count", "p50", "p99", "max"),
        [_row(name, data.get(key) or {}) for name, key in (
            ("image tokens / request", "image_tokens"), ("text tokens / request", "text_tokens"),
            ("request bytes", "request_bytes"), ("send ms (write start to last byte written)", "send_ms"))],
    )  # fmt: skip
    source = ", ".join(f"{k}: {v}" for k, v in (data.get("image_tokens_source") or {}).items())
    return section(
        "images",
        TITLE,
        sizes,
        note(
            f"Image tokens from: {source or 'none'} (usage: the server's prompt_tokens_details.image_tokens; "
            "expected: Qwen2-VL's tokens by resolution, where the server does not say). "
            "TTFT includes the send time."
        ),  # fmt: skip
        _served(data),
        table(("images / request", *HEAD[1:]), _buckets(data.get("ttft_ms_by_image_count") or [])),
        table(("pixels / request", *HEAD[1:]), _buckets(data.get("ttft_ms_by_pixels") or [])),
    )


def _served(data: dict[str, Any]) -> str:
    """transport = "url": what loadkit's image server sent, and whether the engine fetched it."""
    served = data.get("served")
    if data.get("transport") != "url" or not served:
        return note("Transport: data URLs (the image bytes travel inside the request).")
    return note(
        f"Transport: URLs served by loadkit's image server (the request carries no image bytes): "
        f"{served['image_parts_sent']:,} image parts sent ({served['distinct_images_sent']:,} distinct), "
        f"{served['fetches']:,} fetches, {served['bytes_served']:,} bytes served, "
        f"{served['never_fetched']:,} images never fetched, {served['misses']:,} fetches of unknown paths."
    )


def _row(name: str, s: dict[str, Any]) -> list[str]:
    return [name, num(s.get("count"), 0), num(s.get("p50")), num(s.get("p99")), num(s.get("max"))]


def _buckets(rows: list[dict[str, Any]]) -> list[list[str]]:
    return [[b["bucket"], num(b["ttft_ms"]["count"], 0), num(b["ttft_ms"]["p50"]), num(b["ttft_ms"]["p99"])]
            for b in rows]  # fmt: skip


def console_lines(report: dict[str, Any]) -> list[str]:
    """One line when requests carried images: tokens, TTFT by image count, bytes and send time."""
    data = report.get("images")
    if not data or not data.get("requests_with_images"):
        return []
    img, txt = data.get("image_tokens") or {}, data.get("text_tokens") or {}
    by_count = " ".join(
        f"{b['bucket']}:{num(b['ttft_ms']['p50'])}" for b in data.get("ttft_ms_by_image_count") or []
    )
    size, send = data.get("request_bytes") or {}, data.get("send_ms") or {}
    served = data.get("served") if data.get("transport") == "url" else None
    fetched = (
        f"; by URL: {served['image_parts_sent']} sent, {served['fetches']} fetched, "
        f"{served['never_fetched']} never fetched"
        if served
        else ""
    )
    return [
        f"images: {data['requests_with_images']} requests, image/text tokens p50 {num(img.get('p50'), 0)}/"
        f"{num(txt.get('p50'), 0)}; TTFT p50 ms by images {by_count}; request "
        f"{num((size.get('p50') or 0) / 1e6, 2)}/{num((size.get('p99') or 0) / 1e6, 2)} MB p50/p99, "
        f"send {num(send.get('p50'), 2)}/{num(send.get('p99'), 2)} ms{fetched}"
    ]
