"""The names of the metrics loadkit measures and of the SLO keys a user may give.

Shared vocabulary at the bottom layer: the workload checks a scenario's ``[slo]`` keys against
``SLO_KEYS`` without importing the stats, and the stats (``loadkit.stats.metrics``, which
re-exports these names and says how each is judged) build their histograms from the tuples.
Adding a metric or an SLO key starts here; ``stats/metrics.py`` says what else it needs.
This module imports nothing.
"""

from __future__ import annotations

# Histograms per (engine, label) and user class, in report order; values in ns, shown in ms.
# Per output channel (loadkit.engines.channels): reasoning, answer, tool calls.
CHANNEL_TIME_METRICS = ("ttfat_ms", "ttfrt_ms", "ttftc_ms", "reasoning_ms", "answer_tpot_ms")
TIME_METRICS = ("ttft_ms", "ttft_sched_ms", "tpot_ms", "itl_ms", "itl_chunk_ms", "e2e_ms",
                "ttft_with_connect_ms", "connect_ms", "tls_ms", *CHANNEL_TIME_METRICS)  # fmt: skip
TOKEN_METRICS = ("n_in", "n_out", "n_cached", "n_reasoning", "n_answer", "n_tool")
METRICS = TIME_METRICS + TOKEN_METRICS

# SLO keys a user may give, in the order of ``stats.metrics.slo_values_ns``'s tuple.
# latency_ms / latency_per_item_ms judge the kinds answered in one body (embeddings, rerank);
# e2e_ms and the token keys judge streamed requests (formulas.RequestMetrics.of says how).
SLO_KEYS = ("ttft_ms", "ttft_sched_ms", "tpot_ms", "e2e_ms", "itl_ms", "ttfat_ms", "answer_tpot_ms",
            "latency_ms", "latency_per_item_ms")  # fmt: skip

# Per-stage (and per-tenant) latency histograms: the per-request metrics, no per-event ITL.
STAGE_METRICS = ("ttft_ms", "ttft_sched_ms", "tpot_ms", "e2e_ms")

# The web UI's live latency table.
LIVE_METRICS = ("ttft_ms", "ttfat_ms", "tpot_ms", "itl_ms", "e2e_ms")
