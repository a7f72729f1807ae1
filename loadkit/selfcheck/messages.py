"""The words of the self-check: one place renders every message, so the console, the web
UI's warnings list and the report (which all show the same strings) say the same thing.

Each message leads with the measure that tripped, its value and its limit; then why (the
cause, with the one or two measures that show it); then what was made suspect; then what
to do. Numbers are rounded to what matters (``num``).
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from loadkit.selfcheck.verdict import (
    STALL_HINT_MS,
    SelfCheckConfig,
    Verdict,
    chance_weighed,
    client_late_shares,
)
from loadkit.selfcheck.window import Window

ADVICE = {
    "busy": "Add workers (--processes N, or --worker machines) or lower the load.",
    "starved": (
        "Free the machine: other processes took the CPU this one needed (stop them, or give "
        "loadkit a core of its own, e.g. taskset)."
    ),  # fmt: skip
    "stall": (
        "Something held this process's event loop: look for blocking work in hooks or plugins "
        "(docs/self-check.md, Stalls)."
    ),  # fmt: skip
    "server": "Nothing to do on the client: the server batches its writes.",
}
KERNEL_NOTE = (" Token timestamps are the kernel's arrival times and reads kept up, so TTFT, ITL, TPOT and E2E "
               "stand; requests went out late.")  # fmt: skip


def num(value: float) -> str:
    """A measure rounded to what a person needs: 2062.5489915 → 2063, 41.23 → 41, 5.24 →
    5.2, 0.337 → 0.34, 0.0712 → 0.071, 0.1 → 0.1."""
    size = abs(value)
    if size >= 10:
        return f"{value:.0f}"
    if size >= 1:
        return f"{value:.1f}"
    return f"{value:.2g}"


def utc(unix_s: float) -> str:
    return time.strftime("%H:%M:%S", time.gmtime(unix_s))


def tripped(reasons: Iterable[str], w: Window, cfg: SelfCheckConfig, kernel: bool) -> str:
    """The measures over their limits: value and limit, most telling first."""
    parts = []
    if "arrival_lag" in reasons:
        parts += coalescing(w, cfg, kernel)
    if "cpu" in reasons:
        parts.append(f"CPU {num(w.cpu_pct)}% of a core (limit {cfg.cpu_pct:g}%)")
    if "event_loop_lag" in reasons:
        parts.append(f"event-loop lag p99 {num(w.lag_p99_ms)} ms (limit {cfg.lag_limit_ms(kernel):g} ms)")
    return ", ".join(parts)


def _shown(value: float | None) -> str | None:
    return None if value is None else num(value)


def coalescing(w: Window, cfg: SelfCheckConfig, kernel: bool) -> list[str]:
    """The coalescing measures over their limit: token events (ITL samples) and first tokens
    (TTFT samples) that came in reads holding several — that also waited, with kernel stamps."""
    limit = f"(limit {cfg.coalesced_pct:g}%)"
    held = f"reads holding several that waited over {cfg.late_ms:g} ms" if kernel else "reads holding several"
    events, firsts = client_late_shares(w) if kernel else (w.coalesced_event_pct, w.first_coalesced_pct)
    if kernel and chance_weighed(w) and (_shown(events) != _shown(w.late_coalesced_event_pct)
                                         or _shown(firsts) != _shown(w.first_late_coalesced_pct)):  # fmt: skip
        # Weighed against chance (window.client_share): the figure quoted is what is judged.
        held += f", beyond the {num(100 * w.late_share)}% that any read did"
    parts = []
    if events is not None and events > cfg.coalesced_pct:
        parts.append(f"{num(events)}% of token events came in {held} {limit}")
    if firsts is not None and firsts > cfg.coalesced_pct:
        scope = " so far" if w.firsts_over_run else ""
        parts.append(f"{num(firsts)}% of first tokens{scope} came in {held} {limit}")
    return parts


def evidence(cause: str | None, reasons: Iterable[str], w: Window, cfg: SelfCheckConfig) -> str:
    """The measures that show the cause (not those already quoted as tripped)."""
    reasons = set(reasons)
    late = (
        ""
        if w.late_pct is None
        else f", {num(w.late_pct)}% of reads waited over {cfg.late_ms:g} ms in their socket"
    )
    if cause == "busy":
        return (
            "this process was busy"
            + ("" if "cpu" in reasons else f": CPU {num(w.cpu_pct)}% of a core")
            + late
        )
    if cause == "starved":
        pressure = "" if w.pressure_pct is None else f"; CPU pressure on the machine {num(w.pressure_pct)}%"
        return (f"other processes held the CPU: this one waited for it {num(w.wait_pct or 0)}% of the time "
                f"while using {num(w.cpu_pct)}% of a core{pressure}")  # fmt: skip
    if cause == "stall" and (w.lag_max_ms >= STALL_HINT_MS or "event_loop_lag" in reasons):
        gcs = "" if not w.full_gcs else f", {w.full_gcs} full garbage collection{'s' * (w.full_gcs > 1)}"
        return f"its event loop was held: probe lag up to {num(w.lag_max_ms)} ms{gcs}{late}"
    if cause == "stall":  # late reads alone: stretches too short for the probe to catch
        return f"its reads fell behind{late.replace(',', ':', 1)} (CPU {num(w.cpu_pct)}% of a core, probe lag up to {num(w.lag_max_ms)} ms)"
    if cause == "server":
        return on_time(w)
    return ""


def on_time(w: Window) -> str:
    wait = "" if w.wait_pct is None else f", waited for a CPU {num(w.wait_pct)}% of the time"
    late = "" if w.late_pct is None else f", {num(w.late_pct)}% of reads late"
    if w.late_pct is not None and w.late_pct >= 1.0 and w.coalesced_event_pct:
        # Reads that wait as often as any (a step's reads queue up) did not make the coalescing.
        share = 100 * (w.late_coalesced_event_pct or 0.0) / w.coalesced_event_pct
        late += f" and {num(share)}% of those holding several"
    return f"this process was on time (CPU {num(w.cpu_pct)}% of a core, probe lag up to {num(w.lag_max_ms)} ms{wait}{late})"


def onset(node: str, from_unix: float, v: Verdict, w: Window, cfg: SelfCheckConfig, kernel: bool,
          suspect: list[str]) -> str:  # fmt: skip
    message = (f"client saturated on {node} from {utc(from_unix)} UTC (unix {from_unix:.0f}): "
               f"{tripped(v.reasons, w, cfg, kernel)}; {evidence(v.cause, v.reasons, w, cfg)}. "
               f"Suspect from then on: {', '.join(suspect)}.")  # fmt: skip
    if kernel and not v.suspect & {"ttft_ms", "itl_ms"}:
        message += KERNEL_NOTE
    return f"{message} {ADVICE[v.cause or 'busy']}"


def worse(node: str, at_unix: float, v: Verdict, w: Window, cfg: SelfCheckConfig, kernel: bool,
          suspect: list[str]) -> str:  # fmt: skip
    return (
        f"client saturation on {node} worse at {utc(at_unix)} UTC: {tripped(v.reasons, w, cfg, kernel)}; "
        f"{evidence(v.cause, v.reasons, w, cfg)}. Suspect now: {', '.join(suspect)}. {ADVICE[v.cause or 'busy']}"
    )


def server_note(node: str, at_unix: float, w: Window, cfg: SelfCheckConfig) -> str:
    """Coalescing over its limit while the client was on time: a property of the server's
    output, said once (console and manifest), never a saturation warning."""
    over = [(pct, what) for pct, what in ((w.coalesced_event_pct, "token events"),
                                          (w.first_coalesced_pct, "first tokens"))
            if pct is not None and pct > cfg.coalesced_pct]  # fmt: skip
    pct, what = over[0] if over else (w.coalesced_event_pct or 0.0, "token events")
    return (
        f"server output seen on {node} from {utc(at_unix)} UTC: {num(pct)}% of {what} came in reads holding "
        f"several token events, written together by the server, while {on_time(w)}. Those events arrived "
        f"together, so their timestamps are right (ITL samples near 0 are the server's). {ADVICE['server']}"
    )


def summary(node: str, windows: int, saturated: int, span: tuple[float, float], worst: str, causes: list[str],
            suspect: list[str]) -> str:  # fmt: skip
    advice = " ".join(ADVICE[c] for c in causes)
    return (
        f"client saturation summary ({node}): saturated in {saturated} of {windows} windows from "
        f"{utc(span[0])} to {utc(span[1])} UTC (unix {span[0]:.0f}-{span[1]:.0f}): {worst}; cause: "
        f"{', '.join(causes)}; suspect: {', '.join(suspect)}. {advice}"
    )
