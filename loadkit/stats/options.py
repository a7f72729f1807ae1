"""loadkit's stats options on Locust's parser, and their parsed form."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

from loadkit.stats.metrics import SLO_KEYS, Slo
from loadkit.stats.validity import DEFAULT_MAX_FAILED_SHARE, EXIT_ON_ERROR

DEFAULT_STATS_INTERVAL_S = 5.0
DEFAULT_FINAL_WAIT_S = 5.0


def parse_slo_item(text: str) -> list[Slo]:
    """``ttft_ms=500`` (or several, comma-separated) → Slo objects; argparse type function."""
    slos = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or key not in SLO_KEYS:
            raise argparse.ArgumentTypeError(
                f"--slo wants KEY=VALUE with KEY one of {', '.join(SLO_KEYS)}; got {item!r}"
            )
        try:
            limit = float(value)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"--slo {key}: {value!r} is not a number of milliseconds"
            ) from None
        if not limit > 0:
            raise argparse.ArgumentTypeError(f"--slo {key}: the limit must be > 0 ms, got {value}")
        slos.append(Slo(key, limit))
    return slos


def validated_slo(text: str) -> str:
    """argparse type for --slo: checked now, kept as text because parsed options cross the
    master→worker wire (msgpack) where a Slo object would not survive."""
    parse_slo_item(text)
    return text


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def percent(text: Any) -> float:
    """argparse type: a share in percent, 0..100 (kept in percent: the web UI's form shows the
    value and hands back what is typed, converted with the default's type)."""
    try:
        value = float(str(text).strip().rstrip("%"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a percentage") from None
    if not 0 <= value <= 100:
        raise argparse.ArgumentTypeError(f"must be between 0 and 100 (percent), got {text}")
    return value


def add_stats_arguments(group: Any) -> None:
    """Add the stats options to loadkit's argument group on Locust's parser."""
    # Empty by default: the timestamp is taken when each run starts (stats/rundir.py), not
    # when the process does (one web-UI process used to write every run into one directory).
    group.add_argument("--report-dir", default="", env_var="LOADKIT_REPORT_DIR",
                       help="directory for report.json, stats.csv, timeseries.csv and the raw log "
                            "(default: reports/<UTC start time of each run>); one directory per run: "
                            "when DIR exists and is not empty, or an earlier run of this process used it, "
                            "the run writes DIR-2, DIR-3 … instead; workers write their raw logs there too")  # fmt: skip
    group.add_argument("--raw-log", action="store_true", default=False, env_var="LOADKIT_RAW_LOG",
                       help="also write one JSON line per request (requests.jsonl; "
                            "requests.worker<N>.jsonl on distributed workers)")  # fmt: skip
    group.add_argument("--raw-log-events", action="store_true", default=False, env_var="LOADKIT_RAW_LOG_EVENTS",
                       help="with --raw-log: every token event's arrival time and token count in each line "
                            "(event_t_ns, event_tokens): per-token timelines, exact ITL checks")  # fmt: skip
    # In the web UI's form too (one comma-separated string there; the glue validates it at start).
    group.add_argument("--slo", action="append", type=validated_slo, default=None, metavar="KEY=MS",
                       env_var="LOADKIT_SLO", include_in_web_ui=True,
                       help="service-level objective for goodput, repeatable or comma-separated: "
                            f"KEY is one of {', '.join(SLO_KEYS)}; e.g. --slo ttft_ms=500 --slo tpot_ms=50")  # fmt: skip
    group.add_argument("--max-failed-share", type=percent, default=100 * DEFAULT_MAX_FAILED_SHARE, metavar="PCT",
                       env_var="LOADKIT_MAX_FAILED_SHARE", include_in_web_ui=True,
                       help="the run is invalid (exit code 3) when more than PCT percent of a target's requests "
                            "failed; cancelled requests (stopped by the test) do not count (default 50; 100: never)")  # fmt: skip
    # Interval and table switches are console matters: useless in the web UI's start form.
    group.add_argument("--stats-interval", type=_positive_float, default=DEFAULT_STATS_INTERVAL_S,
                       env_var="LOADKIT_STATS_INTERVAL", include_in_web_ui=False,
                       help="seconds between live console tables in headless runs (default 5)")  # fmt: skip
    group.add_argument("--no-console-table", action="store_true", default=False,
                       env_var="LOADKIT_NO_CONSOLE_TABLE", include_in_web_ui=False,
                       help="do not print loadkit's live/final console table")  # fmt: skip
    group.add_argument("--final-report-wait", type=_positive_float, default=DEFAULT_FINAL_WAIT_S,
                       env_var="LOADKIT_FINAL_REPORT_WAIT", include_in_web_ui=False,
                       help="seconds the master waits at the end for every worker's final stats, on top of --stop-timeout (default 5)")  # fmt: skip


@dataclass(frozen=True, slots=True)
class StatsOptions:
    """The stats' configuration for one run, built by the run set-up from the options
    (run/settings.py ``stats_options``): the stats never read Locust's options themselves.
    ``slos`` are the run's, resolved once (web form > command line > scenario) and parsed."""

    report_dir: str  # the default directory (a worker without its master's choice writes here)
    raw_log: bool = False
    raw_log_events: bool = False
    slos: tuple[Slo, ...] = ()
    stats_interval: float = DEFAULT_STATS_INTERVAL_S
    console_table: bool = True
    final_report_wait: float = DEFAULT_FINAL_WAIT_S
    max_failed_share: float = DEFAULT_MAX_FAILED_SHARE
    given_report_dir: str = ""  # --report-dir as given ("": one directory per run under reports/)
    headless: bool = False
    expect_workers: int | None = None  # master: reported in the manifest
    exit_code_on_error: int = EXIT_ON_ERROR


def failed_share_limit(options: Any) -> float:
    """--max-failed-share as a fraction; ValueError naming the option when out of range."""
    given = getattr(options, "max_failed_share", None) if options is not None else None
    if given is None:
        return DEFAULT_MAX_FAILED_SHARE
    try:
        return percent(given) / 100
    except argparse.ArgumentTypeError as exc:
        raise ValueError(f"--max-failed-share: {exc}") from None
