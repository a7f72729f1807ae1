"""The "Delivered load" section's per-window table of a ServeGen replay (stats/servegenwindows.py):
per ServeGen window the file's rate and CV, the synthesised schedule's and the realised sends'."""

from __future__ import annotations

from typing import Any

from loadkit.report.htmlutil import NOT_MEASURED, macro, note, num, table

HTML_WINDOWS = 24  # rows per stage; the rest are counted in a last row (report.json has them all)
HEAD = (
    "target / stage",
    "window s",
    "part",
    "covered s",
    "file rate /s",
    "file CV",
    "synthesised arrivals",
    "synthesised rate /s",
    "synthesised CV",
    "realised arrivals",
    "realised rate /s",
    "realised CV",
    "synthesis = file?",
    "sent as synthesised?",
    "note",
)


def windows_parts(data: dict[str, Any]) -> list[Any]:
    """The table and its note, or nothing when no stage is a ServeGen replay."""
    rows, verdicts, least, tol = [], [], None, None
    for engine, target in data["by_target"].items():
        for stage, r in target["stages"].items():
            sg = r.get("servegen")
            if not sg:
                continue
            least, tol = sg["min_arrivals"], sg["cv_tolerance"]
            verdicts.append(f"{engine}/{stage}: {sg['verdict']}.")
            rows += [_row(f"{engine} / {stage}", w) for w in sg["windows"][:HTML_WINDOWS]]
            more = len(sg["windows"]) - HTML_WINDOWS
            if more > 0:
                rows.append([f"{engine} / {stage}", f"… {more} more windows (report.json delivered)"]
                            + [""] * (len(HEAD) - 2))  # fmt: skip
    if not rows:
        return []
    return [
        table(HEAD, rows),
        note(
            "ServeGen replay, per 600 s window of the file: asked (file) is the window's rate (× the trace's "
            "speed) and CV as written; synthesised is the schedule loadkit made from them and sent as the "
            "stage's asked; realised is what the client sent (the k-th scheduled send is the k-th synthesised "
            'arrival). Rates are arrivals / covered seconds. "sent as synthesised?" judges the client '
            f'(two-sample KS of the gaps, and every arrival sent); "synthesis = file?" judges the synthesis '
            f"(CV within {tol:.0%} of the file's). Windows with fewer than {least} synthesised arrivals are "
            "reported, not judged. " + " ".join(verdicts)
        ),
    ]


def _row(key: str, w: dict[str, Any]) -> list[Any]:
    f, s, g = w["file"], w["synthesised"], w["realised"]
    faithful: Any
    sent: Any
    if w["judged"]:
        synth = w["synthesis"]["faithful"]
        client = w["client"]["consistent"]
        faithful = macro("verdict", synth, "yes" if synth else "no")
        sent = NOT_MEASURED if client is None else macro("verdict", client, "yes" if client else "no")
        why = w["synthesis"].get("reason", "")
    else:
        faithful = sent = NOT_MEASURED
        why = w.get("reason", "")
    return [key, num(w["start_s"], 0), w["part"], num(w["covered_s"], 3), num(f["rate"], 3), num(f["cv"], 2),
            num(s["arrivals"]), num(s["rate"], 3), num(s["cv"], 2), num(g["arrivals"]), num(g["rate"], 3),
            num(g["cv"], 2), faithful, sent, why]  # fmt: skip
