"""LiveView: loadkit's routes, the extended "LLM" tab and the chart sampler on Locust's web UI.

Runs on the node that serves the web UI (local or master). Everything shown comes from the
node's StatsCollector (the ``stats`` of the runtime it is given, webui/runstate.py), whose ``report()`` already merges the
workers' snapshots on a master, so the view is correct distributed without extra wiring.
Stats resets need nothing here either: the collector listens to Locust's ``reset_stats``
and forwards it to every worker; the timeline follows the collector's epoch.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any

import gevent
from flask import Blueprint, Response, jsonify, make_response, request, send_file

from loadkit.report.costtiers import console_lines as cost_tier_lines
from loadkit.report.gpu import now_lines as gpu_now_lines
from loadkit.stats.histogram import Histogram
from loadkit.stats.report import merge_nodes
from loadkit.stats.turns import cooperative
from loadkit.webui import view
from loadkit.webui.charts import live_charts
from loadkit.webui.formsecrets import install_secret_hiding
from loadkit.webui.page import chart_page
from loadkit.webui.runstate import RunState, base_path, given_report_dir
from loadkit.webui.startform import install_start_check
from loadkit.webui.status import SCRIPT_PATH, STATUS_SCRIPT, status_fields, with_status_script
from loadkit.webui.timeline import CHART_METRICS, MAX_POINTS, Timeline, seconds_series

log = logging.getLogger("loadkit.webui")

TAB_KEY = "llm"
SAMPLE_INTERVAL_S = 2.0
REPORT_CACHE_S = 1.0  # several browser tabs polling share one report computation
CHARTS_CACHE_S = 1.0  # likewise one drawing of the live charts (a new point comes every 2 s)
SCRAPE_TIMEOUT_S = 1.0
RUNNING_STATES = ("spawning", "running")
IDLE_STATES = ("ready", "stopped")  # a /swarm post in these starts a new run


def merged_histograms(collector: Any) -> dict[str, dict[str, Histogram]]:
    """engine → chart metric → cumulative histogram over every node and label."""
    groups = merge_nodes([collector.local_snapshot(), *collector.remote.snapshots()])
    out: dict[str, dict[str, Histogram]] = {}
    for (engine, _label), group in groups.items():
        metrics = out.setdefault(engine, {m: Histogram() for m in CHART_METRICS})
        for m in CHART_METRICS:
            metrics[m].merge(group.hists[m])
    return out


class QueueProbe:
    """Scrapes each target's waiting-queue length, for engines whose adapter names metrics."""

    def __init__(self) -> None:
        self._targets: list[Any] = []
        self._scrapers: dict[str, Any] = {}

    def read(self, targets: list[Any]) -> dict[str, float | None]:
        if targets is not self._targets:
            self._targets, self._scrapers = targets, self._build(targets)
        out: dict[str, float | None] = {}
        for name, scraper in self._scrapers.items():
            out[name] = scraper.sample()["values"].get("waiting")
        return out

    @staticmethod
    def _build(targets: list[Any]) -> dict[str, Any]:
        from loadkit.servers.metrics import scraper_for

        scrapers = {t.name: scraper_for(t, timeout_s=SCRAPE_TIMEOUT_S) for t in targets}
        return {name: scraper for name, scraper in scrapers.items() if scraper is not None}


class LiveView:
    """Binds loadkit's web additions to one Locust environment with a web UI and the
    process's runtime (what it shows; the environment gives the web UI and the runner)."""

    def __init__(self, environment: Any, runtime: RunState, clock: Any = time.time) -> None:
        self.env = environment
        self.runtime = runtime
        self.web_ui = environment.web_ui
        self.clock = clock
        self.timeline = Timeline()
        self.queue = QueueProbe()
        self._cached: tuple[float, tuple[int, str], dict[str, Any]] | None = None
        self._charts: tuple[float, tuple[int, str], dict[str, str]] | None = None
        self.base = base_path(runtime)

    # -- data -----------------------------------------------------------------------------

    @property
    def collector(self) -> Any:
        return self.runtime.stats

    def report(self) -> dict[str, Any]:
        """The collector's merged report, recomputed at most once per REPORT_CACHE_S while the
        stats epoch and the runner's state stay the same (a stop shows final numbers at once)."""
        collector = self.collector
        now, key = time.monotonic(), (collector.epoch, self.state())
        cached = self._cached
        if cached is not None and now - cached[0] < REPORT_CACHE_S and cached[1] == key:
            return cached[2]
        with cooperative():  # a local run's streams share this loop: give them their turns
            report = collector.report(live=True)
        self._cached = (now, key, report)
        return report

    def state(self) -> str:
        runner = self.env.runner
        return str(getattr(runner, "state", "unknown"))

    def stats_document(self) -> dict[str, Any]:
        """What /loadkit/stats.json serves: table rows, chart series, run state."""
        report = self.report()
        now = self.clock()
        return {
            "schema": "loadkit.webui/1",
            "generated_unix": now,
            "state": self.state(),
            "valid": report["valid"],
            **status_fields(report, self.runtime.start_error),
            "errors": report["errors"],
            "warnings": report["warnings"],
            "slos": report["manifest"].get("slos", {}),
            "workers": report["workers"],
            "conservation": report["conservation"],
            "rows": view.numeric_rows(report),
            "window_s": self.timeline.window_s,
            "windowed": self.timeline.to_json(),
            "seconds": seconds_series(report, now if self.state() in RUNNING_STATES else None),
            "queue": self.queue_series(),
            "tiers": cost_tier_lines(report),  # SLO tiers' attainment and cost (report/costtiers.py)
            "gpu_now": gpu_now_lines(
                getattr(getattr(self.runtime, "gpu_metrics", None), "samples", None) or {}
            ),
        }

    def charts_document(self) -> dict[str, str]:
        """What /loadkit/charts.json serves: the live page's SVG charts, redrawn at most once per
        CHARTS_CACHE_S while the epoch and state stay the same (tabs and polls share a drawing)."""
        now, key = time.monotonic(), (self.collector.epoch, self.state())
        cached = self._charts
        if cached is None or now - cached[0] >= CHARTS_CACHE_S or cached[1] != key:
            cached = self._charts = (now, key, live_charts(self.stats_document()))
        return cached[2]

    def sample_once(self) -> None:
        collector = self.collector
        if collector is None:
            return
        queue = self._read_queue()
        with cooperative():  # merging the live histograms gives way to the streams' reads
            histograms = merged_histograms(collector)
        self.timeline.sample(self.clock(), collector.epoch, histograms, queue)

    def _read_queue(self) -> dict[str, float | None]:
        """Scrape queue lengths only where the glue does not already scrape server metrics."""
        targets = self.runtime.targets
        if self._glue_scrapes() or not targets or self.state() not in RUNNING_STATES:
            return {}
        return self.queue.read(targets)

    def _glue_scrapes(self) -> bool:
        # loadkit's Runtime always has the attribute (its scrapes are set at each test start);
        # a runtime without it (another locustfile's, a test's) gets the web UI's own probe.
        return hasattr(self.runtime, "server_metrics")

    def queue_series(self) -> dict[str, dict[str, list[Any]]]:
        """Per engine, server queue length over time: the glue's scrapes, else our own."""
        if not self._glue_scrapes():
            points = self.timeline.to_json()
            return {e: {"t": p["t"], "waiting": p["queue"]} for e, p in points.items()}
        metrics = getattr(self.runtime, "server_metrics", None)
        out: dict[str, dict[str, list[Any]]] = {}
        for name, rows in (getattr(metrics, "samples", None) or {}).items():
            recent = rows[-MAX_POINTS:]
            out[name] = {
                "t": [r["t"] for r in recent],
                "waiting": [r["values"].get("waiting") for r in recent],
            }
        return out

    def _sample_loop(self) -> None:
        while True:
            try:
                self.sample_once()
            except Exception:  # a chart glitch must not stop the sampler, nor touch the run
                log.exception("loadkit web UI: sampling the live charts failed")
            gevent.sleep(SAMPLE_INTERVAL_S)

    # -- Locust UI wiring -----------------------------------------------------------------

    def install(self) -> None:
        self._extend_template_args()
        install_secret_hiding(self.web_ui, self.base)
        install_start_check(self.env, self.runtime, self.base, IDLE_STATES)
        self.web_ui.app.register_blueprint(self._blueprint())
        self.web_ui.app.after_request(self._add_extended_stats)
        self.web_ui.app.after_request(self._add_status_script)
        gevent.spawn(self._sample_loop)

    def _extend_template_args(self) -> None:
        """Locust merges its own keys over template_args on every render, so ours survive."""
        args = self.web_ui.template_args
        prefix = "./loadkit"
        args["extended_tabs"] = [*args.get("extended_tabs", []), {"title": "LLM", "key": TAB_KEY}]
        args["extended_tables"] = [*args.get("extended_tables", []),
                                   {"key": TAB_KEY, "structure": view.TABLE_STRUCTURE}]  # fmt: skip
        args["extended_csv_files"] = [
            *args.get("extended_csv_files", []),
            {"href": f"{prefix}/stats.csv", "title": "Download LLM stats CSV (loadkit)"},
            {"href": f"{prefix}/", "title": "Live LLM charts (loadkit)"},
            {"href": f"{prefix}/report", "title": "loadkit final HTML report (after a run)"},
        ]

    def _add_extended_stats(self, response: Response) -> Response:
        if request.path != f"{self.base}/stats/requests" or response.status_code != 200:
            return response
        try:
            body = response.get_json(silent=True)
            if isinstance(body, dict) and self.collector is not None:
                rows = view.display_rows(view.numeric_rows(self.report()))
                extended = [s for s in body.get("extended_stats", []) if s.get("key") != TAB_KEY]
                body["extended_stats"] = [*extended, {"key": TAB_KEY, "data": rows}]
                response.set_data(jsonify(body).get_data())
        except Exception:  # Locust's own stats must keep flowing whatever happens to ours
            log.exception("loadkit web UI: adding the LLM table failed")
        return response

    def _add_status_script(self, response: Response) -> Response:
        """Locust's index page gets the run-status panel's script (webui/status.py)."""
        if request.path not in (f"{self.base}/", self.base or "/") or response.status_code != 200:
            return response
        if not response.content_type.startswith("text/html") or response.direct_passthrough:
            return response
        try:
            response.set_data(with_status_script(response.get_data(as_text=True)))
        except Exception:  # Locust's page must load whatever happens to our panel
            log.exception("loadkit web UI: adding the status panel failed")
        return response

    def _blueprint(self) -> Blueprint:
        bp = Blueprint("loadkit_webui", __name__, url_prefix=f"{self.base}/loadkit")
        guard = self.web_ui.auth_required_if_enabled
        bp.add_url_rule("/", "charts", guard(self.charts_page))
        bp.add_url_rule("/stats.json", "stats_json", guard(self.stats_json))
        bp.add_url_rule("/charts.json", "charts_json", guard(self.charts_json))
        bp.add_url_rule("/stats.csv", "stats_csv", guard(self.stats_csv))
        bp.add_url_rule("/report", "report", guard(self.final_report))
        bp.add_url_rule(f"/{SCRIPT_PATH}", "status_script", guard(self.status_script))
        return bp

    # -- routes ---------------------------------------------------------------------------

    def _no_stats(self) -> Response | None:
        if self.collector is not None:
            return None
        return make_response(
            "loadkit's stats are not installed on this node (is loadkit's locustfile loaded?)\n", 503
        )

    def charts_page(self) -> Response:
        resp = make_response(chart_page(self.timeline.window_s))
        resp.headers["Content-Type"] = "text/html; charset=utf-8"
        return resp

    def status_script(self) -> Response:
        resp = make_response(STATUS_SCRIPT)
        resp.headers["Content-Type"] = "text/javascript; charset=utf-8"
        resp.headers["Cache-Control"] = "no-store"
        return resp

    def stats_json(self) -> Response:
        missing = self._no_stats()
        if missing is not None:
            return missing
        resp = jsonify(self.stats_document())
        resp.headers["Cache-Control"] = "no-store"
        return resp

    def charts_json(self) -> Response:
        missing = self._no_stats()
        if missing is not None:
            return missing
        resp = jsonify(self.charts_document())
        resp.headers["Cache-Control"] = "no-store"
        return resp

    def stats_csv(self) -> Response:
        missing = self._no_stats()
        if missing is not None:
            return missing
        resp = make_response(view.rows_csv(view.numeric_rows(self.report())))
        resp.headers["Content-Type"] = "text/csv; charset=utf-8"
        stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(self.clock()))
        resp.headers["Content-Disposition"] = f"attachment; filename=loadkit_llm_stats_{stamp}.csv"
        return resp

    def final_report(self) -> Response:
        from loadkit.webui.report import find_report

        path, problem = find_report(self.report_dir(), running=self.state() in RUNNING_STATES)
        if path is None:
            return make_response(problem + "\n", 404, {"Content-Type": "text/plain; charset=utf-8"})
        return send_file(path, mimetype="text/html", max_age=0)

    def report_dir(self) -> str:
        collector = self.collector
        manifest_dir = getattr(collector, "manifest", {}).get("report_dir") if collector is not None else None
        if manifest_dir:
            return str(manifest_dir)
        # No run yet: each run's directory is chosen when it starts (stats/rundir.py).
        given = given_report_dir(self.runtime)
        return os.path.abspath(given) if given else "reports/<UTC start time of the run>"
