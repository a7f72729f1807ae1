"""A ServeGen replay's per-window delivered figures (stats/servegenwindows.py) on the shipped
sample: scenarios/servegen_language.toml, a smooth Gamma window then a bursty Weibull one."""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np
import pytest

from loadkit.report.console import delivered_lines
from loadkit.report.delivered import delivered_section
from loadkit.stats.askedcontext import servegen_context
from loadkit.stats.delivered import DeliveredLoad
from loadkit.stats.servegenwindows import CONSOLE_WINDOWS, MIN_ARRIVALS, console_lines, windows_table
from loadkit.workload import servegen
from loadkit.workload.paths import PACKAGE_DATA
from loadkit.workload.scenario import load_scenario
from loadkit.workload.source import RequestSource

SCENARIO = "scenarios/servegen_language.toml"


@dataclass
class Rec:
    engine: str
    stage: str | None
    t_send_ns: int
    t_end_ns: int | None
    t_sched_ns: int | None


@pytest.fixture(scope="module")
def replay():
    scenario = load_scenario(SCENARIO)
    offsets = RequestSource(scenario).trace_arrival_times_s()
    return scenario, offsets


def _report(scenario, offsets, covered_s=None, lag_ns=300_000):
    """The delivered section of a client that sent every slot ``lag_ns`` late."""
    d = DeliveredLoad()
    d.wall_offset_ns = 0
    t0 = 10**12
    for x in offsets:
        sched = t0 + int(x * 1e9)
        d.add(Rec("sim", "trace", sched + lag_ns, sched + lag_ns + 5_000_000, sched))
    context = {
        "arrival": {"model": "trace"},
        "offsets": offsets,
        "servegen": servegen_context(scenario.trace),
    }
    if covered_s is not None:
        context["covered_s"] = covered_s
    return {"delivered": d.report(lambda _t, _c: context)}


def test_per_window_file_synthesised_and_realised(replay):
    scenario, offsets = replay
    report = _report(scenario, offsets)
    table = report["delivered"]["by_target"]["sim"]["stages"]["trace"]["servegen"]
    smooth, bursty = table["windows"]
    assert [w["start_s"] for w in (smooth, bursty)] == [157200.0, 157800.0]
    assert smooth["part"] == bursty["part"] == "full" and smooth["covered_s"] == 600.0
    # asked (file): the CSV's row as written.
    assert smooth["file"] == {"rate": pytest.approx(5.14333, abs=1e-5), "cv": pytest.approx(1.18337, abs=1e-5),
                              "family": "Gamma"}  # fmt: skip
    assert bursty["file"]["cv"] == pytest.approx(36.689, abs=1e-3) and bursty["file"]["family"] == "Weibull"
    # synthesised: round(rate × 600) arrivals; the Gamma keeps its CV, the Weibull does not.
    assert smooth["synthesised"]["arrivals"] == round(5.143333333333334 * 600) == 3086
    assert bursty["synthesised"]["arrivals"] == round(3.2983333333333333 * 600) == 1979
    assert smooth["synthesised"]["cv"] == pytest.approx(1.197, abs=1e-3)
    assert bursty["synthesised"]["cv"] == pytest.approx(19.18, abs=0.01)
    assert smooth["synthesis"]["faithful"] and not bursty["synthesis"]["faithful"]
    assert bursty["synthesis"]["cv_ceiling"] == pytest.approx(np.sqrt(1978))
    # realised: every slot sent, 0.3 ms late: the client sent the synthesised schedule.
    for w in (smooth, bursty):
        assert w["realised"]["arrivals"] == w["synthesised"]["arrivals"]
        assert w["realised"]["rate"] == pytest.approx(w["synthesised"]["rate"])
        assert w["realised"]["cv"] == pytest.approx(w["synthesised"]["cv"], rel=1e-3)
        assert w["client"]["consistent"] is True
    assert table["synthesis_far"] == [157800.0] and table["client_missed"] == []
    assert "NOT as the file asks" in table["verdict"] and "file CV 36.7, synthesised 19.2" in table["verdict"]


def test_the_console_and_html_do_not_call_a_far_synthesis_as_asked(replay):
    scenario, offsets = replay
    report = _report(scenario, offsets)
    lines = delivered_lines(report)
    assert "(as synthesised)" in lines[0] and "as asked" not in lines[0]
    assert any("NOT as the file asks" in line for line in lines)
    assert any("window 157800 s (full, 600 s): file 3.3/s CV 36.7, synthesised 1979 at 3.3/s CV 19.2" in line
               and "(synthesis far from the file)" in line for line in lines)  # fmt: skip
    html = str(delivered_section(report))
    assert "synthesis = file?" in html and "157,800" in html and "36.69" in html and "19.18" in html


def test_a_run_cut_short_covers_part_of_a_window(replay):
    scenario, offsets = replay
    report = _report(scenario, [x for x in offsets if x <= 610.0], covered_s=610.0)
    smooth, bursty = report["delivered"]["by_target"]["sim"]["stages"]["trace"]["servegen"]["windows"]
    assert (
        smooth["part"] == "full" and bursty["part"] == "part" and bursty["covered_s"] == pytest.approx(10.0)
    )
    assert (
        bursty["synthesised"]["arrivals"]
        == bursty["realised"]["arrivals"]
        == sum(600 <= x <= 610 for x in offsets)
    )
    assert bursty["synthesised"]["rate"] == pytest.approx(bursty["synthesised"]["arrivals"] / 10.0)


def test_few_arrivals_are_reported_not_judged_and_many_windows_are_bounded():
    path = PACKAGE_DATA / "traces" / "servegen" / "language-m-mid" / "chunk-0-trace.csv"
    spec = SimpleNamespace(path=path, start_s=151200.0, end_s=159000.0, speed=1.0)
    t, _, _ = servegen.synthesise(path, 3, 151200.0, 159000.0)
    offsets = (t - 151200.0).tolist()
    sends = (np.asarray(offsets) * 1e9).astype(np.int64)
    context = {"arrival": {"model": "trace"}, "offsets": offsets, "servegen": servegen_context(spec)}
    table = windows_table(context, sends, np.ones(len(sends), bool), np.zeros(len(sends), np.int64), 1.0)
    assert len(table["windows"]) == 13  # 151200-159000 s: idle windows, then the two busy ones
    few = [w for w in table["windows"] if w["synthesised"]["arrivals"] < MIN_ARRIVALS]
    assert few and all(not w["judged"] and "client" not in w for w in few)
    assert f"fewer than {MIN_ARRIVALS} synthesised arrivals" in few[0]["reason"]
    assert table["judged"] == 13 - len(few)
    lines = console_lines("sim", "trace", table)
    assert (
        len(lines) == 1 + CONSOLE_WINDOWS + 1 and lines[-1] == "    … 7 more windows in report.json delivered"
    )


def test_a_truncated_section_says_its_later_windows_are_short(replay, monkeypatch):
    import loadkit.stats.delivered as delivered

    scenario, offsets = replay
    monkeypatch.setattr(delivered, "CAP", 4000)
    table = _report(scenario, offsets)["delivered"]["by_target"]["sim"]["stages"]["trace"]["servegen"]
    smooth, bursty = table["windows"]
    assert smooth["realised"]["arrivals"] == 3086 and bursty["realised"]["arrivals"] == 4000 - 3086
    assert bursty["client"]["consistent"] is False and table["client_missed"] == [157800.0]
    assert "keeps the first 4000 requests only" in table["note"]
