"""The task_errors section (stats/taskerrors.py): counted per user class and kind with the first
traceback, bounded, exact over the wire and across workers (a master fed two workers' snapshots
reports what one process fed everything would), and the exit line that names them."""

from __future__ import annotations

import msgpack

from loadkit.records import RequestRecord
from loadkit.report.console import final_summary
from loadkit.stats import StatsCollector
from loadkit.stats.builtin import BuiltinSections
from loadkit.stats.taskerrors import MAX_KINDS, MAX_MESSAGE_CHARS, TaskErrors, console_lines
from loadkit.stats.validity import exit_summary


def raised(exc: BaseException) -> BaseException:
    """``exc`` with a real traceback (raised and caught here)."""
    try:
        raise exc
    except BaseException as caught:
        return caught


def add(state: TaskErrors, user_class: str, exc: BaseException, at: float) -> None:
    exc = raised(exc)
    state.add(user_class, exc, exc.__traceback__, at)


def collector() -> tuple[StatsCollector, BuiltinSections]:
    c = StatsCollector()
    sections = BuiltinSections(c)
    sections.install()
    return c, sections


def test_counted_per_class_and_kind_with_the_first_traceback_and_where():
    state = TaskErrors()
    add(state, "Chat", ValueError("no tool\n  in reply"), 10.0)
    add(state, "Chat", ValueError("no tool in reply"), 11.0)  # the same message once whitespace collapses
    add(state, "Chat", KeyError("tool"), 12.0)
    add(state, "Agent", ZeroDivisionError("division by zero"), 13.0)
    report = state.report()
    assert list(report) == ["Agent", "Chat"]
    chat = report["Chat"]
    assert chat["count"] == 3 and chat["other"] == 0
    first, second = chat["errors"]
    assert (first["type"], first["message"], first["count"], first["first_unix"]) == (
        "ValueError",
        "no tool in reply",
        2,
        10.0,
    )
    assert (second["type"], second["message"], second["count"]) == ("KeyError", "'tool'", 1)
    assert first["where"].startswith("test_taskerrors.py:") and first["where"].endswith(" in raised")
    assert first["traceback"].startswith("Traceback (most recent call last):")
    assert first["traceback"].rstrip().endswith("ValueError: no tool\n  in reply")


def test_kinds_are_bounded_and_the_count_stays_exact():
    state = TaskErrors()
    for i in range(MAX_KINDS + 7):
        add(state, "Chat", RuntimeError(f"request {i} " + "x" * MAX_MESSAGE_CHARS), float(i))
    chat = state.report()["Chat"]
    assert len(chat["errors"]) == MAX_KINDS and chat["other"] == 7 and chat["count"] == MAX_KINDS + 7
    assert all(len(e["message"]) == MAX_MESSAGE_CHARS and e["message"].endswith("…") for e in chat["errors"])
    assert console_lines({"task_errors": state.report()}, per_class=2)[-1].endswith(
        f"… and {MAX_KINDS + 5} more of other kinds (report.json task_errors)"
    )


def test_two_workers_merge_to_what_one_process_fed_everything_reports():
    single, master = collector(), collector()
    workers = [collector(), collector()]
    excs = [(f"C{i % 2}", raised(ValueError(f"v{i % 3}")), 100.0 + i) for i in range(30)]
    for i, (cls, exc, at) in enumerate(excs):
        workers[(i // 4) % 2][1].add_task_error(cls, exc, exc.__traceback__, at)
        single[1].add_task_error(cls, exc, exc.__traceback__, at)
    for i, (node, _) in reversed(list(enumerate(workers))):  # the later worker's snapshot first
        payload = msgpack.unpackb(
            msgpack.packb(node.snapshot_payload(final=True)), raw=False, strict_map_key=False
        )
        assert master[0].accept_snapshot(f"w{i}", payload) == "accepted"
    merged = master[0].report()["task_errors"]
    assert merged == single[0].report()["task_errors"]
    assert sum(c["count"] for c in merged.values()) == 30
    # Each kind's first is the earliest one, whichever worker raised it (C0/v0 first came at 100.0 on w0).
    assert {(c, e["message"]): e["first_unix"] for c, s in merged.items() for e in s["errors"]} == {
        ("C0", "v0"): 100.0, ("C1", "v1"): 101.0, ("C0", "v2"): 102.0,
        ("C1", "v0"): 103.0, ("C0", "v1"): 104.0, ("C1", "v2"): 105.0}  # fmt: skip


def test_a_reset_forgets_them_and_a_bad_payload_is_rejected_whole():
    c, sections = collector()
    exc = raised(ValueError("x"))
    sections.add_task_error("Chat", exc, exc.__traceback__, 1.0)
    assert c.report()["task_errors"]["Chat"]["count"] == 1
    c.reset()
    assert c.report()["task_errors"] == {}
    payload = c.snapshot_payload()
    payload["sections"]["task_errors"] = {"v": 99, "classes": {}}
    assert c.accept_snapshot("w", payload) == "rejected"


def record(outcome: str) -> RequestRecord:
    r = RequestRecord(request_id=outcome, engine="e", adapter="openai", outcome=outcome)
    r.t_send_ns, r.t_end_ns = 1, 2
    return r


def test_the_exit_line_names_task_errors_apart_from_failed_requests():
    c, sections = collector()
    for _ in range(3):
        c.add(record("ok"))
    assert exit_summary(c.report()) == "exit code 0: the run is valid and nothing failed"
    exc = raised(KeyError("tool"))
    for _ in range(2):
        sections.add_task_error("Agent", exc, exc.__traceback__, 1.0)
    report = c.report()
    assert report["valid"]  # the requests sent were measured exactly: task errors do not invalidate
    line = exit_summary(report)
    assert line == (
        "exit code 1 (Locust's --exit-code-on-error): the run is valid, but 2 exceptions were raised in "
        "the locustfile's tasks (Agent: KeyError ×2); no request failed"
    )
    assert exit_summary(report, code_on_error=7).startswith("exit code 7 ")
    c.add(record("http_error:503"))
    both = exit_summary(c.report(), other_failed=2)
    assert both.startswith(
        "exit code 1 (Locust's --exit-code-on-error): the run is valid, but 1 request failed and "
        "2 of the locustfile's own (non-LLM) requests failed in Locust's table and 2 exceptions"
    )
    assert "no request failed" not in both
    summary = final_summary(c.report(), both)
    assert "exceptions raised in the locustfile's tasks (2;" in summary and "Agent" in summary
    assert summary.endswith(both)
    assert exit_summary({"valid": False, "invalid_reasons": ["a"], "engines": {}}).startswith("exit code 3: ")


def test_a_session_its_task_broke_is_counted_task_error_at_the_turn_never_sent():
    from loadkit.conversation import Conversation

    c, sections = collector()

    def send(request):
        r = record("ok")
        r.turn, r.label = request.turn, request.label
        c.add(r)
        return r

    try:
        with Conversation(send, lambda conv: sections.add_session("e", conv), "S-1") as conv:
            conv.chat("a")
            raise ValueError("no tool")
    except ValueError:
        pass
    sessions = c.report()["sessions"]["e"]
    assert sessions["broken_by"] == {"task_error": 1} and sessions["broken_at_turn"] == {"2": 1}
    assert sessions["turns"]["1"]["ok"] == 1
