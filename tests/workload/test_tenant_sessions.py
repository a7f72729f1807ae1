"""Tenants of a [sessions] workload: their session mixes, the tenant draw, labels and priorities."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from loadkit.workload import ScenarioError, Session, load_scenario
from loadkit.workload.tenantplan import tenant_schedule
from loadkit.workload.tenantsessions import tenant_of_session

SESSIONS = """
[sessions]
count = {count}
turns = {{ dist = "uniform", low = 2, high = 6 }}
user_tokens = 20
output_tokens = 30
think_time_s = 0.5
"""
TWO = """
[[tenants]]
name = "gold"
weight = 3
priority = 0
slos = { ttft_ms = 100 }
[[tenants]]
name = "bronze"
priority = 7
sessions = { turns = 1, output_tokens = { dist = "fixed", value = 5 }, labels = { first = "ask" } }
"""


def sessions_of(write_scenario, body: str, worker: int = 0, workers: int = 1) -> list[Session]:
    src = load_scenario(write_scenario(body)).request_source(worker, workers)
    return list(iter(src.next_item, None))


def turns(session: Session) -> list:
    reqs, req = [], session.next_request(None, True)
    while req is not None:
        reqs.append(req)
        req = session.next_request("reply " * 8, True)
    return reqs


def test_a_tenants_mix_replaces_only_the_keys_it_gives(write_scenario):
    sc = load_scenario(write_scenario(SESSIONS.format(count=10) + TWO))
    gold, bronze = sc.tenants
    assert (gold.priority, gold.slos, bronze.priority, bronze.slos) == (0, {"ttft_ms": 100.0}, 7, None)
    assert gold.sessions is not None and bronze.sessions is not None
    assert gold.sessions.turns == sc.sessions.turns and bronze.sessions.turns != sc.sessions.turns
    assert bronze.sessions.user_tokens == sc.sessions.user_tokens  # not given: the scenario's
    assert gold.sessions.labels == {"first": "gold/turn1", "next": "gold/turnN", "tool": "gold/tool"}
    assert bronze.sessions.labels == {"first": "bronze/ask", "next": "bronze/turnN", "tool": "bronze/tool"}
    assert sc.sessions.labels["first"] == "turn1"  # the scenario's own spec is untouched


def test_every_turn_carries_its_tenants_label_and_priority(write_scenario):
    items = sessions_of(write_scenario, SESSIONS.format(count=400) + TWO)
    seen = Counter()
    for session in items:
        reqs = turns(session)
        tenant = reqs[0].label.split("/")[0]
        seen[tenant] += 1
        assert all(r.label.split("/")[0] == tenant for r in reqs)
        assert all(r.priority == {"gold": 0, "bronze": 7}[tenant] for r in reqs)
        if tenant == "bronze":
            assert [(r.label, r.max_tokens) for r in reqs] == [("bronze/ask", 5)]
        else:
            assert 2 <= len(reqs) <= 6 and [r.label for r in reqs[1:]] == ["gold/turnN"] * (len(reqs) - 1)
    assert seen["gold"] / len(items) == pytest.approx(0.75, abs=0.06)


def test_the_draw_is_per_session_so_workers_agree_and_untouched_sessions_stay_as_they_were(write_scenario):
    body = SESSIONS.format(count=60) + TWO
    whole = {
        s.session_id: (s.spec.labels["first"], s.turns_planned) for s in sessions_of(write_scenario, body)
    }
    shares = [sessions_of(write_scenario, body, w, 3) for w in range(3)]
    assert {
        s.session_id: (s.spec.labels["first"], s.turns_planned) for share in shares for s in share
    } == whole
    plain = {s.session_id: s.turns_planned for s in sessions_of(write_scenario, SESSIONS.format(count=60))}
    gold = [sid for sid, (first, _) in whole.items() if first == "gold/turn1"]
    assert gold and all(whole[sid][1] == plain[sid] for sid in gold)  # the tenant draw is a stream of its own


def test_tenant_of_session_follows_the_weights_and_is_a_pure_function():
    w = np.asarray([0.2, 0.5, 0.3])
    draws = [tenant_of_session(11, j, w) for j in range(6000)]
    assert draws == [tenant_of_session(11, j, w) for j in range(6000)]
    counts = Counter(draws)
    assert [counts[k] / len(draws) for k in range(3)] == pytest.approx([0.2, 0.5, 0.3], abs=0.02)
    assert draws != [tenant_of_session(12, j, w) for j in range(6000)]
    assert {tenant_of_session(11, j, np.asarray([1.0])) for j in range(50)} == {0}


def test_a_tenant_that_gives_system_prompts_has_a_pool_of_its_own(write_scenario):
    body = (
        SESSIONS.format(count=40)
        + "system_prompts = { count = 1, tokens = 40 }\n"
        + """
[[tenants]]
name = "a"
[[tenants]]
name = "b"
sessions = { system_prompts = { count = 1, tokens = 90 } }
"""
    )
    systems: dict[str, set[str]] = {"a": set(), "b": set()}
    for session in sessions_of(write_scenario, body):
        req = session.next_request(None, True)
        systems[req.label.split("/")[0]].add(req.messages[0]["content"])
    assert len(systems["a"]) == len(systems["b"]) == 1
    assert systems["a"] != systems["b"]
    assert len(next(iter(systems["b"])).split()) > len(next(iter(systems["a"])).split())


@pytest.mark.parametrize(
    "tenants, message",
    [
        (
            '[[tenants]]\nname = "a"\nsessions = { count = 3 }\n',
            r"tenants\[0\]\.sessions\.count: a tenant has no session count",
        ),
        (
            '[[tenants]]\nname = "a"\nsessions = { turn = 3 }\n',
            r"tenants\[0\]\.sessions\.turn: unknown key \(did you mean 'turns'\?\)",
        ),
        (
            '[[tenants]]\nname = "a"\n[[tenants]]\nname = "b"\nsessions = { turns = { dist = "uniform", low = 4 } }\n',
            r"tenants\[1\]\.sessions\.turns",
        ),
        (
            '[[tenants]]\nname = "a"\nsessions = { think_time_s = -1 }\n',
            r"tenants\[0\]\.sessions\.think_time_s",
        ),
        ('[[tenants]]\nname = "a"\nsessions = 3\n', r"tenants\[0\]\.sessions: expected a table"),
        (
            '[[tenants]]\nname = "a"\nparts = ["x"]\n',
            r"tenants\[0\]\.parts: parts apply to \[\[parts\]\] workloads",
        ),
        (
            '[[tenants]]\nname = "a"\narrival = { model = "poisson", rate = 2 }\n',
            r"arrival\.model: expected 'tenants' \(the tenants give their own arrivals\), got 'closed'",
        ),
        (
            '[arrival]\nmodel = "tenants"\n[[tenants]]\nname = "a"\narrival = { model = "poisson", rate = 2 }\n'
            '[[tenants]]\nname = "b"\n',
            r"tenants\[1\]: expected an arrival table: when one tenant has its own arrival, every tenant needs one",
        ),
        ('[[tenants]]\nname = "a/b"\n', "expected a non-empty name without '/'"),
        ('[[tenants]]\nname = "a"\nweight = 0\n', r"tenants\[0\]\.weight"),
    ],
)
def test_bad_session_tenants_are_refused_by_key(write_scenario, tenants, message):
    with pytest.raises(ScenarioError, match=message):
        load_scenario(write_scenario(SESSIONS.format(count=4) + tenants))


def test_a_session_mix_is_refused_for_parts_and_tenants_for_a_trace(write_scenario):
    parts = (
        '[[parts]]\nname = "p"\ninput = 10\noutput = 2\n[[tenants]]\nname = "a"\nsessions = { turns = 2 }\n'
    )
    with pytest.raises(
        ScenarioError,
        match=r"tenants\[0\]\.sessions: a tenant's session mix applies to a "
        r"\[sessions\] workload",
    ):
        load_scenario(write_scenario(parts))
    trace = '[trace]\nformat = "lengths"\npath = "t.csv"\n[[tenants]]\nname = "a"\n'
    (write_scenario(trace).parent / "t.csv").write_text("num_prefill_tokens,num_decode_tokens\n5,5\n")
    with pytest.raises(ScenarioError, match=r"tenants: expected \[\[parts\]\] or \[sessions\]"):
        load_scenario(write_scenario(trace))


OWN_TOP = 'duration_s = 20\n[arrival]\nmodel = "tenants"\n'
OWN = """
[[tenants]]
name = "gold"
priority = 0
arrival = { model = "poisson", rate = 2 }
[[tenants]]
name = "bronze"
priority = 5
arrival = { model = "gamma", rate = 6, cv = 2 }
sessions = { turns = 1 }
"""


def test_tenants_own_arrivals_start_one_session_each_and_workers_split_them(write_scenario):
    sc = load_scenario(write_scenario(OWN_TOP + SESSIONS.format(count=1000) + OWN))
    plan = tenant_schedule(sc)
    src = sc.request_source()
    times = src.trace_arrival_times_s()  # known before the first session is built
    assert times == [t for t, _ in plan] and len(times) > 100
    assert src.trace_arrival_stages() == ["tenants"] * len(times)
    items = list(iter(src.next_item, None))
    names = [sc.tenants[k].name for _, k in plan]
    assert [s.spec.labels["first"].split("/")[0] for s in items] == names
    assert [s.priority for s in items] == [{"gold": 0, "bronze": 5}[n] for n in names]
    assert all(s.turns_planned == 1 for s, n in zip(items, names, strict=True) if n == "bronze")
    shares = [sc.request_source(w, 2) for w in range(2)]
    assert sorted(t for s in shares for t in s.trace_arrival_times_s()) == sorted(times)
    ids = [s.session_id for share in shares for s in iter(share.next_item, None)]
    assert sorted(ids) == sorted(s.session_id for s in items)


def test_sessions_count_caps_the_tenants_schedule(write_scenario):
    sc = load_scenario(write_scenario(OWN_TOP + SESSIONS.format(count=7) + OWN))
    src = sc.request_source()
    assert len(src.trace_arrival_times_s()) == 7 == len(list(iter(src.next_item, None)))
