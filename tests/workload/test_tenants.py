"""Tenants: the scenario keys, the request labels and priority field, and the fairness maths."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from loadkit.stats.tenantstats import TenantStats, console_lines, jain
from loadkit.workload import ScenarioError, load_scenario

BODY = """
[[parts]]
name = "short"
input = { dist = "fixed", value = 10 }
output = { dist = "fixed", value = 2 }
[[parts]]
name = "long"
weight = 3
input = { dist = "fixed", value = 500 }
output = { dist = "fixed", value = 2 }
"""


def test_requests_carry_tenant_labels_priorities_and_weights(write_scenario):
    sc = load_scenario(
        write_scenario(
            BODY + '[[tenants]]\nname = "a"\nweight = 3\npriority = 1\n'
            '[[tenants]]\nname = "b"\nparts = ["short"]\n'
        )
    )
    items = [sc.request_source().next_item() for _ in range(1)]
    src = sc.request_source()
    reqs = [src.next_item() for _ in range(4000)]
    labels = [r.label for r in reqs]
    assert items[0].label == reqs[0].label
    assert set(labels) == {"a/short", "a/long", "b/short"}
    assert labels.count("b/short") / len(labels) == pytest.approx(0.25, abs=0.03)
    a = [r for r in reqs if r.label.startswith("a/")]
    assert sum(r.label == "a/long" for r in a) / len(a) == pytest.approx(0.75, abs=0.03)
    # The priority rides on the request; each target places it when sending (loadkit/core/priority.py).
    assert all(r.priority == 1 and r.extra_body == {} for r in a)
    assert all(r.priority is None and r.extra_body == {} for r in reqs if r.label.startswith("b/"))


@pytest.mark.parametrize(
    "tenants, message",
    [
        ('[[tenants]]\nname = "a/b"\n', "expected a non-empty name without '/'"),
        (
            '[[tenants]]\nname = "a"\nparts = ["medium"]\n',
            "tenants\\[0\\].parts\\[0\\]: expected one of 'short', 'long'",
        ),
        ('[[tenants]]\nname = "a"\n[[tenants]]\nname = "a"\n', "expected unique tenant names"),
        ('[[tenants]]\nname = "a"\npriority = 1.5\n', "tenants\\[0\\].priority: expected an integer"),
    ],
)
def test_bad_tenants_are_refused_by_key(write_scenario, tenants, message):
    with pytest.raises(ScenarioError, match=message):
        load_scenario(write_scenario(BODY + tenants))


@dataclass
class Rec:
    label: str
    engine: str = "sim"
    outcome: str = "ok"
    t_send_ns: int = 0
    t_end_ns: int | None = 2_000_000_000
    t_sched_ns: int | None = None
    event_t_ns: list[int] | None = None
    n_in: int | None = 10
    n_in_target: int | None = 10
    n_out: int | None = 2
    event_tokens: list[int] | None = None
    coalesced_reads: int = 0
    t_first_answer_ns: int | None = None  # no reasoning: the answer channel is not marked
    t_last_answer_ns: int | None = None
    n_answer: int | None = None
    # The rest of RequestRecord's timestamps, which the request's metrics (loadkit.formulas) read.
    t_start_ns: int = 0
    t_connect_ns: int | None = None
    t_connected_ns: int | None = None
    t_tls_ns: int | None = None
    t_first_reasoning_ns: int | None = None
    t_reasoning_end_ns: int | None = None
    t_first_tool_ns: int | None = None

    @property
    def t_first_ns(self):
        return self.event_t_ns[0] if self.event_t_ns else None

    @property
    def t_last_ns(self):
        return self.event_t_ns[-1] if self.event_t_ns else None


def rec(label: str, ttft_ms: float, n_in: int = 10) -> Rec:
    first = int(ttft_ms * 1e6)
    return Rec(label, event_t_ns=[first, first + 1_000_000], event_tokens=[1, 1], n_in=n_in, n_in_target=n_in)


def test_fairness_index_goodput_share_and_long_vs_short_survive_the_wire():
    slos = {"ttft_ms": 100.0}
    a, b = TenantStats(), TenantStats()
    for i in range(10):
        a.add(rec("gold/short", 20, 10), slos)
        a.add(rec("gold/long", 60, 1000), slos)
        b.add(rec("bronze/short", 50 if i < 5 else 500, 10), slos)
        b.add(rec("bronze/long", 900, 1000), slos)
    merged = TenantStats.from_wire(a.to_wire())
    merged.merge(TenantStats.from_wire(b.to_wire()))
    out = merged.report({"gold": 0, "bronze": 5})["by_target"]["sim"]
    gold, bronze = out["tenants"]["gold"], out["tenants"]["bronze"]
    assert gold["goodput_share_of_demand"] == 1.0 and bronze["goodput_share_of_demand"] == 0.25
    assert out["jain_fairness"] == pytest.approx((1.25**2) / (2 * (1 + 0.0625)))
    assert gold["long_vs_short"]["ttft_p50_ratio"] == pytest.approx(3.0, rel=0.01)
    assert bronze["priority"] == 5 and bronze["slo_attainment"] == 0.25
    lines = console_lines({"tenants": {"by_target": {"sim": out}}})
    assert lines[0].startswith("tenants sim: Jain fairness 0.735") and "gold (priority 0)" in lines[2]


def test_jain_is_one_when_equal_and_none_when_unmeasured():
    assert jain([0.5, 0.5, 0.5]) == pytest.approx(1.0)
    assert jain([1.0, 0.0]) == pytest.approx(0.5)
    assert jain([1.0, None]) is None


def test_html_section_shows_tenants_and_is_absent_without_them():
    from loadkit.report.tenants import tenants_section

    slos = {"ttft_ms": 100.0}
    stats = TenantStats()
    for _ in range(5):
        stats.add(rec("gold/short", 20), slos)
        stats.add(rec("bronze/short", 500), slos)
    page = tenants_section({"tenants": stats.report({"gold": 0, "bronze": 9})})
    assert '<section id="tenants">' in page and "<td>gold</td>" in page and "<td>bronze</td>" in page
    assert any(f"Jain{q}s fairness index" in page for q in ("&#39;", "&#x27;", "'"))  # any escaping of '
    assert tenants_section({"tenants": None}) == ""
