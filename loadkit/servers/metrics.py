"""Server metrics: Prometheus text (read by prometheus-client's parser), the mapping of each
engine's metric names to loadkit's neutral names, and a scraper that keeps counters between scrapes.
:func:`scraper_for` is the one way a run's target gets its scraper (the run's scraping,
loadkit/locust/scraping.py, and the web UI's live queue column alike).

Neutral names (all optional; absent = the engine does not say):
``running``, ``waiting`` (requests), ``kv_usage`` (0..1), ``prefix_hit_rate`` (0..1, since the
server started), ``prefix_hit_rate_interval`` (0..1, since the previous scrape),
``prefix_cache_hits`` / ``prefix_cache_queries`` / ``prefix_cache_misses`` (tokens, counters),
``prompt_tokens_total``, ``generation_tokens_total``, ``preemptions_total``,
``kv_blocks_used`` / ``kv_blocks_max``, ``batch_tokens``, ``active_requests``.

A key in an adapter's ``metric_names`` is a metric name, optionally with a label selector
(``name{label="value"}``). Samples that match are summed (e.g. across data-parallel engines),
except ratios, which are averaged. The first key present wins when several map to one name
(newer names are listed first).
"""

from __future__ import annotations

import functools
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from loadkit.core.adapter import EngineAdapter
from loadkit.servers.http import get
from loadkit.servers.info import auth_headers

if TYPE_CHECKING:
    from loadkit.servers.targets import Target

RATIOS = frozenset({"kv_usage", "prefix_hit_rate"})


class MetricsError(ValueError):
    """The metrics endpoint could not be read or its text is not Prometheus exposition format."""


@dataclass(frozen=True, slots=True)
class Sample:
    name: str
    labels: dict[str, str] = field(default_factory=dict)
    value: float = 0.0


def _families(text: str) -> list[Sample]:
    # Imported here: prometheus_client pulls in its whole package (registry, HTTP exposition),
    # which only the node that scrapes needs, not every Locust process at start.
    from prometheus_client.parser import text_string_to_metric_families

    return [Sample(s.name, dict(s.labels), float(s.value))
            for family in text_string_to_metric_families(text) for s in family.samples]  # fmt: skip


def parse_prometheus(text: str) -> list[Sample]:
    """Every sample in a Prometheus text exposition (prometheus-client's parser: label values
    may hold " # ", escaped quotes and newlines). MetricsError on text it refuses, naming the
    line (found by re-reading line by line, only on that error path)."""
    try:
        return _families(text)
    except ValueError as exc:
        raise MetricsError(_bad_line(text) or f"not Prometheus text: {exc}") from None


def _bad_line(text: str) -> str | None:
    """ "line N: <why>: <text>" for the first line the parser refuses on its own."""
    for number, line in enumerate(text.splitlines(), 1):
        try:
            _families(line + "\n")
        except ValueError as exc:
            why = f" ({exc})" if str(exc) else ""
            return f"line {number} is not Prometheus text{why}: {line.strip()[:120]!r}"
    return None


@functools.lru_cache(maxsize=512)  # adapters' keys are constants, read at every scrape
def parse_selector(key: str) -> tuple[str, dict[str, str]]:
    """An adapter's ``name{label="value"}`` key, read by the same parser as the scraped text."""
    try:
        (sample,) = _families(f"{key} 0\n")
    except ValueError as exc:
        raise MetricsError(f"bad metric selector {key!r}: {exc}") from None
    return sample.name, sample.labels


def select(samples: list[Sample], key: str) -> list[float]:
    name, wanted = parse_selector(key)
    return [
        s.value for s in samples if s.name == name and all(s.labels.get(k) == v for k, v in wanted.items())
    ]


def neutral_metrics(metric_names: dict[str, str], samples: list[Sample]) -> dict[str, float]:
    """Engine samples under loadkit's neutral names, plus the values derivable from them."""
    out: dict[str, float] = {}
    for key, neutral in metric_names.items():
        if neutral in out:
            continue
        values = select(samples, key)
        if values:
            out[neutral] = sum(values) / len(values) if neutral in RATIOS else sum(values)
    derive(out)
    return out


def ratio(num: float | None, den: float | None) -> float | None:
    if num is None or den is None or den <= 0:
        return None
    return num / den


def derive(out: dict[str, float]) -> None:
    hits = out.get("prefix_cache_hits")
    queries = out.get("prefix_cache_queries")
    if queries is None and hits is not None and "prefix_cache_misses" in out:
        queries = hits + out["prefix_cache_misses"]
    if "prefix_hit_rate" not in out:
        rate = ratio(hits, queries)
        if rate is not None:
            out["prefix_hit_rate"] = rate
    if "kv_usage" not in out:
        kv = ratio(out.get("kv_blocks_used"), out.get("kv_blocks_max"))
        if kv is not None:
            out["kv_usage"] = kv


def metrics_location(adapter: EngineAdapter, base_url: str, metrics_url: str | None) -> tuple[str, str]:
    """(base URL, path) to scrape: an explicit ``metrics_url`` wins (Triton serves metrics on
    its own port, 8002), else the adapter's ``metrics_path`` on the target."""
    if metrics_url:
        scheme, _, rest = metrics_url.partition("://")
        host, slash, path = rest.partition("/")
        return f"{scheme}://{host}", slash + path or "/metrics"
    path = getattr(adapter, "metrics_path", "/metrics")
    if path is None:
        raise MetricsError(f"engine {adapter.name!r} exposes no Prometheus metrics")
    return base_url, path


def scrape(
    adapter: EngineAdapter,
    base_url: str,
    *,
    metrics_url: str | None = None,
    timeout_s: float = 2.0,
    ssl_context: ssl.SSLContext | None = None,
) -> dict[str, float]:
    """One scrape of the adapter's metrics, as neutral names. Raises MetricsError when the
    endpoint is unreachable, answers non-200, or is not Prometheus text."""
    if not adapter.metric_names:
        raise MetricsError(f"engine {adapter.name!r} names no metrics to scrape")
    base, path = metrics_location(adapter, base_url, metrics_url)
    try:
        resp = get(base, path, timeout_s, auth_headers(adapter), ssl_context)
    except OSError as exc:
        raise MetricsError(f"GET {base}{path}: {exc}") from None
    if resp.status != 200:
        raise MetricsError(f"GET {base}{path}: HTTP {resp.status}")
    try:
        samples = parse_prometheus(resp.text)
    except MetricsError as exc:
        raise MetricsError(f"GET {base}{path}: {exc}") from None
    return neutral_metrics(adapter.metric_names, samples)


class MetricsScraper:
    """Scrapes at the caller's pace and adds the interval prefix-hit rate from counter deltas.
    ``sample()`` never raises: a failed scrape is a row with ``error`` set, counted, not lost."""

    def __init__(self, adapter: EngineAdapter, base_url: str, *, metrics_url: str | None = None,
                 timeout_s: float = 2.0, clock: Callable[[], float] = time.time,
                 fetch: Callable[[], dict[str, float]] | None = None,
                 ssl_context: ssl.SSLContext | None = None) -> None:  # fmt: skip
        self.clock = clock
        self.fetch = fetch or (lambda: scrape(adapter, base_url, metrics_url=metrics_url, timeout_s=timeout_s,
                                              ssl_context=ssl_context))  # fmt: skip
        self.previous: dict[str, float] = {}
        self.errors = 0

    def sample(self) -> dict[str, Any]:
        t = self.clock()
        try:
            values = self.fetch()
        except MetricsError as exc:
            self.errors += 1
            return {"t": t, "values": {}, "error": str(exc)}
        interval = self.interval_hit_rate(values)
        if interval is not None:
            values["prefix_hit_rate_interval"] = interval
        self.previous = values
        return {"t": t, "values": values, "error": None}

    def interval_hit_rate(self, values: dict[str, float]) -> float | None:
        def queries(v: dict[str, float]) -> float | None:
            if "prefix_cache_queries" in v:
                return v["prefix_cache_queries"]
            if "prefix_cache_hits" in v and "prefix_cache_misses" in v:
                return v["prefix_cache_hits"] + v["prefix_cache_misses"]
            return None

        now_q, prev_q = queries(values), queries(self.previous)
        if now_q is None or prev_q is None:
            return None
        hits = values.get("prefix_cache_hits", 0.0) - self.previous.get("prefix_cache_hits", 0.0)
        return ratio(hits, now_q - prev_q)


def scrapes(adapter: EngineAdapter) -> bool:
    """True when the engine has metrics to scrape: metric names, and a metrics endpoint
    (``metrics_path`` not None)."""
    return bool(adapter.metric_names) and getattr(adapter, "metrics_path", "/metrics") is not None


def scraper_for(target: Target, timeout_s: float = 2.0) -> MetricsScraper | None:
    """The scraper of one of a run's targets, over the target's own connection settings (its
    endpoint's TLS context: a private CA or a client certificate holds for the scrapes too);
    None for an engine with nothing to scrape."""
    if not scrapes(target.adapter):
        return None
    return MetricsScraper(
        target.adapter, target.spec.url, timeout_s=timeout_s, ssl_context=target.endpoint.ssl_context
    )
