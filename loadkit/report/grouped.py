"""report.html's tables per sweep stage, input-length bucket and session turn.

Every figure here is read from report.json's sections (stats/stagestats.py, lengthstats.py,
sessionstats.py): nearest-rank percentiles of exact-merge histograms fed the engine sections'
integer-ns values, all workers merged. The raw log is not read, so the page and report.json
cannot show two different p50s for one group (issue 31: they once interpolated the raw log).
"""

from __future__ import annotations

from typing import Any

from loadkit.report.htmlutil import not_measured, note, num, pct, section, table
from loadkit.report.svg import Bars, Series, bar_plot, color, line_plot
from loadkit.report.tables import TTFAT_HEAD, TTFAT_NOTE, shows_ttfat, with_ttfat
from loadkit.stats.lengthstats import INPUT_BUCKETS

METHOD = "Percentiles: nearest rank on report.json's histograms (≤ 0.1 % bucket error), as everywhere in the report."
STAGE_HEAD = ("engine", "stage", "level", "requests", "ok", "duration s", "ok req/s", "output tok/s", "TTFT p50",
              "TTFT p90", "TTFT p99", "TPOT p50")  # fmt: skip
BUCKET_HEAD = (
    "engine",
    "input tokens",
    "requests",
    "ok",
    "TTFT p50",
    "TTFT p99",
    "TPOT p50",
    "TPOT p99",
    "E2E p50",
)
TURN_HEAD = ("engine", "turn", "ok requests", "TTFT p50", "TTFT p90", "TTFT p99")


def _q(stats: dict[str, Any] | None, metric: str, q: str) -> float | None:
    summary = (stats or {}).get(metric)
    return summary.get(q) if isinstance(summary, dict) else None


def _dicts(value: Any) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in value.items() if isinstance(v, dict)} if isinstance(value, dict) else {}


def _rows_per_engine(sections: Any, key: str, seen: str | None = None) -> dict[str, list[dict[str, Any]]]:
    """Per engine, the dict rows under ``key`` of its section (only those with ``seen`` set,
    when given); engines without any are left out."""
    out = {}
    for engine, sec in _dicts(sections).items():
        rows = [r for r in sec.get(key) or [] if isinstance(r, dict) and (seen is None or r.get(seen))]
        if rows:
            out[engine] = rows
    return out


def stage_rows(report: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Per engine, report.json's planned stages that saw requests, in plan order."""
    return _rows_per_engine(report.get("stages"), "stages", seen="stats")


def stages_section(report: dict[str, Any]) -> str:
    title = "Latency–throughput over sweep stages"
    per_engine = stage_rows(report)
    if not per_engine:
        return section("stages", title, not_measured("latency-throughput", "the run had no arrival stages "
                                                     "(report.json's stages section is empty)"))  # fmt: skip
    series, rows = [], []
    reasoning = shows_ttfat(report)  # then TTFAT p50, p90, p99 after TTFT's
    for i, (engine, stages) in enumerate(per_engine.items()):
        pts = [r for r in stages if not r.get("warmup") and r["stats"].get("output_tokens_per_s") is not None
               and _q(r["stats"], "ttft_ms", "p99") is not None]  # fmt: skip
        xs = [r["stats"]["output_tokens_per_s"] for r in pts]
        series += [Series(f"{engine} TTFT p50", xs, [_q(r["stats"], "ttft_ms", "p50") for r in pts], i, markers=True),
                   Series(f"{engine} TTFT p99", xs, [_q(r["stats"], "ttft_ms", "p99") for r in pts], i, True, True)]  # fmt: skip
        for r in stages:
            s = r["stats"]
            rows.append([engine, r.get("name", "") + (" (warm-up)" if r.get("warmup") else ""), num(r.get("level")),
                         num(s.get("requests")), num(s.get("ok")), num(r.get("duration_s")),
                         num(s.get("requests_per_s"), 2), num(s.get("output_tokens_per_s")),
                         *(num(_q(s, "ttft_ms", q)) for q in ("p50", "p90", "p99")),
                         *(num(_q(s, "ttfat_ms", q)) for q in ("p50", "p90", "p99") if reasoning),
                         num(_q(s, "tpot_ms", "p50"))])  # fmt: skip
    plot = line_plot("latency-throughput", "TTFT vs achieved output tokens/s, one point per stage", series,
                     "output tokens/s achieved in the stage", "TTFT ms", y_lo=0.0)  # fmt: skip
    single = (note("Only one stage: a single point; sweep stages draw the curve.")
              if all(len(r) == 1 for r in per_engine.values()) else "")  # fmt: skip
    how = note(
        "Requests by the stage they were sent in; rates over the stage's planned duration. "
        + (TTFAT_NOTE if reasoning else "")
        + METHOD
    )
    return section(
        "stages", title, plot, single, how, table(with_ttfat(STAGE_HEAD, TTFAT_HEAD, reasoning), rows)
    )


def bucket_rows(report: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Per engine, report.json's lengths.by_target.<engine>.by_input_tokens (buckets with requests)."""
    return _rows_per_engine((report.get("lengths") or {}).get("by_target"), "by_input_tokens")


def buckets_section(report: dict[str, Any]) -> str:
    title = "Percentiles per input-length bucket"
    per_engine = bucket_rows(report)
    labels = [
        b for _, b in INPUT_BUCKETS if any(r.get("bucket") == b for rows in per_engine.values() for r in rows)
    ]
    if not labels:
        return section("buckets", title, not_measured("length-buckets", "no request with a known input length "
                                                      "(report.json's lengths.by_target.*.by_input_tokens)"))  # fmt: skip
    groups, rows = [], []
    reasoning = shows_ttfat(report)  # then TTFAT p50, p99 after TTFT's
    for i, (engine, brows) in enumerate(per_engine.items()):
        by = {r.get("bucket"): r for r in brows}
        groups += [Bars(f"{engine} TTFT p50", [_q(by.get(b), "ttft_ms", "p50") for b in labels], color(i)),
                   Bars(f"{engine} TTFT p99", [_q(by.get(b), "ttft_ms", "p99") for b in labels], color(i), 0.45)]  # fmt: skip
        rows += [[engine, r.get("bucket"), num(r.get("requests")), num(r.get("ok")), num(_q(r, "ttft_ms", "p50")),
                  num(_q(r, "ttft_ms", "p99")), *(num(_q(r, "ttfat_ms", q)) for q in ("p50", "p99") if reasoning),
                  num(_q(r, "tpot_ms", "p50")), num(_q(r, "tpot_ms", "p99")),
                  num(_q(r, "e2e_ms", "p50"))] for r in brows]  # fmt: skip
    plot = bar_plot("length-buckets", "TTFT by input length (tokens)", labels, groups, "TTFT ms")
    how = note(
        "Buckets by the server's prompt token count; latencies of the ok requests. "
        + (TTFAT_NOTE if reasoning else "")
        + METHOD
    )
    head = with_ttfat(BUCKET_HEAD, ("TTFAT p50", "TTFAT p99"), reasoning)
    return section("buckets", title, plot, how, table(head, rows))


TurnRow = tuple[int, int, float | None, float | None, float | None]


def _turns(sec: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Numbered turns (the shared ``32+`` bucket has no place on a turn axis)."""
    return {str(t): v for t, v in _dicts(sec.get("turns")).items() if str(t).isdigit()}


def turn_rows(report: dict[str, Any]) -> dict[str, list[TurnRow]]:
    """Per engine: (turn, ok requests with a first token, TTFT p50, p90, p99) from report.json's sessions."""
    out: dict[str, list[TurnRow]] = {}
    for engine, sec in _dicts(report.get("sessions")).items():
        rows: list[TurnRow] = []
        for t, v in sorted(_turns(sec).items(), key=lambda kv: int(kv[0])):
            found = v.get("ttft_ms")
            ttft: dict[str, Any] = found if isinstance(found, dict) else {}
            rows.append(
                (int(t), int(ttft.get("count") or 0), ttft.get("p50"), ttft.get("p90"), ttft.get("p99"))
            )
        if rows:
            out[engine] = rows
    return out


def turns_section(report: dict[str, Any]) -> str:
    title = "TTFT per session turn"
    per_engine = turn_rows(report)
    sessions = _sessions_table(report)
    if not per_engine:
        return section("turns", title, not_measured("ttft-turn", "the run had no multi-turn sessions "
                                                    "(report.json's sessions section is empty)"), sessions)  # fmt: skip
    series, rows = [], []
    reasoning = shows_ttfat(report)  # then TTFAT p50, p90, p99 after TTFT's
    for i, (engine, trows) in enumerate(per_engine.items()):
        series += [Series(f"{engine} p50", [t[0] for t in trows], [t[2] for t in trows], i, markers=True),
                   Series(f"{engine} p90", [t[0] for t in trows], [t[3] for t in trows], i, True, True)]  # fmt: skip
        turns = _turns(_dicts(report.get("sessions"))[engine])
        rows += [[engine, num(t[0]), num(t[1]), num(t[2]), num(t[3]), num(t[4]),
                  *(num(_q(turns.get(str(t[0])), "ttfat_ms", q)) for q in ("p50", "p90", "p99") if reasoning)]
                 for t in trows]  # fmt: skip
    plot = line_plot("ttft-turn", "TTFT by turn index (later turns should hit the prefix cache)", series,
                     "turn", "TTFT ms", y_lo=0.0, x_integer=True)  # fmt: skip
    return section("turns", title, plot,
                   note("From report.json's sessions section. " + (TTFAT_NOTE if reasoning else "") + METHOD),
                   table(with_ttfat(TURN_HEAD, TTFAT_HEAD, reasoning), rows), sessions)  # fmt: skip


def _sessions_table(report: dict[str, Any]) -> str:
    """Session outcomes and prefix-cache ratios per turn, from the report's sessions section."""
    sessions = _dicts(report.get("sessions"))
    rows = []
    for engine, sec in sessions.items():
        for t, v in sorted(_turns(sec).items(), key=lambda kv: int(kv[0])):
            rows.append([engine, str(t), num(v.get("requests")), num(v.get("ok")),
                         pct(v.get("prefix_expected_ratio")), pct(v.get("prefix_reported_ratio"))])  # fmt: skip
    if not rows:
        return ""
    summary = "; ".join(f"{e}: {v.get('sessions')} sessions, {v.get('completed')} completed, {v.get('broken')} broken"
                        for e, v in sessions.items())  # fmt: skip
    return note(summary) + table(
        ("engine", "turn", "requests", "ok", "prefix expected", "prefix reported (cached)"), rows
    )
