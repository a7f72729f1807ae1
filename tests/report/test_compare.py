"""loadkit compare: matching, change maths, bootstrap intervals, --fail-if rules and exit codes."""

import math

import numpy as np
import orjson
import pytest

from loadkit.cli import main as cli_main
from loadkit.errors import UserError
from loadkit.report.bootstrap import diff_ci, resamples_for
from loadkit.report.compare import compare_runs
from loadkit.report.rules import RuleError, metric_value, parse_rule
from tests.report.conftest import make_rows, write_run


@pytest.fixture
def two_runs(tmp_path):
    a = write_run(tmp_path / "A", {"e": make_rows("e", 300, 1, ttft_scale=20.0, tpot=5.0)})
    b = write_run(tmp_path / "B", {"e": make_rows("e", 300, 2, ttft_scale=40.0, tpot=5.0)})
    return str(a), str(b)


def row(result, metric, i=0):
    return next(r for r in result["comparisons"][i]["metrics"] if r["metric"] == metric)


def test_rule_parsing():
    r = parse_rule("ttft_ms.p99>+10%")
    assert (r.metric, r.op, r.threshold, r.percent) == ("ttft_ms.p99", ">", 10.0, True)
    r = parse_rule(" tpot_ms.p50 > +5 ")
    assert (r.threshold, r.percent) == (5.0, False)
    assert parse_rule("goodput.rps<-10%").metric == "goodput_per_s"
    for bad in ("ttft_ms.p99", "ttft_ms.p99>>1", "ttft_ms.p99>ten%", ">5%"):
        with pytest.raises(RuleError):
            parse_rule(bad)


@pytest.mark.parametrize("rule,a,b,fires", [
    ("x>+10%", 100.0, 110.0, False), ("x>+10%", 100.0, 110.1, True), ("x<-10%", 100.0, 89.0, True),
    ("x<-10%", 100.0, 95.0, False), ("x>+5", 10.0, 15.0, False), ("x>+5", 10.0, 15.5, True),
    ("x>+10%", 0.0, 0.0, False), ("x>+10%", 0.0, 1.0, True), ("x>+10%", None, 1.0, True), ("x<-1%", 5.0, None, True),
])  # fmt: skip
def test_rule_firing(rule, a, b, fires):
    assert parse_rule(rule).fires(a, b) is fires


def test_metric_paths_and_aliases():
    sec = {
        "ttft_ms": {"p99": 12.0, "p50": None},
        "goodput_per_s": 3.0,
        "requests": 10,
        "failures": 2,
        "slo": None,
    }
    assert metric_value(sec, "ttft_ms.p99") == 12.0 and metric_value(sec, "ttft_ms.p50") is None
    assert metric_value(sec, "goodput.rps") == 3.0 and metric_value(sec, "error_rate") == 0.2
    assert metric_value(sec, "goodput.fraction") is None  # no SLO given: not measured, not an error
    with pytest.raises(RuleError):
        metric_value(sec, "ttfb_ms.p99")
    with pytest.raises(RuleError):
        metric_value(sec, "ttft_ms")  # a summary, not a number


def test_changes_and_intervals_find_a_doubled_ttft(two_runs):
    result = compare_runs(two_runs, seed=1)
    r = row(result, "ttft_ms.p50")
    assert r["b"] / r["a"] == pytest.approx(2.0, rel=0.15)
    assert r["delta"] == pytest.approx(r["b"] - r["a"]) and r["delta_pct"] == pytest.approx(
        100 * (r["b"] / r["a"] - 1)
    )
    lo, hi = r["ci95"]
    assert 0 < lo < r["delta"] < hi and r["significant"] is True
    assert row(result, "tpot_ms.p50")["significant"] is False  # same TPOT distribution
    assert row(result, "itl_ms.p50")["ci95"] is None  # not in the raw log


def test_bootstrap_interval_covers_the_true_shift():
    rng = np.random.default_rng(5)
    hits = 0
    for trial in range(20):
        a, b = rng.normal(100, 10, 400), rng.normal(103, 10, 400)
        ((lo, hi),) = diff_ci(a, b, [0.5], resamples=300, seed=trial)
        hits += lo <= 3.0 <= hi
    assert hits >= 16  # ~95% coverage; 16/20 fails only by bad luck (p < 0.02)
    assert diff_ci(np.array([1.0]), b, [0.5]) == [None]
    assert resamples_for(10, 1000) == 1000 and resamples_for(10**6, 1000) == 200


def test_bootstrap_is_seeded(two_runs):
    assert (
        row(compare_runs(two_runs, seed=3), "ttft_ms.p99")["ci95"]
        == row(compare_runs(two_runs, seed=3), "ttft_ms.p99")["ci95"]
    )


def test_rules_set_the_exit_code(two_runs):
    assert compare_runs(two_runs, rules=["ttft_ms.p50>+50%"])["exit_code"] == 1
    assert compare_runs(two_runs, rules=["ttft_ms.p50>+500%"])["exit_code"] == 0
    res = compare_runs(two_runs, rules=["ttft_ms.p50>+500%", "tpot_ms.p50>+50", "ttft_ms.p90>+1"])
    assert [r["fired"] for r in res["rules"]] == [False, False, True]
    assert "engine e" in res["rules"][2]["details"][0]


def test_require_significant_ignores_noise(two_runs):
    noise = "tpot_ms.p50>-50%"  # the same TPOT distribution: fires on any change, significant or not
    assert compare_runs(two_runs, rules=[noise])["exit_code"] == 1
    assert compare_runs(two_runs, rules=[noise], require_significant=True)["exit_code"] == 0
    assert compare_runs(two_runs, rules=["ttft_ms.p50>+10%"], require_significant=True)["exit_code"] == 1


def test_engine_matching(tmp_path):
    a = write_run(tmp_path / "A", {"x": make_rows("x", 40, 1), "y": make_rows("y", 40, 2)})
    b = write_run(tmp_path / "B", {"y": make_rows("y", 40, 3), "z": make_rows("z", 40, 4)})
    c = write_run(tmp_path / "C", {"w": make_rows("w", 40, 5)})
    d = write_run(tmp_path / "D", {"v": make_rows("v", 40, 6)})
    res = compare_runs([str(a), str(b)])
    assert [(p["engine_a"], p["engine_b"]) for p in res["comparisons"]] == [("y", "y")]
    res = compare_runs([str(c), str(d)])
    assert res["comparisons"][0]["note"] == "different engine names: comparing 'w' with 'v'"
    with pytest.raises(UserError, match="no engine in common"):
        compare_runs([str(a), str(c)])
    with pytest.raises(UserError, match="no engine 'x'"):
        compare_runs([str(a), str(b)], engine="x")


def test_three_runs_compare_each_with_the_first(tmp_path):
    runs = [
        str(write_run(tmp_path / n, {"e": make_rows("e", 50, i)}, raw=False)) for i, n in enumerate("ABC")
    ]
    res = compare_runs(runs)
    assert [c["run"] for c in res["comparisons"]] == runs[1:]
    assert all(r["ci95"] is None for c in res["comparisons"] for r in c["metrics"])  # no raw logs


def test_report_json_argument_and_bad_inputs(two_runs, tmp_path):
    a, b = two_runs
    assert compare_runs([f"{a}/report.json", b])["comparisons"]
    (tmp_path / "bad.json").write_text("{}")
    for args in ([a], [a, str(tmp_path / "nope")], [a, str(tmp_path / "bad.json")]):
        with pytest.raises(UserError):
            compare_runs(args)
    with pytest.raises(UserError, match="unknown metric"):
        compare_runs([a, b], rules=["ttfx.p99>+1%"])


def test_cli_exit_codes_and_json(two_runs, capsys):
    a, b = two_runs
    assert cli_main(["compare", a, b, "--fail-if", "ttft_ms.p50>+10%"]) == 1
    out = capsys.readouterr().out
    assert "FAIL  --fail-if ttft_ms.p50>+10%" in out and "95% CI" in out
    assert cli_main(["compare", a, b, "--fail-if", "ttft_ms.p50>+10000%", "--json"]) == 0
    data = orjson.loads(capsys.readouterr().out)
    assert data["exit_code"] == 0 and data["rules"][0]["fired"] is False
    assert math.isfinite(data["comparisons"][0]["metrics"][0]["a"])
    assert cli_main(["compare", a, b, "--fail-if", "nonsense"]) == 2
    assert "bad --fail-if rule" in capsys.readouterr().err


def test_loadkit_report_cli(two_runs, capsys, tmp_path):
    a, _ = two_runs
    assert cli_main(["report", a]) == 0
    assert "report.html" in capsys.readouterr().out
    assert cli_main(["report", str(tmp_path / "missing")]) == 2
    assert cli_main(["report", a, "--no-raw-log", "-o", str(tmp_path / "x.html")]) == 0
    page = (tmp_path / "x.html").read_text()
    # Without the raw log: TTFT over time is not measured; the bucket table is report.json's.
    assert 'data-missing="ttft-ts"' in page and 'data-plot="length-buckets"' in page


def test_conditions_that_differ_are_shown(tmp_path, capsys):
    a = write_run(tmp_path / "A", {"e": make_rows("e", 30, 1)}, raw=False)
    b = write_run(tmp_path / "B", {"e": make_rows("e", 30, 2)}, raw=False)
    report = orjson.loads((b / "report.json").read_bytes())
    report["manifest"]["scenario"]["seed"] = 4
    report["manifest"]["targets"][0]["server"]["engine_version"] = "0.12"
    report["manifest"]["targets"][0]["url"] = "http://127.0.0.1:2"  # a new port is not a new condition
    (b / "report.json").write_bytes(orjson.dumps(report))
    differ = compare_runs([str(a), str(b)])["conditions_differ"][str(b)]
    assert set(differ) == {"seed", "servers"} and differ["seed"] == ["3", "4"]
    assert cli_main(["compare", str(a), str(b)]) == 0
    assert "that differ from the baseline:\n  seed: 3  ->  4" in capsys.readouterr().out
    assert compare_runs([str(a), str(a)])["conditions_differ"] == {str(a): {}}


def _with_prompts(folder, salt, seed=3):
    report = orjson.loads((folder / "report.json").read_bytes())
    report["manifest"]["scenario"].update(seed=seed, sha256="ab" * 32)
    if salt is None:
        report["manifest"].pop("prompts", None)  # a report from before prompts were salted
    else:
        report["manifest"]["prompts"] = {"salt": salt, "salt_from": "random", "repeat_with": f"--seed {salt}"}
    (folder / "report.json").write_bytes(orjson.dumps(report))
    return str(folder)


def test_compare_warns_when_two_runs_sent_the_same_prompts(tmp_path, capsys):
    runs = {name: write_run(tmp_path / name, {"e": make_rows("e", 30, i)}, raw=False)
            for i, name in enumerate("ABCDE")}  # fmt: skip
    a = _with_prompts(runs["A"], 41)
    same = _with_prompts(runs["B"], 41)
    salted = _with_prompts(runs["C"], 42)
    old, old_too = _with_prompts(runs["D"], None), _with_prompts(runs["E"], 0)  # unsalted, both
    result = compare_runs([a, same, salted])
    assert result["warnings"] == [
        f"{same} sent the same prompts as {a} (same scenario, seed 3, prompt salt 41): a server with a prefix "
        "cache may have answered the later run from it; for an A/B comparison rerun without --seed"
    ]
    assert compare_runs([old, old_too])["warnings"][0].startswith(f"{old_too} sent the same prompts as {old} (same "
                                                                  "scenario, seed 3, no prompt salt)")  # fmt: skip
    assert compare_runs([a, _with_prompts(runs["C"], 41, seed=4)])["warnings"] == []  # another scenario seed
    assert cli_main(["compare", a, same, "--no-raw-log"]) == 0
    assert f"\nwarning: {same} sent the same prompts as {a}" in capsys.readouterr().out


def test_the_report_shows_the_prompt_salt_to_repeat_and_compare_does_not_count_it_a_difference(tmp_path):
    from loadkit.report.manifest import condition_rows

    a = _with_prompts(write_run(tmp_path / "A", {"e": make_rows("e", 30, 1)}, raw=False), 41)
    b = _with_prompts(write_run(tmp_path / "B", {"e": make_rows("e", 30, 2)}, raw=False), 42)
    rows = dict(condition_rows(orjson.loads((tmp_path / "A" / "report.json").read_bytes())))
    assert rows["prompt salt (--seed to repeat the prompts)"] == "41"
    assert compare_runs([a, b])["conditions_differ"][b] == {}  # a fresh salt per run is the point
