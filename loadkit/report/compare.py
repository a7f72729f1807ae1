"""``loadkit compare A B [C ...]``: the same metrics side by side, the change, and CI gating.

Each argument is a report directory, a report.json, or a peer tool's result file
(loadkit/report/peers/). The first run is the baseline; every later run is compared with it, engine by engine (matched by name). Where both runs wrote raw
logs, a seeded bootstrap gives a 95 % interval for the change of p50/p90/p99 of the
per-request latencies. ``--fail-if`` rules make the exit code 1 when a regression is found.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from loadkit.errors import UserError
from loadkit.report import peers
from loadkit.report.bootstrap import diff_ci
from loadkit.report.costtiers import engine_metrics, extra_metrics
from loadkit.report.gpu import compare_metrics as gpu_metrics
from loadkit.report.gpu import engine_metrics as gpu_engine_metrics
from loadkit.report.manifest import condition_rows
from loadkit.report.rawdata import RawData, load_raw
from loadkit.report.rules import Rule, RuleError, metric_value, parse_rule
from loadkit.report.sameprompts import same_prompts_warning

STATS = ("p50", "p90", "p99")
LATENCIES = ("ttft_ms", "ttfat_ms", "tpot_ms", "itl_ms", "e2e_ms", "answer_tpot_ms")
RATES = ("requests_per_s", "output_tokens_per_s", "goodput_per_s", "error_rate")
METRICS = RATES + tuple(f"{m}.{s}" for m in LATENCIES for s in STATS)
LATER_METRICS = ("ttfat_ms", "answer_tpot_ms")  # output channels: absent from older reports
RAW_METRICS = ("ttft_ms", "ttfat_ms", "tpot_ms", "e2e_ms")  # the raw log has no per-token ITL values
QS = {"p50": 0.5, "p90": 0.9, "p99": 0.99}


@dataclass
class Run:
    arg: str
    folder: Path
    report: dict[str, Any]
    raw: RawData | None = None

    def engines(self) -> dict[str, dict[str, Any]]:
        engines = self.report.get("engines")
        # Cost and tier figures sit beside each engine section (report/costtiers.py).
        return (
            {
                e: {**s, **engine_metrics(self.report, e), **gpu_engine_metrics(self.report, e)}
                for e, s in engines.items()
            }
            if isinstance(engines, dict)
            else {}
        )


@dataclass
class Pair:
    """One engine of the baseline matched with one engine of a later run."""

    base: Run
    other: Run
    engine_a: str
    engine_b: str
    note: str = ""
    rows: list[dict[str, Any]] = field(default_factory=list)


def load_run(arg: str, with_raw: bool) -> Run:
    path = Path(arg)
    file = path / "report.json" if path.is_dir() else path
    if path.is_dir() and not file.is_file():
        file = peers.folder_entry(path) or file  # a peer's result folder (genai-bench's experiment)
    if not file.is_file():
        raise UserError(f"{arg}: no report.json there")
    if file.name != "report.json":  # a peer tool's result file (GuideLLM, AIPerf ...) or a renamed report
        data = peers.read_json(file)
        if not (isinstance(data, dict) and isinstance(data.get("engines"), dict)):
            return Run(arg, file.parent, peers.convert(data, file))  # no raw log: no bootstrap intervals
    try:
        report = orjson.loads(file.read_bytes())
    except (orjson.JSONDecodeError, OSError) as exc:
        raise UserError(f"{file}: not a readable report: {exc}") from None
    if not isinstance(report, dict) or not isinstance(report.get("engines"), dict):
        raise UserError(f"{file}: not a loadkit report (no engines section)")
    return Run(arg, file.parent, report, load_raw(file.parent) if with_raw else None)


def match_engines(base: Run, other: Run, engine: str | None) -> list[Pair]:
    a, b = base.engines(), other.engines()
    if engine is not None:
        for run, engines in ((base, a), (other, b)):
            if engine not in engines:
                raise UserError(f"{run.arg}: no engine {engine!r} (has: {', '.join(engines) or 'none'})")
        return [Pair(base, other, engine, engine)]
    common = [e for e in a if e in b]
    if common:
        return [Pair(base, other, e, e) for e in common]
    if len(a) == 1 and len(b) == 1:
        (ea,), (eb,) = a, b
        return [Pair(base, other, ea, eb, f"different engine names: comparing {ea!r} with {eb!r}")]
    raise UserError(f"{base.arg} and {other.arg} have no engine in common ({', '.join(a)} vs {', '.join(b)}); "
                    "pick one with --engine")  # fmt: skip


def _change(a: float | None, b: float | None) -> tuple[float | None, float | None]:
    if a is None or b is None:
        return None, None
    pct = None if a == 0 else (b - a) / abs(a) * 100.0
    return b - a, pct


def fill_rows(pair: Pair, resamples: int, seed: int) -> None:
    sa, sb = pair.base.engines()[pair.engine_a], pair.other.engines()[pair.engine_b]
    cis = _cis(pair, resamples, seed)
    for metric in METRICS + extra_metrics(sa, sb) + gpu_metrics(sa, sb):
        a, b = _table_value(sa, metric), _table_value(sb, metric)
        delta, pct = _change(a, b)
        ci = cis.get(metric)
        pair.rows.append({"metric": metric, "a": a, "b": b, "delta": delta, "delta_pct": pct,
                          "ci95": None if ci is None else list(ci),
                          "significant": None if ci is None else bool(ci[0] > 0 or ci[1] < 0)})  # fmt: skip


def _table_value(section: dict[str, Any], metric: str) -> float | None:
    """A table metric; one a report from before it existed lacks is not measured (rules on it
    still name the unknown metric)."""
    if metric.split(".")[0] in LATER_METRICS and metric.split(".")[0] not in section:
        return None
    if metric.startswith("slo_tiers.") and metric.split(".")[1] not in section["slo_tiers"]:
        return None  # a tier only the other run has
    return metric_value(section, metric)


def _cis(pair: Pair, resamples: int, seed: int) -> dict[str, tuple[float, float] | None]:
    """Bootstrap intervals for RAW_METRICS × STATS when both runs have raw logs."""
    ra, rb = pair.base.raw, pair.other.raw
    if ra is None or rb is None:
        return {}
    out: dict[str, tuple[float, float] | None] = {}
    for metric in RAW_METRICS:
        intervals = diff_ci(ra.values(metric, pair.engine_a), rb.values(metric, pair.engine_b),
                            [QS[s] for s in STATS], resamples=resamples, seed=seed)  # fmt: skip
        out.update({f"{metric}.{s}": ci for s, ci in zip(STATS, intervals, strict=True)})
    return out


def evaluate(rule: Rule, pairs: list[Pair], require_significant: bool) -> list[str]:
    """One line per firing (pair, rule); empty when the rule holds everywhere."""
    fired = []
    for pair in pairs:
        a = metric_value(pair.base.engines()[pair.engine_a], rule.metric)
        b = metric_value(pair.other.engines()[pair.engine_b], rule.metric)
        if not rule.fires(a, b):
            continue
        row = next((r for r in pair.rows if r["metric"] == rule.metric), None)
        if require_significant and row is not None and row["significant"] is False:
            continue
        fired.append(f"{_who(pair)}: {_fmt(a)} -> {_fmt(b)}"
                     + ("" if a is None or b is None else f" ({_signed(rule.change(a, b), rule.percent)})")
                     + (" [not measured]" if a is None or b is None else ""))  # fmt: skip
    return fired


def _who(pair: Pair) -> str:
    names = pair.engine_a if pair.engine_a == pair.engine_b else f"{pair.engine_a}/{pair.engine_b}"
    return f"{pair.other.arg} engine {names}"


def _fmt(v: float | None) -> str:
    return "not measured" if v is None else f"{v:.4g}"


def _signed(v: float | None, percent: bool) -> str:
    if v is None:
        return "—"
    return f"{v:+.1f}%" if percent else f"{v:+.4g}"


def render_text(pairs: list[Pair]) -> str:
    lines = []
    for pair in pairs:
        lines.append(f"\n{pair.base.arg} [{pair.engine_a}]  vs  {pair.other.arg} [{pair.engine_b}]")
        if pair.note:
            lines.append(f"  note: {pair.note}")
        for side, run in (("A", pair.base), ("B", pair.other)):
            lines += [f"  note ({side}): {line}" for line in peers.notes(run.report)]
        lines.append(f"  {'metric':<22}{'A':>12}{'B':>12}{'change':>12}{'change %':>10}  95% CI of change")
        for r in pair.rows:
            ci = (
                ""
                if r["ci95"] is None
                else f"[{r['ci95'][0]:+.3g}, {r['ci95'][1]:+.3g}]" + (" *" if r["significant"] else "")
            )
            lines.append(f"  {r['metric']:<22}{_fmt(r['a']):>12}{_fmt(r['b']):>12}{_signed(r['delta'], False):>12}"
                         f"{_signed(r['delta_pct'], True):>10}  {ci}")  # fmt: skip
    if any(r["ci95"] for p in pairs for r in p.rows):
        lines.append("\n  * the 95% bootstrap interval of the change excludes 0 (from the raw logs)")
    return "\n".join(lines)


def render_conditions(differ: dict[str, dict[str, list[str | None]]]) -> str:
    lines = []
    for run, diffs in differ.items():
        if not diffs:
            lines.append(f"\nconditions of {run}: same as the baseline")
            continue
        lines.append(f"\nconditions of {run} that differ from the baseline:")
        for label, (a, b) in diffs.items():
            lines.append(f"  {label}: {_short(a)}  ->  {_short(b)}")
    return "\n".join(lines)


def _short(text: str | None) -> str:
    if text is None:
        return "not recorded"
    return text if len(text) <= 80 else text[:77] + "..."


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="loadkit compare", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument(
        "runs",
        nargs="+",
        metavar="RUN",
        help="report directories, report.json files or peers' result files (GuideLLM benchmarks.json, "
        "AIPerf profile_export_aiperf.json, vLLM bench serve JSON, SGLang bench_serving JSONL, "
        "genai-bench run files or experiment_metadata.json); the first is the baseline",
    )
    p.add_argument("--engine", help="compare only this engine (default: every engine present in both)")
    p.add_argument(
        "--fail-if",
        action="append",
        default=[],
        metavar="RULE",
        help='exit 1 when RULE fires, e.g. "ttft_ms.p99>+10%%", "tpot_ms.p50>+5", "goodput.rps<-10%%"',
    )
    p.add_argument(
        "--require-significant",
        action="store_true",
        help="a rule on a metric with a bootstrap interval fires only when the interval excludes 0",
    )
    p.add_argument("--json", action="store_true", help="print the comparison as JSON")
    p.add_argument("--no-raw-log", action="store_true", help="skip the raw logs (no confidence intervals)")
    p.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples (bounded for big logs)")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    return p


def compare_runs(args: Sequence[str], *, engine: str | None = None, rules: Sequence[str] = (),
                 with_raw: bool = True, resamples: int = 1000, seed: int = 0,
                 require_significant: bool = False) -> dict[str, Any]:  # fmt: skip
    """The comparison as a dict (what ``--json`` prints); ``exit_code`` 1 when a rule fired.

    Raises UserError for unreadable runs, unknown engines and bad rules.
    """
    return _compare(args, engine, rules, with_raw, resamples, seed, require_significant)[0]


def _compare(args: Sequence[str], engine: str | None, rules: Sequence[str], with_raw: bool, resamples: int,
             seed: int, require_significant: bool) -> tuple[dict[str, Any], list[Pair]]:  # fmt: skip
    if len(args) < 2:
        raise UserError("compare needs at least two runs")
    try:
        parsed = [parse_rule(r) for r in rules]
        runs = [load_run(a, with_raw) for a in args]
        pairs = [p for other in runs[1:] for p in match_engines(runs[0], other, engine)]
        for pair in pairs:
            fill_rows(pair, resamples, seed)
        results = [{"rule": r.text, "fired": (f := evaluate(r, pairs, require_significant)) != [], "details": f}
                   for r in parsed]  # fmt: skip
    except RuleError as exc:
        raise UserError(str(exc)) from None
    differ = {other.arg: conditions_differ(runs[0], other) for other in runs[1:]}
    warnings = [w for other in runs[1:] if (w := same_prompts_warning(runs[0].report, other.report, runs[0].arg,
                                                                       other.arg)) is not None]  # fmt: skip
    result = {"baseline": args[0], "comparisons": [_pair_json(p) for p in pairs], "rules": results,
              "conditions_differ": differ, "warnings": warnings,
              "exit_code": 1 if any(r["fired"] for r in results) else 0}  # fmt: skip
    return result, pairs


# Conditions that should match for a fair comparison (duration and host are expected to vary).
COMPARABLE = ("scenario file", "scenario hash (sha256)", "seed", "arrival model", "open loop",
              "concurrency (users, spawn rate)", "stages", "duration asked", "loadkit version", "Locust version",
              "Python version", "client CPU model", "client CPU cores", "worker processes", "SLOs")  # fmt: skip


def _servers(report: dict[str, Any]) -> str | None:
    """What each target's server said about itself (model, version), without URLs or ports."""
    targets = (report.get("manifest") or {}).get("targets")
    if not isinstance(targets, list):
        return None
    said = [f"{t.get('name')}: {t.get('server')}" for t in targets if isinstance(t, dict)]
    return "; ".join(sorted(said)) or None


def conditions_differ(base: Run, other: Run) -> dict[str, list[str | None]]:
    """{condition: [baseline value, other value]} for the comparable conditions that differ."""
    a, b = dict(condition_rows(base.report)), dict(condition_rows(other.report))
    a["servers"], b["servers"] = _servers(base.report), _servers(other.report)
    return {k: [a.get(k), b.get(k)] for k in (*COMPARABLE, "servers") if a.get(k) != b.get(k)}


def _pair_json(pair: Pair) -> dict[str, Any]:
    return {"run": pair.other.arg, "engine_a": pair.engine_a, "engine_b": pair.engine_b, "note": pair.note or None,
            "raw_logs": pair.base.raw is not None and pair.other.raw is not None, "metrics": pair.rows,
            "peer_notes": {"a": peers.notes(pair.base.report), "b": peers.notes(pair.other.report)}}  # fmt: skip


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    if args.resamples < 1:
        raise UserError("--resamples must be at least 1")
    result, pairs = _compare(args.runs, args.engine, args.fail_if, not args.no_raw_log, args.resamples, args.seed,
                             args.require_significant)  # fmt: skip
    if args.json:
        sys.stdout.write(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        print(render_text(pairs))
        print(render_conditions(result["conditions_differ"]))
        for warning in result["warnings"]:
            print(f"\nwarning: {warning}")
        for r in result["rules"]:
            print(f"\n{'FAIL' if r['fired'] else 'pass'}  --fail-if {r['rule']}")
            for line in r["details"]:
                print(f"      {line}")
    return int(result["exit_code"])
