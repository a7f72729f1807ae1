"""Tenants with their own arrivals, SLOs and a header-borne priority, in real Locust runs against
the simulator (issue 27, item 5)."""

from __future__ import annotations

from collections import Counter

import pytest

from loadkit.sim.testing import sim_process
from loadkit.workload import load_scenario
from tests.helpers.runs import check_conservation, raw_records, run_locust

pytestmark = pytest.mark.integration

OWN = """schema = "loadkit.scenario/1"
name = "tenants-own"
seed = 3
duration_s = 8
[arrival]
model = "tenants"
[slos]
ttft_ms = 400
[prompt]
shape = "prompt"
[[parts]]
name = "short"
input = { dist = "fixed", value = 64 }
output = { dist = "fixed", value = 24 }
[[parts]]
name = "long"
input = { dist = "fixed", value = 1024 }
output = { dist = "fixed", value = 24 }
[[tenants]]
name = "gold"
priority = 0
arrival = { model = "poisson", rate = 8 }
slos = { ttft_ms = 150 }
[[tenants]]
name = "bronze"
priority = 10
arrival = { model = "poisson", rate = 24 }
"""


@pytest.mark.parametrize("sim_reads_header", [True, False])
def test_own_arrivals_own_slos_and_a_header_priority_reach_the_simulator(tmp_path, sim_reads_header):
    """~33 req/s asked of 4 running sequences (~30 req/s): a queue forms. The target sends the
    priority as an X-Priority header. A simulator that reads that header serves gold first
    (TTFT p50 far lower); one that reads the body's field (where nothing was sent) serves both
    alike — so the priority travelled in the header and only there."""
    scenario = tmp_path / "own.toml"
    scenario.write_text(OWN)
    report_dir = tmp_path / "r"
    header = ["--priority-header", "X-Priority"] if sim_reads_header else []
    with sim_process(
        "--profile", "fast", "--max-num-seqs", "4", "--scheduling-policy", "priority", *header
    ) as sim:
        proc = run_locust(
            "--headless", "-u", "64", "-r", "64", "-t", "10s", "--stop-timeout", "5",
            "--target", f"sim={sim.url},priority_as=header:X-Priority", "--scenario", str(scenario),
            "--report-dir", str(report_dir), "--raw-log",
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = check_conservation(report_dir)
    assert report["conservation"]["dropped"] == 0
    # Each tenant sent exactly its own process's arrivals (drawn from the scenario's seed).
    source = load_scenario(scenario).request_source()
    asked = Counter(item.label.split("/")[0] for item in iter(source.next_item, None))
    rows = raw_records(report_dir)
    assert Counter(r["label"].split("/")[0] for r in rows) == asked
    assert asked["bronze"] > 2 * asked["gold"] > 80
    section = report["tenants"]["by_target"]["sim"]
    gold, bronze = section["tenants"]["gold"], section["tenants"]["bronze"]
    assert gold["arrival_asked"] == {"model": "poisson", "rate": 8.0}
    # Judged against its own SLOs: gold's 150 ms, bronze the run's 400 ms.
    assert (gold["slos"], gold["slos_from"]) == ({"ttft_ms": 150.0}, "tenant")
    assert (bronze["slos"], bronze["slos_from"]) == ({"ttft_ms": 400.0}, "run")
    gold_ttft = sorted(
        r["ttft_ms"] for r in rows if r["label"].startswith("gold/") and r["ttft_ms"] is not None
    )
    assert gold["good"] == sum(t <= 150.0 for t in gold_ttft)
    delivered = report["delivered"]["by_target"]["sim"]["stages"]["tenants"]
    assert delivered["asked"]["model"] == "tenants" and abs(delivered["rate_error"]) < 0.02, delivered
    assert delivered["fit"]["test"] == "ks-2sample vs the tenants' schedule's gaps"
    ratio = bronze["ttft_ms_p50"] / gold["ttft_ms_p50"]
    print(
        f"sim reads header={sim_reads_header}: TTFT p50 gold {gold['ttft_ms_p50']:.0f} ms, bronze "
        f"{bronze['ttft_ms_p50']:.0f} ms; SLO met {gold['slo_attainment']:.3f} (own) vs {bronze['slo_attainment']:.3f}; "
        f"Jain {section['jain_fairness']:.3f}; sent {dict(asked)}; rate error {delivered['rate_error']:.4f}"
    )
    if sim_reads_header:
        assert ratio > 3, (gold["ttft_ms_p50"], bronze["ttft_ms_p50"])
        assert gold["slo_attainment"] > 0.8
    else:
        assert 0.6 < ratio < 1.6, (gold["ttft_ms_p50"], bronze["ttft_ms_p50"])
        assert gold["slo_attainment"] < 0.5


SESSIONS = """schema = "loadkit.scenario/1"
name = "tenant-sessions"
seed = 4
[arrival]
model = "closed"
users = 32
[slos]
ttft_ms = 400
[sessions]
turns = { dist = "uniform", low = 2, high = 4 }
user_tokens = 64
output_tokens = { dist = "uniform", low = 12, high = 36 }
think_time_s = 0.25
[[tenants]]
name = "gold"
priority = 0
slos = { ttft_ms = 150 }
[[tenants]]
name = "bronze"
priority = 10
weight = 3
sessions = { turns = 3, user_tokens = 128 }
"""


def test_session_tenants_priorities_reach_the_simulator_on_every_turn(tmp_path):
    """32 closed-loop users run sessions back to back (a quarter second's think between turns):
    far more turns asked than 4 running sequences serve (~33/s), so a queue forms. A quarter of the
    sessions are gold's, three quarters bronze's (by weight); every turn carries its tenant's
    priority in the body, and the simulator, scheduling by priority, serves gold's waiting turns
    first: gold's TTFT p50 is far lower."""
    scenario = tmp_path / "sessions.toml"
    scenario.write_text(SESSIONS)
    report_dir = tmp_path / "r"
    with sim_process("--profile", "fast", "--max-num-seqs", "4", "--scheduling-policy", "priority") as sim:
        proc = run_locust(
            "--headless", "-u", "32", "-r", "32", "-t", "10s", "--stop-timeout", "5",
            "--target", f"sim={sim.url}", "--scenario", str(scenario),
            "--report-dir", str(report_dir), "--raw-log",
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = check_conservation(report_dir)
    rows = raw_records(report_dir)
    assert {r["outcome"] for r in rows} <= {"ok", "cancelled"}, Counter(r["outcome"] for r in rows)
    # Every turn of a session is its tenant's; bronze's own mix gives it exactly three turns.
    by_session: dict[str, set[str]] = {}
    for r in rows:
        by_session.setdefault(r["session_id"], set()).add(r["label"].split("/")[0])
    assert all(len(tenants) == 1 for tenants in by_session.values()), by_session
    assert {r["label"] for r in rows} <= {"gold/turn1", "gold/turnN", "bronze/turn1", "bronze/turnN"}
    assert max(r["turn"] for r in rows if r["label"].startswith("bronze/")) == 3
    section = report["tenants"]["by_target"]["sim"]
    gold, bronze = section["tenants"]["gold"], section["tenants"]["bronze"]
    assert (gold["priority"], bronze["priority"]) == (0, 10)
    assert gold["requests"] + bronze["requests"] == len(rows)
    assert (gold["slos"], gold["slos_from"], bronze["slos"], bronze["slos_from"]) == (
        {"ttft_ms": 150.0},
        "tenant",
        {"ttft_ms": 400.0},
        "run",
    )
    gold_ttft = [r["ttft_ms"] for r in rows if r["label"].startswith("gold/") and r["ttft_ms"] is not None]
    assert gold["good"] == sum(t <= 150.0 for t in gold_ttft)
    # Long vs short within a tenant's sessions: later turns (the whole history) against first turns.
    assert (gold["long_vs_short"]["long"], gold["long_vs_short"]["short"]) == ("turnN", "turn1")
    shares = [gold["goodput_share_of_demand"], bronze["goodput_share_of_demand"]]
    assert section["jain_fairness"] == pytest.approx(sum(shares) ** 2 / (2 * sum(x * x for x in shares)))
    ratio = bronze["ttft_ms_p50"] / gold["ttft_ms_p50"]
    print(
        f"session tenants: TTFT p50 gold {gold['ttft_ms_p50']:.0f} ms, bronze {bronze['ttft_ms_p50']:.0f} ms; "
        f"requests gold {gold['requests']} bronze {bronze['requests']}; SLO met {gold['slo_attainment']:.3f} (own) "
        f"vs {bronze['slo_attainment']:.3f}; Jain {section['jain_fairness']:.3f}"
    )
    assert gold["requests"] > 40 and bronze["requests"] > 3 * 40
    assert ratio > 3, (gold["ttft_ms_p50"], bronze["ttft_ms_p50"])
    assert gold["slo_attainment"] > 0.8 > 0.5 > bronze["slo_attainment"]  # bronze queues behind gold
    assert section["jain_fairness"] < 0.9
