"""Tenants with their own arrivals, SLOs and priority placement (issue 27, item 5)."""

from __future__ import annotations

import numpy as np
import pytest

from loadkit.core.priority import check_priority_as, place_priority
from loadkit.report.tenants import tenants_section
from loadkit.servers.targets import TargetError, parse_target
from loadkit.stats.tenantstats import TenantStats, console_lines
from loadkit.workload import ScenarioError, load_scenario
from tests.workload.test_tenants import rec

PARTS = """
[[parts]]
name = "short"
input = { dist = "fixed", value = 10 }
output = { dist = "fixed", value = 2 }
[[parts]]
name = "long"
input = { dist = "fixed", value = 300 }
output = { dist = "fixed", value = 2 }
"""
OWN = """
[[tenants]]
name = "gold"
priority = 0
parts = ["short"]
arrival = { model = "poisson", rate = 20 }
slos = { ttft_ms = 50 }
[[tenants]]
name = "bronze"
priority = 5
arrival = { model = "constant", rate = 5 }
"""


def own_scenario(write_scenario, head: str = 'duration_s = 60\n[arrival]\nmodel = "tenants"\n'):
    return load_scenario(write_scenario(head + PARTS + OWN))


def drain(src):
    items = []
    while (item := src.next_item()) is not None:
        items.append(item)
    return items


def test_each_tenant_gets_its_own_process_and_the_superposition_is_the_schedule(write_scenario):
    sc = own_scenario(write_scenario)
    assert sc.arrival == {"model": "tenants"} and sc.tenants[0].slos == {"ttft_ms": 50.0}
    src = sc.request_source()
    times = np.asarray(src.trace_arrival_times_s())
    assert src.trace_arrival_stages() == ["tenants"] * len(times)
    items = drain(src)
    assert len(items) == len(times) and np.all(np.diff(times) >= 0) and times[-1] < 60
    by = {name: times[[r.label.startswith(name + "/") for r in items]] for name in ("gold", "bronze")}
    # bronze: constant at 5/s, exactly every 0.2 s; gold: Poisson at 20/s (CV 1) over 60 s.
    assert np.allclose(np.diff(by["bronze"]), 0.2) and len(by["bronze"]) == 299
    gaps = np.diff(by["gold"])
    assert len(by["gold"]) / 60 == pytest.approx(20, rel=0.08)
    assert gaps.std(ddof=1) / gaps.mean() == pytest.approx(1.0, abs=0.1)
    assert {r.label for r in items if r.label.startswith("gold/")} == {"gold/short"}
    assert all(r.priority == (0 if r.label.startswith("gold/") else 5) for r in items)


def test_worker_shares_partition_the_tenant_schedule_exactly(write_scenario):
    sc = own_scenario(write_scenario)
    whole = sc.request_source()
    times, labels = whole.trace_arrival_times_s(), [r.label for r in drain(whole)]
    shares = [sc.request_source(worker_index=w, worker_count=3) for w in range(3)]
    got = sorted(
        (t, r.label) for s in shares for t, r in zip(s.trace_arrival_times_s(), drain(s), strict=True)
    )
    assert got == sorted(zip(times, labels, strict=True))


def test_max_requests_bounds_the_superposed_schedule(write_scenario):
    sc = own_scenario(write_scenario, 'max_requests = 50\n[arrival]\nmodel = "tenants"\n')
    assert len(drain(sc.request_source())) == 50


@pytest.mark.parametrize(
    "head, tenants, message",
    [
        (
            'duration_s = 5\n[arrival]\nmodel = "tenants"\n',
            OWN.replace("priority = 5\n", "weight = 2\n"),
            r"tenants\[1\].arrival: give weight or arrival, not both",
        ),
        (
            'duration_s = 5\n[arrival]\nmodel = "tenants"\n',
            OWN.replace('arrival = { model = "constant", rate = 5 }\n', ""),
            r"tenants\[1\]: expected an arrival table: when one tenant has its own arrival, every tenant needs one",
        ),
        (
            'duration_s = 5\n[arrival]\nmodel = "poisson"\nrate = 3\n',
            OWN,
            r"arrival.model: expected 'tenants' \(the tenants give their own arrivals\), got 'poisson'",
        ),
        (
            'duration_s = 5\n[arrival]\nmodel = "tenants"\n',
            '[[tenants]]\nname = "a"\n',
            r"arrival.model: expected \[\[tenants\]\] that each give an arrival table",
        ),
        (
            '[arrival]\nmodel = "tenants"\n',
            OWN,
            r"expected duration_s or max_requests to bound the tenants' arrivals",
        ),
        (
            'duration_s = 5\n[arrival]\nmodel = "tenants"\n',
            OWN.replace('"constant", rate = 5', '"closed", users = 2'),
            r"tenants\[1\].arrival.model: expected one of 'constant', 'poisson', 'gamma'",
        ),
        (
            'duration_s = 5\n[arrival]\nmodel = "tenants"\n',
            OWN.replace('"constant", rate = 5', '"gamma", rate = 5'),
            r"tenants\[1\].arrival: missing required key 'cv'|tenants\[1\].arrival.cv",
        ),
        (
            'duration_s = 5\n[arrival]\nmodel = "tenants"\n',
            OWN.replace("{ ttft_ms = 50 }", "{ ttft = 50 }"),
            r"tenants\[0\].slos",
        ),
    ],
)
def test_bad_tenant_arrivals_and_slos_are_refused_by_key(write_scenario, head, tenants, message):
    with pytest.raises(ScenarioError, match=message):
        load_scenario(write_scenario(head + PARTS + tenants))


def test_a_tenants_own_slos_replace_the_runs_when_judged():
    run, own = {"ttft_ms": 100.0}, {"gold": {"ttft_ms": 30.0}}
    stats = TenantStats()
    for _ in range(4):
        stats.add(rec("gold/short", 50), run, own)  # within the run's 100 ms, not gold's own 30 ms
        stats.add(rec("bronze/short", 50), run, own)
    out = stats.report({"gold": 0, "bronze": 1}, {"gold": {"slos": own["gold"], "slos_from": "tenant"}})
    gold, bronze = (out["by_target"]["sim"]["tenants"][t] for t in ("gold", "bronze"))
    assert gold["slo_attainment"] == 0.0 and bronze["slo_attainment"] == 1.0
    assert gold["slos"] == {"ttft_ms": 30.0} and gold["slos_from"] == "tenant" and "slos" not in bronze
    assert out["by_target"]["sim"]["jain_fairness"] == pytest.approx(0.5)
    lines = console_lines({"tenants": out})
    assert "gold (priority 0): 4 req, SLO met (own SLOs) 0.0%" in lines[2] and "own" not in lines[1]


def test_html_rows_show_the_tenants_own_arrival_and_slos():
    stats = TenantStats()
    stats.add(rec("gold/short", 20), {"ttft_ms": 100.0}, {"gold": {"ttft_ms": 30.0}})
    stats.add(rec("bronze/short", 20), {"ttft_ms": 100.0}, {"gold": {"ttft_ms": 30.0}})
    declared = {
        "gold": {
            "slos": {"ttft_ms": 30.0},
            "slos_from": "tenant",
            "arrival_asked": {"model": "poisson", "rate": 8.0},
        },
        "bronze": {
            "slos": {"ttft_ms": 100.0},
            "slos_from": "run",
            "arrival_asked": {"model": "gamma", "rate": 2.5, "cv": 2.0},
        },
    }
    page = tenants_section({"tenants": stats.report({"gold": 0, "bronze": 1}, declared)})
    for cell in ("poisson 8/s", "ttft_ms&lt;=30 (own)", "gamma 2.5/s cv 2", "ttft_ms&lt;=100 (run)"):
        assert f"<td>{cell}</td>" in page, cell


def test_priority_goes_in_a_body_field_or_a_header_as_the_target_says():
    body, headers = {}, {}
    place_priority(3, "field:priority", body, headers)
    place_priority(7, "header:X-Priority", body, headers)
    place_priority(9, "none", body, headers)
    assert body == {"priority": 3} and headers == {"X-Priority": "7"}
    assert parse_target("gw=http://h:1,priority_as=header:X-Priority").priority_as == "header:X-Priority"
    for bad in ("header:", "query:x", "X-Priority", "field: p"):
        with pytest.raises(ValueError, match="expected 'field:NAME', 'header:NAME' or 'none'"):
            check_priority_as(bad)
    with pytest.raises(TargetError, match="priority_as: expected 'field:NAME'"):
        parse_target("gw=http://h:1,priority_as=header")


def test_scenario_targets_take_priority_as_and_refuse_a_bad_one(write_scenario):
    target = '[[targets]]\nname = "gw"\nurl = "http://127.0.0.1:9"\npriority_as = "%s"\n'
    sc = load_scenario(write_scenario(target % "header:X-Priority" + PARTS))
    assert sc.targets[0]["priority_as"] == "header:X-Priority"
    with pytest.raises(ScenarioError, match=r"targets\[0\].priority_as: expected 'field:NAME'"):
        load_scenario(write_scenario(target % "body" + PARTS))
