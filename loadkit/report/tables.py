"""Report sections that are mostly tables: summary, SLOs, outcomes, manifest, warnings, definitions."""

from __future__ import annotations

from typing import Any

import orjson

from loadkit.report.console import saw_reasoning
from loadkit.report.htmlutil import NOT_MEASURED, macro, not_measured, note, num, pct, section, table
from loadkit.report.redact import redact
from loadkit.report.svg import Bars, bar_plot, color

SUMMARY_HEAD = ("engine", "label", "requests", "ok", "failed", "cancelled", "ended by close", "req/s", "output tok/s",
                "goodput req/s",
                "TTFT p50", "TTFT p90", "TTFT p99", "TPOT p50", "TPOT p90", "TPOT p99", "ITL p50", "ITL p99",
                "E2E p50", "E2E p99", "n_out source")  # fmt: skip
LATENCY_CELLS = (("ttft_ms", "p50"), ("ttft_ms", "p90"), ("ttft_ms", "p99"), ("tpot_ms", "p50"), ("tpot_ms", "p90"),
                 ("tpot_ms", "p99"), ("itl_ms", "p50"), ("itl_ms", "p99"), ("e2e_ms", "p50"), ("e2e_ms", "p99"))  # fmt: skip
# Time to first answer token, beside TTFT when the run saw reasoning (whose first token TTFT is).
TTFAT_HEAD = ("TTFAT p50", "TTFAT p90", "TTFAT p99")
TTFAT_CELLS = (("ttfat_ms", "p50"), ("ttfat_ms", "p90"), ("ttfat_ms", "p99"))
TTFAT_NOTE = ("TTFT is the first token of any kind, reasoning included; TTFAT the first answer token "
              "(what the user waits for). ")  # fmt: skip


def shows_ttfat(report: dict[str, Any]) -> bool:
    """The page shows TTFAT beside TTFT when the run saw reasoning, as the console does."""
    return saw_reasoning({"engines": engines_of(report)})


def with_ttfat(items: tuple[Any, ...], ttfat: tuple[Any, ...], reasoning: bool) -> tuple[Any, ...]:
    """``items`` (a table's head, or its cells) with ``ttfat`` right after TTFT p99, when ``reasoning``."""
    if not reasoning:
        return items
    at = items.index("TTFT p99" if "TTFT p99" in items else ("ttft_ms", "p99")) + 1
    return (*items[:at], *ttfat, *items[at:])


def engines_of(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    engines = report.get("engines")
    return engines if isinstance(engines, dict) else {}


def stat(section: dict[str, Any], metric: str, name: str) -> Any:
    summary = section.get(metric)
    return summary.get(name) if isinstance(summary, dict) else None


def cancelled_of(s: dict[str, Any]) -> int:
    return int(s.get("cancelled", (s.get("outcomes") or {}).get("cancelled", 0)) or 0)


def failed_of(s: dict[str, Any]) -> int | None:
    """Failed requests, cancelled ones (stopped by the test) not among them. Reports written
    before ``cancelled`` was a field counted them in ``failures``."""
    failures = s.get("failures")
    if failures is None or "cancelled" in s:
        return failures
    return int(failures) - cancelled_of(s)


def _summary_row(engine: str, label: str, s: dict[str, Any], cells: tuple[tuple[str, str], ...]) -> list[str]:
    sources = s.get("n_out_sources") or {}
    ends = s.get("stream_ends")
    closed = None if ends is None else ends.get("close", 0)
    out = [engine, label, num(s.get("requests")), num(s.get("ok")), num(failed_of(s)),
           num(cancelled_of(s)), num(closed), num(s.get("requests_per_s"), 2), num(s.get("output_tokens_per_s")),
           num(s.get("goodput_per_s"), 2)]  # fmt: skip
    out += [num(stat(s, m, p)) for m, p in cells]
    out.append(", ".join(f"{k}: {v}" for k, v in sources.items()) or NOT_MEASURED)
    return out


def summary_section(report: dict[str, Any]) -> str:
    engines = engines_of(report)
    if not engines:
        return section("summary", "Summary", not_measured("summary", "the report has no engine sections"))
    reasoning = shows_ttfat(report)
    cells = with_ttfat(LATENCY_CELLS, TTFAT_CELLS, reasoning)
    rows = []
    for engine, s in engines.items():
        rows.append(_summary_row(engine, "(all)", s, cells))
        for label, sub in (s.get("labels") or {}).items():
            rows.append(_summary_row(engine, label, sub, cells))
    head = with_ttfat(SUMMARY_HEAD, TTFAT_HEAD, reasoning)
    return section("summary", "Summary per engine and label",
                   note("Latencies in ms over ok requests; rates over each engine's measured window; "
                        "cancelled = stopped by the test, not failed; ended by close = ok streams that ended "
                        "with a clean close after the last message instead of the protocol's end marker; "
                        f"{TTFAT_NOTE if reasoning else ''}{NOT_MEASURED} = not measured."),
                   table(head, rows, "summary ttfat" if reasoning else "summary"))  # fmt: skip


CONNECTION_HEAD = ("engine", "new connections", "TCP connect p50", "TCP connect p99", "TLS handshake p50",
                   "TLS handshake p99", "TTFT p99", "TTFT with connect p99")  # fmt: skip


def connections_section(report: dict[str, Any]) -> str:
    """Connection set-up, which TTFT leaves out: per new connection, and TTFT with it put back."""
    rows = []
    for engine, s in engines_of(report).items():
        rows.append([engine, num(stat(s, "connect_ms", "count")), num(stat(s, "connect_ms", "p50")),
                     num(stat(s, "connect_ms", "p99")), num(stat(s, "tls_ms", "p50")), num(stat(s, "tls_ms", "p99")),
                     num(stat(s, "ttft_ms", "p99")), num(stat(s, "ttft_with_connect_ms", "p99"))])  # fmt: skip
    if not rows:
        return section(
            "connections", "Connections", not_measured("connections", "the report has no engine sections")
        )
    return section("connections", "Connection set-up",
                   note("TTFT and E2E start when the request is written, after any TCP connect and TLS handshake; "
                        "those are timed per new connection (none for a reused keep-alive connection), over every "
                        f"outcome. TTFT with connect puts them back. ms; {NOT_MEASURED} = not measured "
                        "(e.g. no TLS handshake on plain-HTTP targets)."),
                   table(CONNECTION_HEAD, rows, "connections"))  # fmt: skip


def _slo_rows(engine: str, slo: dict[str, Any]) -> list[list[str]]:
    rows = []
    for key, a in (slo.get("attainment") or {}).items():
        rows.append([engine, key, num(a.get("limit_ms")), num(a.get("met")), num(a.get("violated")),
                     num(a.get("not_measured")), pct(a.get("attainment"))])  # fmt: skip
    rows.append([engine, macro("bold", "all SLOs (goodput)"), "", num(slo.get("good")),
                 num(_minus(slo.get("judged"), slo.get("good"))), "", pct(slo.get("good_fraction"))])  # fmt: skip
    return rows


def _minus(a: int | None, b: int | None) -> int | None:
    return None if a is None or b is None else a - b


def slo_section(report: dict[str, Any]) -> str:
    engines: dict[str, dict[str, Any]] = {
        e: s["slo"] for e, s in engines_of(report).items() if isinstance(s.get("slo"), dict)
    }
    if not engines:
        return section(
            "slo",
            "SLO attainment and goodput",
            not_measured("slo", "no SLO was given (--slo ttft_ms=500 ...)"),
        )
    rows = [r for e, slo in engines.items() for r in _slo_rows(e, slo)]
    keys = list(dict.fromkeys(k for slo in engines.values() for k in (slo.get("attainment") or {})))
    groups = []
    for i, (engine, slo) in enumerate(engines.items()):
        att = slo.get("attainment") or {}
        values = [_pct_or_none((att.get(k) or {}).get("attainment")) for k in keys]
        groups.append(Bars(engine, values + [_pct_or_none(slo.get("good_fraction"))], color(i)))
    plot = bar_plot(
        "slo-attainment", "SLO attainment (% of judged requests)", keys + ["all (goodput)"], groups, "%"
    )
    goodput = [f"{e}: {num(s.get('goodput_per_s'), 2)} req/s" for e, s in engines.items()]
    return section("slo", "SLO attainment and goodput", note("Goodput = requests/s meeting every SLO. " + "; ".join(goodput)),
                   table(("engine", "SLO", "limit ms", "met", "violated", "not measured", "attainment"), rows), plot)  # fmt: skip


def _pct_or_none(v: float | None) -> float | None:
    return None if v is None else 100.0 * v


def outcomes_section(report: dict[str, Any]) -> str:
    engines = {e: s.get("outcomes") or {} for e, s in engines_of(report).items()}
    names = sorted({o for outs in engines.values() for o in outs}, key=lambda o: (o != "ok", o))
    if not names:
        return section("outcomes", "Outcomes", not_measured("outcomes", "no requests were recorded"))
    groups = [
        Bars(o, [float(outs.get(o, 0)) for outs in engines.values()], outcome_color(o, i))
        for i, o in enumerate(names)
    ]
    plot = bar_plot(
        "outcomes", "Outcome of every request, per engine", list(engines), groups, "requests", stacked=True
    )
    rows = [[e] + [num(outs.get(o, 0)) for o in names] for e, outs in engines.items()]
    cons = report.get("conservation") or {}
    text = (f"Conservation (scheduled = sent + dropped, sent = Σ outcomes): "
            f"{'holds' if cons.get('holds') else 'DOES NOT HOLD' if cons else 'not recorded'}; {_cons_text(cons)}")  # fmt: skip
    return section("outcomes", "Outcomes", table(["engine", *names], rows), plot, note(text))


def _message_rows(engine: str, messages: dict[str, Any]) -> list[list[str]]:
    rows = []
    for outcome, entry in sorted(messages.items(), key=lambda kv: (-kv[1].get("total", 0), kv[0])):
        for item in entry.get("top") or []:
            # A row whose texts differed in numbers or ids only: its example, said to be one.
            example = macro("code", str(item.get("message")))
            rows.append(
                [
                    engine,
                    outcome,
                    num(item.get("count")),
                    "e.g. " + example if item.get("varied") else example,
                ]
            )
        if entry.get("other"):
            rows.append([engine, outcome, num(entry["other"]), macro("italic", "other messages")])
    return rows


def errors_section(report: dict[str, Any]) -> str:
    """What the server said (status and body, in-band error, connect error) per failed outcome."""
    rows = [r for e, s in engines_of(report).items() for r in _message_rows(e, s.get("error_messages") or {})]
    if not rows:
        has_field = any("error_messages" in s for s in engines_of(report).values())
        why = "no request failed" if has_field else "this report has no error_messages (older loadkit)"
        return section("errors", "Why requests failed", not_measured("errors", why))
    return section("errors", "Why requests failed",
                   note("The server's own words, most frequent first, per engine and outcome: HTTP status "
                        "and the first 300 characters of the body, the in-band error, or the connect error. "
                        "Messages that differ only in numbers and ids count as one row, shown by an example "
                        "(e.g.)."),
                   table(("engine", "outcome", "requests", "message"), rows, "messages"),
                   *_adapter_tracebacks(report))  # fmt: skip


def _adapter_tracebacks(report: dict[str, Any]) -> list[Any]:
    """The first traceback of each kind of adapter_error (report.json ``adapter_errors``), folded."""
    out = []
    for kind in (report.get("adapter_errors") or {}).get("kinds") or []:
        if kind.get("traceback"):
            summary = f"adapter_error ×{kind.get('count')} on {kind.get('engine')}: the first one's traceback"
            out.append(macro("details", summary, macro("pre", str(redact(str(kind["traceback"]))))))
    return out


def outcome_color(outcome: str, index: int) -> str:
    """ok green, cancelled grey (test stopped), everything else a warm colour."""
    fixed = {"ok": "#2ca02c", "cancelled": "#9e9e9e"}
    warm = ("#d62728", "#ff7f0e", "#8c564b", "#e377c2", "#bcbd22", "#9467bd")
    return fixed.get(outcome, warm[index % len(warm)])


def _cons_text(cons: dict[str, Any]) -> str:
    keys = ("scheduled", "sent", "dropped", "outcomes_total")
    return ", ".join(f"{k} {NOT_MEASURED if cons.get(k) is None else cons.get(k)}" for k in keys)


def flatten(value: Any, prefix: str = "", depth: int = 0) -> list[tuple[str, str]]:
    """(dotted key, text) pairs; deep or long values are shown as compact JSON."""
    if isinstance(value, dict) and value and depth < 3:
        return [
            p for k, v in value.items() for p in flatten(v, f"{prefix}.{k}" if prefix else str(k), depth + 1)
        ]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return [(prefix, " ".join(value))]
    if isinstance(value, str):
        return [(prefix, value)]
    text = orjson.dumps(
        value, option=orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY, default=str
    ).decode()
    return [(prefix, text if len(text) < 600 else text[:600] + " …")]
