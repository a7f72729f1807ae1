"""The walks over report.json: conservation, engines and labels, user classes, stages,
session turns. Each recomputes its groups from the raw-log lines and compares (compare.py)."""

from __future__ import annotations

from typing import Any

from loadkit.verify.breakdown import compare_breakdown
from loadkit.verify.compare import NS_UNIT_MS, Verdict, compare_group, compare_summary
from loadkit.verify.delivered import delivered
from loadkit.verify.figures import DEFAULT_RELATIVE_ERROR
from loadkit.verify.gpu import gpu
from loadkit.verify.lengthbuckets import check_buckets, check_reasoning
from loadkit.verify.rates import clock_slack_s, compare_rates, engine_slack_s, has_wall_offsets, window_s
from loadkit.verify.rawlog import Run
from loadkit.verify.recompute import figures, group_by
from loadkit.verify.servegen import servegen_windows
from loadkit.verify.tenants import tenants
from loadkit.verify.tiers import slo_tiers
from loadkit.verify.timeseries import check_timeseries

STAGE_METRICS = ("ttft_ms", "ttft_sched_ms", "tpot_ms", "e2e_ms", "ttfat_ms")
THREE = (("p50", 500), ("p90", 900), ("p99", 990))
TOKEN_UNIT = 0.0  # token histograms hold the integers themselves: only the resolution applies
MAX_TURN = 32  # docs/sessions.md: turns from 32 on share the report's "32+" row


def verify_run(run: Run) -> Verdict:
    """Every check this landing makes (docs/reports.md lists what is not yet checked)."""
    stated = run.manifest.get("histogram_relative_error")
    v = Verdict(relative_error=float(stated) if isinstance(stated, int | float) else DEFAULT_RELATIVE_ERROR)
    slos = {str(k): float(x) for k, x in (run.manifest.get("slos") or {}).items()}
    events = run.has_events
    if not events:
        v.notes.append("ITL (itl_ms, itl_chunk_ms) because the raw log has no per-event times "
                       "(run with --raw-log-events)")  # fmt: skip
    lost = (run.report.get("workers") or {}).get("lost")
    if lost:
        # The report keeps a lost worker's last snapshot; its raw log runs on past it, so the
        # counts disagree by what the worker did after that snapshot. Said, not hidden.
        v.remarks.append(f"{lost} worker(s) lost (report.json 'workers'): the raw log holds requests the report "
                       "never received, so counts are expected to disagree")  # fmt: skip
    conservation(run, v)
    engines(run, v, slos, events)
    user_classes(run, v, slos)
    stages(run, v, slos)
    sessions(run, v)
    lengths(run, v)
    delivered(run, v)
    servegen_windows(run, v)
    tenants(run, v)
    slo_tiers(run, v)  # and the cost figures (verify/tiers.py)
    unlogged(run, v)
    gpu(run, v)  # verify/gpu.py
    old_log = any(r.get("t_first_answer_ns") is not None and "t_last_answer_ns" not in r for r in run.rows)
    unknown = sorted(
        {k for k in slos if (k == "answer_tpot_ms" and old_log) or (k == "itl_ms" and not events)}
    )
    if unknown:
        v.notes.append(f"SLO keys {', '.join(unknown)}: per-key counts and 'good' because the raw log "
                       "lacks what they judge")  # fmt: skip
    return v


def unlogged(run: Run, v: Verdict) -> None:
    """Sections built from what the raw log does not hold: their totals where the log has them,
    the rest said, not silently skipped."""
    series = unplaced = False
    for (engine,), rows in sorted(group_by(run.rows, "engine").items()):
        ts = (run.report["engines"].get(engine) or {}).get("timeseries")
        if not isinstance(ts, dict):
            continue
        series = True
        ok = [r for r in rows if r["outcome"] == "ok"]
        # Whichever second a request falls in, each is in exactly one: the columns add up.
        for name, want in (
            ("requests", len(rows)),
            ("ok", len(ok)),
            ("output_tokens", sum(r["n_out"] or 0 for r in ok)),
        ):
            if isinstance(ts.get(name), list):
                v.exact("timeseries", engine, f"Σ {name}", sum(ts[name]), want)
        unplaced = unplaced or not check_timeseries(v, engine, ts, rows)
    if series and unplaced:
        v.notes.append("timeseries per second because its intervals are whole seconds of each process's wall clock, "
                       "which the raw log's monotonic times cannot be placed on (lines without t_wall_offset_ns); "
                       "the columns' totals are checked")  # fmt: skip
    stage_analysis = sorted(e for e, sec in (run.report.get("stages") or {}).items()
                            if isinstance(sec, dict) and sec.get("analysis"))  # fmt: skip
    if stage_analysis:
        v.notes.append(f"stages {', '.join(stage_analysis)} analysis because it is the report's reading of the "
                       "stage rows (knee, saturation), not a figure of the raw log; the rows it reads are checked")  # fmt: skip
    by_target = (run.report.get("tenants") or {}).get("by_target") or {}
    if any(t.get("long_vs_short") for sec in by_target.values() for t in (sec.get("tenants") or {}).values()):
        v.notes.append("tenants long_vs_short because it is a ratio of the parts' figures, which are checked "
                       "per part")  # fmt: skip
    if _has_messages(run.report):
        v.notes.append("error_messages texts because the report groups failures' texts into templates of its own and "
                       "keeps a few; their counts (total, top + other) are checked")  # fmt: skip
    if run.report.get("task_errors"):
        v.notes.append("task_errors because an exception in a user's task sends no request, so the raw log holds "
                       "nothing to count it from")  # fmt: skip


def _has_messages(report: dict[str, Any]) -> bool:
    for section in report.get("engines", {}).values():
        groups = [section, *(section.get("labels") or {}).values()]
        if any(isinstance(g, dict) and g.get("error_messages") for g in groups):
            return True
    return False


def conservation(run: Run, v: Verdict) -> None:
    """Every scheduled request accounted for once: scheduled = sent + dropped, sent = the raw
    log's lines = Σ outcomes, no request id twice."""
    cons, rows, s = run.report.get("conservation") or {}, run.rows, "conservation"
    v.exact(s, "raw log", "sent", cons.get("sent"), len(rows))
    v.exact(s, "raw log", "outcomes_total", cons.get("outcomes_total"), len(rows))
    ids: dict[str, str] = {}
    twice = []
    for r in rows:
        if r["request_id"] in ids:
            twice.append(f"{r['request_id']} ({ids[r['request_id']]}, {r['_where']})")
        ids.setdefault(r["request_id"], r["_where"])
    v.exact(s, "raw log", "request ids seen twice", [], twice)
    if cons.get("scheduled") is not None:
        v.exact(s, "report", "scheduled", cons["scheduled"], cons.get("sent", 0) + cons.get("dropped", 0))
    v.exact(s, "report", "in_flight", cons.get("in_flight"), cons.get("lost_in_flight", 0))
    v.exact(s, "report", "holds", cons.get("holds"), True)
    total = sum(e.get("requests", 0) for e in run.report["engines"].values())
    v.exact(s, "engines", "Σ requests", total, len(rows))


def engines(run: Run, v: Verdict, slos: dict[str, float], events: bool) -> None:
    report = run.report["engines"]
    by_engine = group_by(run.rows, "engine")
    v.exact("engines", "*", "names", sorted(report), sorted(k[0] for k in by_engine))
    slack = engine_slack_s(run)
    timed = slack is not None
    processes = len({r.get("worker") for r in run.rows})
    if not timed:
        v.notes.append("windows and rates (window_s, *_per_s) because the raw log comes from processes on several "
                       "machines, whose monotonic clocks the report's wall-clock windows cannot be matched with")  # fmt: skip
    elif processes > 1 and has_wall_offsets(run.rows):
        v.remarks.append(f"windows and rates of {processes} processes: each line's t_wall_offset_ns puts them on "
                         "the wall clock the report's windows were taken on (exact)")  # fmt: skip
    elif slack:
        v.remarks.append(f"windows and rates of {len({r.get('worker') for r in run.rows})} processes on one "
                       f"machine: within {slack * 1e3:g} ms of window (each process measured its own wall-clock "
                       "offset)")  # fmt: skip
    for (engine,), rows in sorted(by_engine.items()):
        section = report.get(engine)
        fig = figures(rows, slos, events)
        compare_group(v, "engines", engine, section, fig)
        seconds = window_s(rows) if timed else None
        compare_rates(v, "engines", engine, section, fig, seconds, slack or 0.0)
        compare_breakdown(v, "engines", engine, (section or {}).get("server_breakdown"), rows)
        labels = (section or {}).get("labels") or {}
        by_label = group_by(rows, "label")
        v.exact("engines", engine, "labels", sorted(labels), sorted(k[0] for k in by_label))
        for (label,), mine in sorted(by_label.items()):
            key, fig = f"{engine} / label {label}", figures(mine, slos, events)
            compare_group(v, "engines", key, labels.get(label), fig)
            compare_rates(
                v, "engines", key, labels.get(label), fig, seconds, slack or 0.0
            )  # shares of the engine's window
            compare_breakdown(v, "engines", key, (labels.get(label) or {}).get("server_breakdown"), mine)


def user_classes(run: Run, v: Verdict, slos: dict[str, float]) -> None:
    report = run.report.get("user_classes")
    rows = [r for r in run.rows if r.get("user_class") is not None]
    if report is None:
        if rows:
            v.notes.append("user_classes because the report has no such section")
        return
    s = "user_classes"
    by_class = group_by(rows, "user_class")
    v.exact(s, "*", "names", sorted(report), sorted(k[0] for k in by_class))
    # Rates: a class's totals over the run's window (every class's requests), a class's engine
    # and labels over that engine's window, so the classes' rates add up.
    slack = clock_slack_s(run)
    timed = slack is not None
    slack = slack or 0.0
    run_s = window_s(rows) if timed else None
    engine_s = {k[0]: window_s(g) for k, g in group_by(rows, "engine").items()} if timed else {}
    for (cls,), mine in sorted(by_class.items()):
        section = report.get(cls) or {}
        fig = figures(mine, slos, False)
        compare_group(v, s, cls, report.get(cls), fig)
        compare_rates(v, s, cls, report.get(cls), fig, run_s, slack)
        for (engine,), eng_rows in sorted(group_by(mine, "engine").items()):
            eng = (section.get("engines") or {}).get(engine)
            fig = figures(eng_rows, slos, False)
            compare_group(v, s, f"{cls} / {engine}", eng, fig)
            compare_rates(v, s, f"{cls} / {engine}", eng, fig, engine_s.get(engine), slack)
            for (label,), lab_rows in sorted(group_by(eng_rows, "label").items()):
                lab = ((eng or {}).get("labels") or {}).get(label)
                key, fig = f"{cls} / {engine} / label {label}", figures(lab_rows, slos, False)
                compare_group(v, s, key, lab, fig)
                compare_rates(v, s, key, lab, fig, engine_s.get(engine), slack)


def stages(run: Run, v: Verdict, slos: dict[str, float]) -> None:
    report = run.report.get("stages") or {}
    by_stage = group_by([r for r in run.rows if r.get("stage") is not None], "engine", "stage")
    unplanned: set[str] = set()
    for (engine, stage), mine in sorted(by_stage.items()):
        rows = {row.get("name"): row for row in (report.get(engine) or {}).get("stages") or []}
        if stage not in rows:
            # The section lists the scenario's planned stages only (a trace replay tags its
            # requests "trace" without a plan): nothing in the report to compare with.
            unplanned.add(str(stage))
            continue
        stats = rows[stage].get("stats")
        key = f"{engine} / stage {stage}"
        fig = figures(mine, slos, False)
        compare_group(
            v,
            "stages",
            key,
            stats,
            fig,
            NS_UNIT_MS,
            STAGE_METRICS,
            THREE,
            ("requests", "ok", "output_tokens"),
        )
        if stats is None:
            continue
        duration = rows[stage].get("duration_s")
        if duration:  # a stage's rates are over its planned duration, not a measured window
            v.close(
                "stages",
                key,
                "requests_per_s",
                stats.get("requests_per_s"),
                fig.counts["ok"] / duration,
                0,
                False,
            )
            v.close("stages", key, "output_tokens_per_s", stats.get("output_tokens_per_s"),
                    fig.counts["output_tokens"] / duration, 0, False)  # fmt: skip
        if fig.slo is not None and not fig.slo_unknown:
            if duration and fig.slo["judged"]:
                v.close(
                    "stages",
                    key,
                    "goodput_rps",
                    stats.get("goodput_rps"),
                    fig.slo["good"] / duration,
                    0,
                    False,
                )
            attained = fig.slo["good"] / fig.slo["judged"] if fig.slo["judged"] else None
            if attained is None:
                v.exact("stages", key, "slo_attainment", stats.get("slo_attainment"), None)
            else:
                v.close("stages", key, "slo_attainment", stats.get("slo_attainment"), attained, 0, False)
    warmups: set[str] = set()
    for engine, section in sorted(report.items()):
        for row in section.get("stages") or []:
            if row.get("warmup"):
                # Warm-up requests stay out of the run's stats and its raw log (the stage
                # table alone shows them): nothing to recompute this row from.
                warmups.add(str(row.get("name")))
            elif row.get("stats") is not None and (engine, row.get("name")) not in by_stage:
                key = f"{engine} / stage {row.get('name')}"
                v.exact("stages", key, "requests", row["stats"].get("requests"), 0)
    if warmups:
        v.notes.append(f"stages {', '.join(sorted(warmups))} because warm-up requests are not in the raw log")
    if unplanned:
        v.notes.append(
            f"stages {', '.join(sorted(unplanned))} because they are in the raw log, not in the report's stage plan"
        )


def session_ends(run: Run, v: Verdict, report: dict[str, Any]) -> None:
    """completed, broken, broken_by, broken_at_turn and ended_by per engine, from the session log."""
    if run.sessions is None:
        if any((e.get("completed") or 0) + (e.get("broken") or 0) for e in report.values()):
            v.notes.append("sessions completed / broken / broken_by / broken_at_turn / ended_by because the run has no "
                           "session log (sessions*.jsonl, written since the raw log has t_wall_offset_ns)")  # fmt: skip
        return
    mine: dict[str, dict[str, Any]] = {}
    for line in run.sessions:
        e = mine.setdefault(line["engine"], {"completed": 0, "broken": 0, "broken_by": {}, "broken_at_turn": {},
                                              "ended_by": {}})  # fmt: skip
        if line["status"] == "broken":
            e["broken"] += 1
            turn = max(1, line["at_turn"])
            for name, key in (("broken_by", line["ended_by"]),
                              ("broken_at_turn", str(turn) if turn < MAX_TURN else f"{MAX_TURN}+")):  # fmt: skip
                e[name][key] = e[name].get(key, 0) + 1
        else:
            e["completed"] += 1
            e["ended_by"][line["ended_by"]] = e["ended_by"].get(line["ended_by"], 0) + 1
    for engine in sorted(
        set(mine) | {k for k, e in report.items() if (e.get("completed") or e.get("broken"))}
    ):
        got, want = report.get(engine) or {}, mine.get(engine) or {}
        want = {**want, "sessions": want.get("completed", 0) + want.get("broken", 0)}
        for name in ("sessions", "completed", "broken", "broken_by", "broken_at_turn", "ended_by"):
            zero: Any = 0 if name in ("sessions", "completed", "broken") else {}
            v.exact("sessions", engine, name, got.get(name) or zero, want.get(name) or zero)


def sessions(run: Run, v: Verdict) -> None:
    report = run.report.get("sessions") or {}
    session_ends(run, v, report)
    rows = [r for r in run.rows if r.get("turn") is not None]
    # Grouped by the report's turn key: turns from MAX_TURN on share one row.
    by_key: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in rows:
        turn = int(r["turn"])
        by_key.setdefault((r["engine"], str(turn) if turn < MAX_TURN else f"{MAX_TURN}+"), []).append(r)
    unlogged_prefix: set[str] = set()
    for (engine, turn_key), mine in sorted(by_key.items()):
        cell = ((report.get(engine) or {}).get("turns") or {}).get(turn_key)
        key = f"{engine} / turn {turn_key}"
        if cell is None:
            v.exact("sessions", key, "present", "missing", "present")
            continue
        ok = [r for r in mine if r["outcome"] == "ok"]
        v.exact("sessions", key, "requests", cell.get("requests"), len(mine))
        v.exact("sessions", key, "ok", cell.get("ok"), len(ok))
        ttft = sorted((r["t_first_ns"] - r["t_send_ns"]) / 1e6 for r in ok if r["t_first_ns"] is not None)
        compare_summary(v, "sessions", key, "ttft_ms", cell.get("ttft_ms") or {}, ttft, 1e-6, THREE)
        ttfat = sorted(
            (r["t_first_answer_ns"] - r["t_send_ns"]) / 1e6 for r in ok if r.get("t_first_answer_ns")
        )
        compare_summary(v, "sessions", key, "ttfat_ms", cell.get("ttfat_ms") or {}, ttfat, 1e-6, THREE)
        if all("expected_cached_tokens" in r for r in ok):
            prefix_cache(v, key, cell, ok)
        elif "prefix_expected_ratio" in cell:
            unlogged_prefix.add(engine)
    if unlogged_prefix:
        v.notes.append(f"sessions {', '.join(sorted(unlogged_prefix))} turns' prefix-cache ratios because the raw "
                       "log has no expected_cached_tokens (written before it was logged)")  # fmt: skip


def prefix_cache(v: Verdict, key: str, cell: dict[str, Any], ok: list[dict[str, Any]]) -> None:
    """A turn's prefix the workload expected cached against what the server reported, over its
    ok requests: Σ expected (reported) cached tokens over Σ input tokens; the reported side only
    when at least one server reply said how many were cached."""
    n_in = sum(r["n_in"] for r in ok if r["n_in"] is not None)
    expected = sum(r["expected_cached_tokens"] or 0 for r in ok)
    reported = [r["cached_tokens"] for r in ok if r.get("cached_tokens") is not None]
    v.exact("sessions", key, "expected_cached_tokens", cell.get("expected_cached_tokens"), expected)
    v.exact("sessions", key, "reported_cached_tokens", cell.get("reported_cached_tokens"),
            sum(reported) if reported else None)  # fmt: skip
    for figure, mine in (("prefix_expected_ratio", expected / n_in if n_in else None),
                         ("prefix_reported_ratio", sum(reported) / n_in if n_in and reported else None)):  # fmt: skip
        if mine is None or cell.get(figure) is None:
            v.exact("sessions", key, figure, cell.get(figure), mine)
        else:
            v.close("sessions", key, figure, cell.get(figure), mine, 0.0, False)


# lengths.by_target: report key -> raw-log field, over every request that has the field.
LENGTH_FIELDS = (("input_target", "n_in_target"), ("input_server", "n_in"), ("output_server", "n_out"),
                 ("output_asked", "max_tokens"))  # fmt: skip


def lengths(run: Run, v: Verdict) -> None:
    """Asked against realised lengths per target; ``output_asked`` (max_tokens) only from raw
    logs that have the field (written since it was added)."""
    report = (run.report.get("lengths") or {}).get("by_target")
    if report is None:
        return
    s = "lengths"
    by_engine = group_by(run.rows, "engine")
    if (run.report.get("lengths") or {}).get("workload_sources"):
        v.notes.append("lengths.workload_sources because they are the workload generators' own notes of "
                       "their sources (what each realised of the asked lengths), which the raw log does not hold")  # fmt: skip
    unsplit = []
    for (engine,), rows in sorted(by_engine.items()):
        section = report.get(engine)
        if section is None:
            v.exact(s, engine, "present", "missing", "present")
            continue
        check_buckets(v, engine, section.get("by_input_tokens"), rows)
        if not check_reasoning(v, engine, section.get("reasoning"), rows):
            if section.get("reasoning") is not None:
                unsplit.append(engine)
        for key, name in LENGTH_FIELDS:
            if not all(name in r for r in rows):
                v.notes.append(
                    f"lengths {engine} {key} because the raw log has no {name} (written before it was logged)"
                )
                continue
            values = sorted(r[name] for r in rows if r.get(name) is not None)
            compare_summary(v, s, engine, key, section.get(key) or {}, values, TOKEN_UNIT, THREE)
        both = [r for r in rows if r.get("n_in") is not None and r.get("n_in_target") is not None]
        drift = section.get("prompt_drift") or {}
        v.exact(s, engine, "prompt_drift.requests", drift.get("requests"), len(both))
        if both:
            v.exact(
                s,
                engine,
                "prompt_drift.exact",
                drift.get("exact"),
                sum(r["n_in"] == r["n_in_target"] for r in both),
            )
            gaps = sorted(abs(r["n_in"] - r["n_in_target"]) for r in both)
            compare_summary(
                v,
                s,
                engine,
                "prompt_drift.abs_tokens",
                drift.get("abs_tokens") or {},
                gaps,
                TOKEN_UNIT,
                THREE,
            )
            asked = sum(r["n_in_target"] for r in rows if r.get("n_in_target") is not None)
            if asked:
                v.close(
                    s,
                    engine,
                    "prompt_drift.mean_relative",
                    drift.get("mean_relative"),
                    sum(gaps) / asked,
                    0,
                    False,
                )
    if unsplit:
        v.notes.append(f"lengths {', '.join(unsplit)} reasoning because the raw log has no "
                       "expected_reasoning_tokens (written before it was logged)")  # fmt: skip
