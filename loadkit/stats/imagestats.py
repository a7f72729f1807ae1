"""The ``images`` section: what images cost a request, on the wire and in the prompt.

Per request, whatever its images: the request's bytes as written and its send time (write
start → the last byte handed to the kernel; the upload is part of TTFT, so it is shown on its
own). For a run whose requests carry images: image tokens beside text tokens (the server's
``prompt_tokens_details.image_tokens`` where it reports them, else the tokens the workload
expects by loadkit/imagetokens.py's formula: the source is named), and TTFT by image count
and by pixels (ok requests). Histograms merge exactly across workers (stats/histogram.py).
"""

from __future__ import annotations

from typing import Any

from loadkit.records import NS_PER_MS, RequestRecord, metrics_of
from loadkit.stats.histogram import Histogram

COUNT_BUCKETS = ((0, "0"), (1, "1"), (2, "2"), (3, "3-4"), (5, "5+"))  # (lowest count, name)
MEGA = 1_000_000
PIXEL_BUCKETS = ((0, "0"), (1, "<0.25 MP"), (MEGA // 4, "0.25-1 MP"), (MEGA, "1-4 MP"), (4 * MEGA, ">=4 MP"))
QUANTILES = (0.5, 0.99)


def bucket(value: int, buckets: tuple[tuple[int, str], ...]) -> str:
    name = buckets[0][1]
    for low, label in buckets:
        if value >= low:
            name = label
    return name


class ImageStats:
    def __init__(self) -> None:
        self.request_bytes = Histogram()
        self.send_ns = Histogram()
        self.image_tokens = Histogram()
        self.text_tokens = Histogram()
        self.tokens_source: dict[str, int] = {}  # "usage" | "expected": requests of each
        self.by_count: dict[str, Histogram] = {}  # TTFT (ns), ok requests
        self.by_pixels: dict[str, Histogram] = {}
        self.with_images = 0
        # transport = "url": what this process's image server saw (workload/imageserve.py
        # ImageStore.account, set at test stop); summed over processes. None: data URLs.
        self.served: dict[str, int] | None = None

    def add(self, r: RequestRecord) -> None:
        if r.request_bytes is not None:
            self.request_bytes.record(r.request_bytes)
        metrics = metrics_of(r)
        if metrics.send_ns is not None:
            self.send_ns.record(metrics.send_ns)
        if r.image_count:
            self.with_images += 1
            self._tokens(r)
        if not r.ok:
            return
        ttft = metrics.ttft_ns
        if ttft is None:
            return
        self.by_count.setdefault(bucket(r.image_count, COUNT_BUCKETS), Histogram()).record(ttft)
        self.by_pixels.setdefault(bucket(r.image_pixels, PIXEL_BUCKETS), Histogram()).record(ttft)

    def _tokens(self, r: RequestRecord) -> None:
        source, images = (
            ("usage", r.image_tokens) if r.image_tokens is not None else ("expected", r.image_tokens_expected)
        )
        if images is None:
            return
        self.tokens_source[source] = self.tokens_source.get(source, 0) + 1
        self.image_tokens.record(images)
        if r.n_in is not None:
            self.text_tokens.record(max(r.n_in - images, 0))

    def merge(self, other: ImageStats) -> None:
        for name in ("request_bytes", "send_ns", "image_tokens", "text_tokens"):
            getattr(self, name).merge(getattr(other, name))
        for key, n in other.tokens_source.items():
            self.tokens_source[key] = self.tokens_source.get(key, 0) + n
        for mine, theirs in ((self.by_count, other.by_count), (self.by_pixels, other.by_pixels)):
            for key, hist in theirs.items():
                mine.setdefault(key, Histogram()).merge(hist)
        self.with_images += other.with_images
        if other.served is not None:
            have = self.served or {}
            self.served = {k: have.get(k, 0) + v for k, v in other.served.items()}

    def to_wire(self) -> dict[str, Any]:
        return {
            "hists": {
                n: getattr(self, n).to_wire()
                for n in ("request_bytes", "send_ns", "image_tokens", "text_tokens")
            },
            "source": dict(self.tokens_source),
            "by_count": {k: h.to_wire() for k, h in self.by_count.items()},
            "by_pixels": {k: h.to_wire() for k, h in self.by_pixels.items()},
            "with_images": self.with_images,
            "served": self.served,
        }

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> ImageStats:
        out = cls()
        for name, wire in data["hists"].items():
            setattr(out, name, Histogram.from_wire(wire))
        out.tokens_source = {str(k): int(v) for k, v in data["source"].items()}
        out.by_count = {str(k): Histogram.from_wire(v) for k, v in data["by_count"].items()}
        out.by_pixels = {str(k): Histogram.from_wire(v) for k, v in data["by_pixels"].items()}
        out.with_images = int(data["with_images"])
        served = data.get("served")
        out.served = None if served is None else {str(k): int(v) for k, v in served.items()}
        return out

    def report(self) -> dict[str, Any]:
        """The request's size and send time always; the image figures when any request had images."""
        out: dict[str, Any] = {
            "requests": self.request_bytes.count,
            "request_bytes": _summary(self.request_bytes),
            "send_ms": _summary(self.send_ns, NS_PER_MS),
            "requests_with_images": self.with_images,
        }
        if not self.with_images:
            return out
        out["transport"] = "url" if self.served is not None else "data_url"
        if self.served is not None:
            out["served"] = dict(self.served)
        out["image_tokens"] = _summary(self.image_tokens)
        out["text_tokens"] = _summary(self.text_tokens)
        out["image_tokens_source"] = dict(sorted(self.tokens_source.items()))
        out["ttft_ms_by_image_count"] = _buckets(self.by_count, COUNT_BUCKETS)
        out["ttft_ms_by_pixels"] = _buckets(self.by_pixels, PIXEL_BUCKETS)
        return out


def _summary(h: Histogram, unit: int = 1) -> dict[str, float | int | None]:
    """Values divided by ``unit`` (ns per ms: the raw log's ``ns / 10**6`` exactly, not ``ns * 1e-6``)."""
    p50, p99 = h.percentiles(list(QUANTILES))
    mean = h.mean
    return {
        "count": h.count,
        "mean": None if mean is None else mean / unit,
        "p50": None if p50 is None else p50 / unit,
        "p99": None if p99 is None else p99 / unit,
        "max": None if h.max is None else h.max / unit,
    }


def _buckets(hists: dict[str, Histogram], order: tuple[tuple[int, str], ...]) -> list[dict[str, Any]]:
    return [
        {"bucket": name, "ttft_ms": _summary(hists[name], NS_PER_MS)} for _, name in order if name in hists
    ]
