"""Compare report.json with the figures recomputed from the raw log, section by section.

Counts must agree exactly. A percentile may differ by what the report's histogram can
resolve: ``relative_error`` of the value (2^-10 unless the manifest states
``histogram_relative_error``) plus one recording unit: 1 ns, which every histogram records
(engines, labels, classes, stages, tenants' parts, length buckets, session turns)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from loadkit.verify.figures import DEFAULT_RELATIVE_ERROR, QUANTILES, nearest_rank, weighted_nearest_rank
from loadkit.verify.recompute import Figures

COUNT_KEYS = ("requests", "ok", "failures", "cancelled", "outcomes", "output_tokens",
              "output_tokens_all_outcomes", "input_tokens", "cached_tokens", "stream_ends", "n_out_sources")  # fmt: skip
# Figures that report.json's stage, length-bucket, session-turn and tenant-part rows carry since
# 0.3.0 (time to first answer token): a row of an older report has none to compare.
SINCE_0_3 = frozenset({"ttfat_ms"})
GROUP_METRICS = ("ttft_ms", "ttft_sched_ms", "ttft_with_connect_ms", "tpot_ms", "e2e_ms", "ttfat_ms", "ttfrt_ms",
                 "ttftc_ms", "reasoning_ms", "answer_tpot_ms", "connect_ms", "tls_ms", "n_in", "n_out", "n_cached",
                 "n_reasoning", "n_answer", "n_tool")  # fmt: skip
NS_UNIT_MS = 1e-6


@dataclass(frozen=True)
class Disagreement:
    section: str
    key: str
    figure: str
    report: Any
    recomputed: Any
    tolerance: float

    def __str__(self) -> str:
        return (f"{self.section} / {self.key} / {self.figure}: report {self.report}, "
                f"recomputed {self.recomputed} (tolerance {self.tolerance:g})")  # fmt: skip


@dataclass
class Verdict:
    checked: dict[str, int] = field(default_factory=dict)  # figures compared, per section
    disagreements: list[Disagreement] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what could not be checked, and why
    remarks: list[str] = field(default_factory=list)  # checked, but how (a wider tolerance), said
    relative_error: float = DEFAULT_RELATIVE_ERROR

    @property
    def ok(self) -> bool:
        return not self.disagreements

    def exact(self, section: str, key: str, figure: str, report: Any, recomputed: Any) -> None:
        self.checked[section] = self.checked.get(section, 0) + 1
        if _normal(report) != _normal(recomputed):
            self.disagreements.append(Disagreement(section, key, figure, report, recomputed, 0))

    def close(self, section: str, key: str, figure: str, report: Any, recomputed: float, unit: float,
              relative: bool = True) -> None:  # fmt: skip
        self.checked[section] = self.checked.get(section, 0) + 1
        tolerance = (
            (self.relative_error * abs(recomputed) if relative else 0.0) + unit + 1e-9 * abs(recomputed)
        )
        if not isinstance(report, int | float) or abs(report - recomputed) > tolerance:
            self.disagreements.append(Disagreement(section, key, figure, report, recomputed, tolerance))


def _normal(value: Any) -> Any:
    """Counters compare without their zero entries (a report may list an outcome at 0)."""
    if isinstance(value, dict):
        return {k: _normal(v) for k, v in value.items() if v != 0}
    return value


def compare_group(v: Verdict, section: str, key: str, report: dict[str, Any] | None, fig: Figures,
                  unit: float = NS_UNIT_MS, metrics: tuple[str, ...] = GROUP_METRICS,
                  quantiles: tuple[tuple[str, int], ...] = QUANTILES, counts: tuple[str, ...] = COUNT_KEYS) -> None:  # fmt: skip
    """One group: its counters, its distributions and its SLO verdicts."""
    if report is None:
        v.exact(section, key, "present", "missing", "present")
        return
    for name in counts:
        if name in report:
            v.exact(section, key, name, report[name], fig.counts[name])
    for name in metrics:
        if isinstance(report.get(name), dict):
            compare_summary(v, section, key, name, report[name], fig.values[name], unit, quantiles)
    if "itl_ms" in fig.weighted and isinstance(report.get("itl_ms"), dict):
        compare_summary(
            v,
            section,
            key,
            "itl_chunk_ms",
            report["itl_chunk_ms"],
            fig.values["itl_chunk_ms"],
            unit,
            quantiles,
        )
        compare_weighted(v, section, key, "itl_ms", report["itl_ms"], fig.weighted["itl_ms"], unit)
    compare_slo(v, section, key, report.get("slo"), fig)
    if isinstance(report.get("error_messages"), dict):
        compare_messages(v, section, key, report["error_messages"], fig.counts["outcomes"])


def compare_messages(
    v: Verdict, section: str, key: str, report: dict[str, Any], outcomes: dict[str, int]
) -> None:
    """Per failed outcome: the total is the outcome's count, and the listed messages plus
    ``other`` add up to it (the messages' texts themselves are not checked yet)."""
    failed = {k: n for k, n in outcomes.items() if k not in ("ok", "cancelled")}
    v.exact(section, key, "error_messages outcomes", sorted(report), sorted(failed))
    for outcome, n in sorted(failed.items()):
        cell = report.get(outcome) or {}
        v.exact(section, key, f"error_messages.{outcome}.total", cell.get("total"), n)
        listed = sum(m.get("count", 0) for m in cell.get("top") or []) + (cell.get("other") or 0)
        v.exact(section, key, f"error_messages.{outcome}.top + other", listed, n)


def compare_summary(v: Verdict, section: str, key: str, name: str, summary: dict[str, Any], values: list[float],
                    unit: float, quantiles: tuple[tuple[str, int], ...] = QUANTILES) -> None:  # fmt: skip
    if not summary and name in SINCE_0_3:
        return  # a report written before the figure was kept there: nothing to compare
    if "count" in summary:
        v.exact(section, key, f"{name}.count", summary["count"], len(values))
    if not values:
        for q, _ in quantiles:
            v.exact(section, key, f"{name}.{q}", summary.get(q), None)
        return
    if "mean" in summary:
        v.close(
            section, key, f"{name}.mean", summary["mean"], sum(values) / len(values), unit, relative=False
        )
        v.close(section, key, f"{name}.min", summary["min"], values[0], unit, relative=False)
        v.close(section, key, f"{name}.max", summary["max"], values[-1], unit, relative=False)
    for q, per_mille in quantiles:
        v.close(section, key, f"{name}.{q}", summary.get(q), nearest_rank(values, per_mille), unit)


def compare_weighted(v: Verdict, section: str, key: str, name: str, summary: dict[str, Any],
                     pairs: list[tuple[float, int]], unit: float) -> None:  # fmt: skip
    v.exact(section, key, f"{name}.count", summary["count"], sum(w for _, w in pairs))
    if pairs:
        for q, per_mille in QUANTILES:
            # Each weighted value is a gap divided by its tokens, rounded to 1 ns in the report.
            v.close(
                section, key, f"{name}.{q}", summary.get(q), weighted_nearest_rank(pairs, per_mille), unit * 2
            )


def compare_slo(v: Verdict, section: str, key: str, report: dict[str, Any] | None, fig: Figures) -> None:
    if fig.slo is None or report is None:
        return
    for slo_key, (met, violated, unmeasured) in fig.slo["attainment"].items():
        if slo_key in fig.slo_unknown:
            continue
        got = (report.get("attainment") or {}).get(slo_key) or {}
        for figure, mine in (("met", met), ("violated", violated), ("not_measured", unmeasured)):
            v.exact(section, key, f"slo.{slo_key}.{figure}", got.get(figure), mine)
    v.exact(section, key, "slo.judged", report.get("judged"), fig.slo["judged"])
    if not fig.slo_unknown:
        v.exact(section, key, "slo.good", report.get("good"), fig.slo["good"])
        judged = fig.slo["judged"]
        if judged:
            v.close(
                section,
                key,
                "slo.good_fraction",
                report.get("good_fraction"),
                fig.slo["good"] / judged,
                0,
                False,
            )
