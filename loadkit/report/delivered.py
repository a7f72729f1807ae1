"""The report's "Delivered load" section: asked vs realised arrivals, fit test, concurrency, lengths."""

from __future__ import annotations

from typing import Any

from loadkit.report.htmlutil import NOT_MEASURED, macro, not_measured, note, num, pct, section, table
from loadkit.report.servegenwindows import windows_parts

TITLE = "Delivered load (asked vs realised)"
HEAD = (
    "target",
    "stage",
    "arrivals",
    "model",
    "rate asked /s",
    "rate realised /s",
    "rate error",
    "CV asked",
    "CV realised",
    "fit test",
    "resolution ms",
    "D",
    "p",
    "as asked?",
    "in flight peak",
    "in flight mean",
    "note",
)


def delivered_section(report: dict[str, Any]) -> str:
    data = report.get("delivered")
    if not data or not data.get("by_target"):
        return section(
            "delivered", TITLE, not_measured("delivered load", "this report has no delivered section")
        )
    rows, length_rows, share_rows = [], [], []
    for engine, target in data["by_target"].items():
        rows += [_row(engine, stage, r) for stage, r in target["stages"].items()]
        length_rows += _length_rows(engine, target.get("lengths"))
        share = (target.get("lengths") or {}).get("reasoning_share")
        if share:  # a trace with an expected reasoning split (ServeGen reason_ratio)
            error = share.get("error")
            points = NOT_MEASURED if error is None else f"{100 * error:+.1f}"
            share_rows.append([engine, pct(share.get("expected")), pct(share.get("realised")), points,
                               str(share.get("note") or "")])  # fmt: skip
    alpha = data.get("alpha", 0.01)
    parts = [
        table(HEAD, rows),
        note(
            f"Realised rate and CV from the merged send times of scheduled requests; the fit test "
            f"(Kolmogorov–Smirnov) compares the realised gaps with the asked distribution, both "
            f"floored to the client's scheduling resolution (1 ms, or the schedule-lag p99 if larger); "
            f'"as asked?" is no when p < {alpha}. Each target is judged by the arrival process of '
            f'the user classes that sent to it; "not asked" where loadkit does not know their pacing.'
        ),
    ]
    parts += windows_parts(data)
    if length_rows:
        parts.append(
            table(
                ("target", "tokens", "asked mean", "realised mean", "asked p50", "realised p50"), length_rows
            )
        )
    if share_rows:
        parts.append(
            table(("target", "reasoning share expected", "realised", "error (points)", "note"), share_rows)
        )
        parts.append(
            note(
                "Expected: the share of the asked output the trace's reason_ratio says was reasoning; realised: "
                "the reasoning tokens the target streamed over its output tokens (both token-weighted, over ok "
                "requests with a reasoning count). A real server decides its own reasoning length: the "
                "comparison is not enforced."
            )
        )
    return section("delivered", TITLE, *parts)


def _row(engine: str, stage: str, r: dict[str, Any]) -> list[str]:
    asked, got, fit, conc = r["asked"], r["realised"], r["fit"], r["concurrency"]
    # A ServeGen stage's asked is the synthesised schedule: its fit says the client sent that, no more.
    said = " (as synthesised; per window below)" if r.get("servegen") else ""
    verdict = (
        NOT_MEASURED
        if fit.get("test") is None
        else (macro("verdict", fit["consistent"], ("yes" if fit["consistent"] else "no") + said))
    )
    test = fit["test"] if fit.get("test") else fit.get("reason", "")
    return [
        engine,
        stage,
        num(r.get("arrivals")),
        _model(asked),
        num(asked.get("rate"), 2),
        num(got.get("rate"), 2),
        pct(r.get("rate_error")),
        num(asked.get("cv"), 2),
        num(got.get("cv"), 2),
        test,
        num(fit.get("resolution_ms"), 0),
        num(fit.get("statistic"), 3),
        num(fit.get("p_value"), 3),
        verdict,
        num(conc.get("peak")),
        num(conc.get("mean"), 1),
        str(asked.get("note") or asked.get("reason") or ""),
    ]


def _model(asked: dict[str, Any]) -> str:
    """The asked process in words: a closed loop's (or a shape step's) users, a ramp's ends."""
    model = str(asked.get("model"))
    if model == "closed" and asked.get("users") is not None:
        kind = "constant users" if asked.get("stage_kind") else "closed loop"
        return f"{kind}: {asked['users']}"
    if asked.get("ramp"):
        return f"{model} ramp {asked['ramp'][0]:g}→{asked['ramp'][1]:g}/s"
    return model


def _length_rows(engine: str, lengths: dict[str, Any] | None) -> list[list[str]]:
    if not lengths:
        return []
    return [
        [
            engine,
            name,
            num(v["asked_mean"]),
            num(v["realised_mean"]),
            num(v["asked_p50"]),
            num(v["realised_p50"]),
        ]
        for name, v in lengths.items()
        if name != "reasoning_share"  # its own table (delivered_section)
    ]
