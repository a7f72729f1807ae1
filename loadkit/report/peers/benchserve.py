"""The flat result dict that vLLM's ``bench serve`` and SGLang's ``bench_serving`` (a fork of it)
both write: totals, rates and ``{mean,median,std,pNN}_<metric>_ms`` per metric, plus, when asked
for (vLLM ``--save-detailed``, SGLang ``--output-details``), per-request lists. One engine per
dict; the figures are the file's own, copied, not recomputed. The per-request lists give only
the exact counts (how many TPOT and ITL values the file's statistics are over)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from loadkit.report.peers.common import distribution, engine_section

SCALARS = ("completed", "duration", "request_throughput", "output_throughput", "total_input_tokens",
           "total_output_tokens", "backend", "max_concurrency", "request_rate", "dataset_name")  # fmt: skip
DETAILS = ("errors", "itls", "output_lens", "input_lens", "ttfts")


# {stat}_{metric}_ms keys: loadkit stat <- the tools' prefix
FLAT_STATS = {"mean": "mean", "p50": "median", "min": "min", "max": "max"}
FLAT_PERCENTILES = {"p90": "p90", "p95": "p95", "p99": "p99", "p999": "p99.9"}


def flat_distribution(
    data: Mapping[str, Any], metric: str, count: int | None
) -> tuple[dict[str, Any], list[str]]:
    """The distribution of ``metric`` (``ttft``, ``tpot``, ``itl``, ``e2el`` ...) from a flat dict's
    ``{stat}_{metric}_ms`` keys, and the keys it read. A percentile the file lacks is None; a
    ``p50_*`` key (vLLM with ``--metric-percentiles 50``) stands in for a missing ``median_*``."""
    stats: dict[str, float | None] = {}
    used: list[str] = []
    names = {**FLAT_STATS, **FLAT_PERCENTILES}
    for stat, prefix in names.items():
        keys = [f"{prefix}_{metric}_ms", *([f"p50_{metric}_ms"] if stat == "p50" else [])]
        value = next((data[k] for k in keys if data.get(k) is not None), None)
        if value is not None:
            stats[stat] = float(value)
            used += [k for k in keys if k in data]  # median_ and p50_ are the same figure: both mapped
    return distribution(count, 1.0, **stats), used


def section(run: dict[str, Any], *, e2e: str, failed: int) -> tuple[dict[str, Any], list[str]]:
    """The engine section of one result dict, and the keys of it that were read.

    ``e2e`` is the tool's name of the end-to-end metric (``e2el`` in vLLM, ``e2e_latency`` in SGLang);
    ``failed`` the failed requests the file records."""
    completed = int(run["completed"])
    errors, output_lens, itls = run.get("errors"), run.get("output_lens"), run.get("itls")
    counts: dict[str, int | None] = {
        "ttft_ms": completed,
        "e2e_ms": completed,
        "tpot_ms": None,
        "itl_ms": None,
    }
    if isinstance(errors, list) and isinstance(output_lens, list) and isinstance(itls, list):
        ok = [i for i, e in enumerate(errors) if not e]
        counts["tpot_ms"] = sum(1 for i in ok if output_lens[i] > 1)  # one-token answers have no TPOT
        counts["itl_ms"] = sum(len(itls[i]) for i in ok)
    used: list[str] = [*SCALARS, *(k for k in DETAILS if k in run)]
    latencies: dict[str, dict[str, Any]] = {}
    for name, metric in (("ttft_ms", "ttft"), ("tpot_ms", "tpot"), ("itl_ms", "itl"), ("e2e_ms", e2e)):
        latencies[name], keys = flat_distribution(run, metric, counts[name])
        used += keys
    total_in, total_out = int(run["total_input_tokens"]), int(run["total_output_tokens"])
    if completed:  # the file has totals, not distributions: the mean is all there is
        latencies["n_in"] = distribution(completed, mean=total_in / completed)
        latencies["n_out"] = distribution(completed, mean=total_out / completed)
    out = engine_section(
        requests=completed + failed, ok=completed, failures=failed, cancelled=0,
        outcomes={k: v for k, v in (("ok", completed), ("errored", failed)) if v},
        window_s=float(run["duration"]), output_tokens=total_out, input_tokens=total_in,
        requests_per_s=float(run["request_throughput"]), output_tokens_per_s=float(run["output_throughput"]),
        latencies=latencies,
    )  # fmt: skip
    return out, used


def failed_from_errors(run: dict[str, Any]) -> int:
    """Failed requests from the per-request ``errors`` list (a non-empty entry); 0 without it."""
    errors = run.get("errors")
    return sum(1 for e in errors if e) if isinstance(errors, list) else 0
