"""loadkit's routes and the LLM tab on a real Locust web UI app (Flask test client, no browser)."""

from __future__ import annotations

import csv
import io
import os
import re
from contextlib import contextmanager
from types import SimpleNamespace

import pytest
from locust import HttpUser, task
from locust.argument_parser import parse_options
from locust.env import Environment

from loadkit.stats import StatsCollector
from loadkit.webui import install_web_ui
from loadkit.webui.report import find_report
from tests.helpers.steady_records import record


class Idle(HttpUser):
    host = "http://127.0.0.1:9"

    @task
    def nothing(self) -> None:  # never runs: no test here starts users
        pass


def make_env(tmp_path, web_login: bool = False, base_path: str = "") -> tuple[Environment, StatsCollector]:
    options = parse_options(args=["--web-base-path", base_path] if base_path else [])
    options.report_dir = str(tmp_path)
    env = Environment(user_classes=[Idle], parsed_options=options)
    env.create_local_runner()
    collector = StatsCollector()
    env.events.reset_stats.add_listener(collector.reset)  # as loadkit's stats glue does
    # A runtime that is not loadkit's: what the web UI reads of one (webui/runstate.py).
    env.loadkit = SimpleNamespace(
        stats=collector, targets=[], start_error=None, command_line=dict(vars(options))
    )
    env.create_web_ui(
        "127.0.0.1", 0, delayed_start=True, web_login=web_login, web_base_path=base_path or None
    )
    return env, collector


@pytest.fixture(autouse=True)
def plain_argv(monkeypatch):
    # Locust's index page re-parses sys.argv for the start form: give it no pytest flags.
    monkeypatch.setattr("sys.argv", ["locust"])


@pytest.fixture
def live(tmp_path):
    env, collector = make_env(tmp_path)
    view = install_web_ui(env, env.loadkit)
    for i in range(20):
        collector.add(record(engine="vllm-a", label="chat", ttft_ms=10.0 + i, send_ms=i * 50.0))
    collector.add(record(engine="vllm-a", label="chat", outcome="http_error:500"))
    collector.add(record(engine="sglang-b", ttft_ms=30.0))
    yield SimpleNamespace(env=env, collector=collector, view=view, client=env.web_ui.app.test_client())
    env.runner.quit()


def test_no_web_ui_no_install():
    env = Environment(user_classes=[Idle])
    assert (
        install_web_ui(env, SimpleNamespace(stats=None, targets=[], start_error=None, command_line={}))
        is None
    )


def test_the_view_reads_the_runtime_it_is_given_not_the_environment(tmp_path):
    env, collector = make_env(tmp_path, base_path="/lk")
    runtime = env.loadkit
    del env.loadkit  # nothing to fish
    env.parsed_options.web_base_path = "/elsewhere"  # the runtime's command line decides
    install_web_ui(env, runtime)
    collector.add(record(engine="x"))
    runtime.start_error = "the last start failed"
    doc = env.web_ui.app.test_client().get("/lk/loadkit/stats.json").get_json()
    assert doc["rows"][0]["engine"] == "x" and doc["start_error"] == "the last start failed"
    env.runner.quit()


def test_install_without_the_runtime_is_deprecated_and_still_reads_the_environment(tmp_path):
    env, collector = make_env(tmp_path)
    with pytest.warns(DeprecationWarning, match=r"install_web_ui\(environment, runtime\)"):
        install_web_ui(env)
    collector.add(record(engine="x"))
    env.loadkit.start_error = "refused"
    doc = env.web_ui.app.test_client().get("/loadkit/stats.json").get_json()
    assert doc["rows"][0]["engine"] == "x" and doc["start_error"] == "refused"
    env.runner.quit()


def test_index_keeps_the_llm_tab_after_locust_rebuilds_its_template_args(live):
    assert live.client.get("/").status_code == 200  # calls update_template_args()
    args = live.env.web_ui.template_args
    assert {"title": "LLM", "key": "llm"} in args["extended_tabs"]
    assert [t["key"] for t in args["extended_tables"]] == ["llm"]
    hrefs = [f["href"] for f in args["extended_csv_files"]]
    assert hrefs == ["./loadkit/stats.csv", "./loadkit/", "./loadkit/report"]


def test_stats_requests_carries_the_llm_rows(live):
    body = live.client.get("/stats/requests").get_json()
    assert "stats" in body  # Locust's own payload is intact
    (ext,) = [e for e in body["extended_stats"] if e["key"] == "llm"]
    by_engine = {(r["engine"], r["label"]): r for r in ext["data"]}
    assert set(by_engine) == {("vllm-a", "*"), ("sglang-b", "*")}
    row = by_engine[("vllm-a", "*")]
    assert row["requests"] == 21 and row["failures"] == 1 and row["failed_outcomes"] == "http_error:500 ×1"
    p50 = live.collector.report()["engines"]["vllm-a"]["ttft_ms"]["p50"]
    assert row["ttft_ms"].split(" / ")[0] == f"{p50:.1f}"


def test_stats_json_rows_and_windowed_series(live):
    live.view.sample_once()
    doc = live.client.get("/loadkit/stats.json").get_json()
    assert doc["schema"] == "loadkit.webui/1" and doc["valid"] is True
    totals = {r["engine"]: r for r in doc["rows"] if r["label"] == "*"}
    assert totals["sglang-b"]["ttft_ms_p50"] == pytest.approx(30.0, rel=0.002)
    assert set(doc["windowed"]) == {"vllm-a", "sglang-b"}
    assert doc["windowed"]["vllm-a"]["ttft_ms_p99"][0] == pytest.approx(29.0, rel=0.002)
    assert set(doc["seconds"]["vllm-a"]) == {"unix", "output_tokens", "in_flight"}


def test_charts_json_serves_the_report_svg_charts_of_the_same_series(live):
    live.view.sample_once()
    live.view.sample_once()
    charts = live.client.get("/loadkit/charts.json").get_json()
    assert set(charts) == {"ttft", "tpot", "tokps", "inflight"}
    for chart, svg in charts.items():
        assert svg.startswith(f'<svg class="plot" data-plot="live-{chart}" id="{chart}"')
    for engine in ("vllm-a", "sglang-b"):  # one p50 and one p99 line per engine, in the legend too
        assert len(re.findall(rf'<path class="series"[^>]*><title>{engine} p50</title>', charts["ttft"])) == 1
        assert f'class="lg">{engine} p99</text>' in charts["ttft"]
    assert live.client.get("/loadkit/charts.json").get_json() == charts  # one drawing per interval


def test_csv_download(live):
    resp = live.client.get("/loadkit/stats.csv")
    assert resp.headers["Content-Disposition"].startswith("attachment; filename=loadkit_llm_stats_")
    rows = list(csv.DictReader(io.StringIO(resp.get_data(as_text=True))))
    assert {r["engine"] for r in rows} == {"vllm-a", "sglang-b"}


def test_chart_page_is_self_contained(live):
    html = live.client.get("/loadkit/").get_data(as_text=True)
    for chart in ("ttft", "tpot", "tokps", "inflight"):
        assert f'<svg id="{chart}">' in html
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", html)  # nothing fetched from outside
    assert 'fetch("stats.json"' in html


def test_reset_from_the_ui_resets_loadkit(live):
    live.view.sample_once()
    assert live.client.post("/stats/reset").status_code == 200
    assert live.collector.report()["engines"] == {}
    live.view.sample_once()
    assert live.client.get("/loadkit/stats.json").get_json()["windowed"] == {}


def test_report_route_before_and_after_a_run(live, tmp_path):
    resp = live.client.get("/loadkit/report")
    assert resp.status_code == 404 and "no report yet" in resp.get_data(as_text=True)
    (tmp_path / "report.json").write_text("{}")
    (tmp_path / "report.html").write_text("<html>final</html>")
    os.utime(tmp_path / "report.json", (1, 1))  # the HTML is newer: served as it is
    resp = live.client.get("/loadkit/report")
    assert resp.status_code == 200 and b"final" in resp.data


def test_report_route_refuses_while_running(tmp_path):
    (tmp_path / "report.html").write_text("old run")
    path, why = find_report(str(tmp_path), running=True)
    assert path is None and "still going" in why


def test_stale_html_is_rendered_again(tmp_path, monkeypatch):
    import loadkit.webui.report as rep

    (tmp_path / "report.html").write_text("old run")
    os.utime(tmp_path / "report.html", (1, 1))
    (tmp_path / "report.json").write_text("{}")
    calls = []

    def fake_render(report_dir: str) -> None:
        calls.append(report_dir)
        (tmp_path / "report.html").write_text("new run")

    monkeypatch.setattr(rep, "render_html", fake_render)
    path, _ = find_report(str(tmp_path), running=False)
    assert calls == [str(tmp_path)] and open(path).read() == "new run"


def test_routes_require_login_when_web_login_is_on(tmp_path):
    env, _ = make_env(tmp_path, web_login=True)
    env.web_ui.app.secret_key = "test"
    env.web_ui.login_manager.user_loader(lambda user_id: None)  # nobody is logged in
    install_web_ui(env, env.loadkit)
    client = env.web_ui.app.test_client()
    for path in ("/loadkit/", "/loadkit/stats.json", "/loadkit/stats.csv", "/loadkit/report"):
        resp = client.get(path)
        assert resp.status_code in (302, 401), path
    env.runner.quit()


def test_secret_option_is_blanked_in_the_page_and_kept_when_the_form_leaves_it_empty(tmp_path):
    env, _ = make_env(tmp_path)
    env.parsed_options.api_key = "sk-startup"
    env.web_ui.template_args["extra_options"] = {
        "api_key": {"default_value": "sk-startup", "is_secret": True, "help_text": "API key"},
        "engine": {"default_value": "vllm", "is_secret": False, "help_text": "engine"},
    }
    install_web_ui(env, env.loadkit)
    options = env.web_ui.template_args["extra_options"]
    assert options["api_key"]["default_value"] == "" and options["engine"]["default_value"] == "vllm"
    client = env.web_ui.app.test_client()
    form = {"user_count": "0", "spawn_rate": "1", "host": "http://127.0.0.1:9", "engine": "vllm"}
    assert client.post("/swarm", data={**form, "api_key": ""}).get_json()["success"]
    assert env.parsed_options.api_key == "sk-startup"  # blank means keep
    client.post("/stop")
    assert client.post("/swarm", data={**form, "api_key": "sk-typed"}).get_json()["success"]
    assert env.parsed_options.api_key == "sk-typed"  # typed means replace
    env.runner.quit()


def test_routes_follow_the_web_base_path(tmp_path):
    env, collector = make_env(tmp_path, base_path="/lk")
    install_web_ui(env, env.loadkit)
    collector.add(record(engine="x"))
    client = env.web_ui.app.test_client()
    assert client.get("/loadkit/stats.json").status_code == 404
    assert client.get("/lk/loadkit/stats.json").get_json()["rows"][0]["engine"] == "x"
    body = client.get("/lk/stats/requests").get_json()
    assert [e["key"] for e in body["extended_stats"]] == ["llm"]
    env.runner.quit()


# ---- run status and start errors --------------------------------------------------------------


def loadkit_env(tmp_path) -> tuple[Environment, StatsCollector]:
    """A web UI whose runtime is loadkit's own, with loadkit's options parsed."""
    from locust.argument_parser import get_parser

    from loadkit.locust.runtime import Runtime
    from loadkit.run.options import add_arguments

    parser = get_parser()
    # Locust's parser already has them when an earlier test defined a loadkit user class (which
    # registers loadkit's listeners on locust.events, init_command_line_parser included).
    if not any("--engine" in action.option_strings for action in parser._actions):
        add_arguments(parser)
    env, collector = make_env(tmp_path)
    env.parsed_options = parser.parse_args(args=["--report-dir", str(tmp_path)])
    env.loadkit = Runtime(env, stats=collector)
    install_web_ui(env, env.loadkit)
    return env, collector


SCENARIO = os.path.join(os.path.dirname(__file__), "..", "integration", "scenarios", "tiny_fixed.toml")


def closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize(
    ("field", "value", "wanted"),
    [("scenario", "/nonexistent/scenario.toml", "cannot read file"),
     ("host", "http://127.0.0.1:{closed}", "is unreachable"),
     ("engine", "no-such-engine", "no-such-engine"),
     ("max_failed_share", "150", "--max-failed-share: must be between 0 and 100"),
     ("seed", "abc", "--seed: 'abc' is not a whole number")],
)  # fmt: skip
def test_a_start_that_cannot_work_is_refused_in_the_form_with_the_reason(tmp_path, field, value, wanted):
    env, _ = loadkit_env(tmp_path)
    client = env.web_ui.app.test_client()
    with socket_listening() as port:
        form = {
            "user_count": "1",
            "spawn_rate": "1",
            "host": f"http://127.0.0.1:{port}",
            "scenario": SCENARIO,
        }
        form[field] = value.format(closed=closed_port())
        body = client.post("/swarm", data=form).get_json()
    assert body["success"] is False and wanted in body["message"] and body["message"].startswith("loadkit: ")
    assert env.runner.state == "ready"  # nothing was started
    doc = client.get("/loadkit/stats.json").get_json()
    assert wanted in doc["start_error"]
    assert env.parsed_options.scenario != value  # the real options were not touched
    env.runner.quit()


def test_a_good_start_passes_the_check(tmp_path):
    env, _ = loadkit_env(tmp_path)
    client = env.web_ui.app.test_client()
    with socket_listening() as port:
        form = {
            "user_count": "0",
            "spawn_rate": "1",
            "host": f"http://127.0.0.1:{port}",
            "scenario": SCENARIO,
        }
        assert client.post("/swarm", data=form).get_json()["success"] is True
    env.runner.quit()


def test_status_fields_and_panel_script(tmp_path):
    env, collector = loadkit_env(tmp_path)
    client = env.web_ui.app.test_client()
    bad = record(engine="vllm", outcome="http_error:422")
    bad.error, bad.http_status = 'HTTP 422: {"detail": "Unexpected fields"}', 422
    collector.add(bad)
    collector.mark_invalid("circuit breaker: 20 of the first 20 requests failed; run stopped")
    env.loadkit.start_error = None
    doc = client.get("/loadkit/stats.json").get_json()
    assert doc["valid"] is False and doc["requests"] == 1
    assert doc["invalid_reasons"][0].startswith("circuit breaker")
    assert doc["messages"] == [{"engine": "vllm", "outcome": "http_error:422", "count": 1,
                                "message": '{"detail": "Unexpected fields"}'}]  # fmt: skip
    index = client.get("/").get_data(as_text=True)
    assert index.count('<script src="./loadkit/status.js" defer></script>') == 1
    script = client.get("/loadkit/status.js")
    assert script.status_code == 200 and script.headers["Content-Type"].startswith("text/javascript")
    text = script.get_data(as_text=True)
    assert "loadkit-status" in text and "innerHTML" not in text  # server text only via textContent
    env.runner.quit()


@contextmanager
def socket_listening():
    """A port that accepts TCP connections (the reachability check connects and closes)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(8)
        yield s.getsockname()[1]


def test_the_status_panel_has_the_latest_gpu_sample(live):
    from pathlib import Path

    from loadkit.servers.gpu import GpuSampler, dcgm_gpus

    text = (Path(__file__).resolve().parents[1] / "servers" / "data" / "dcgm" / "metrics.prom").read_text()
    rows = [GpuSampler("dcgm", lambda: dcgm_gpus(text)).sample()]
    live.env.loadkit.gpu_metrics = SimpleNamespace(samples={"vllm-a": rows, "sglang-b": []})
    doc = live.client.get("/loadkit/stats.json").get_json()
    assert doc["gpu_now"] == ["vllm-a: 2 GPU(s), 718 W, util 76 %, memory used 147828 MiB"]
    rows.append({"t": 1.0, "gpus": {}, "error": "GET http://x:9400/metrics: HTTP 503"})
    assert live.client.get("/loadkit/stats.json").get_json()["gpu_now"] == [
        "vllm-a: no reading (GET http://x:9400/metrics: HTTP 503)"
    ]
    assert "loadkit-gpu" in live.client.get("/loadkit/status.js").get_data(as_text=True)


def test_stats_json_carries_the_slo_tiers_attainment(tmp_path):
    """The live page lists each tier's attainment so far (docs/cost.md), from the same counters
    as the report."""
    from loadkit.stats.cost import CostRate
    from loadkit.stats.metrics import Slo
    from loadkit.stats.runcontext import RunContext
    from loadkit.stats.tiercontext import TierContext
    from loadkit.stats.tiers import parse_tiers
    from loadkit.stats.tiersection import install_tier_sections

    env, collector = make_env(tmp_path)
    tiers = TierContext.of(
        parse_tiers(["fast:ttft_ms=15"]), (Slo("ttft_ms", 100.0),), {"vllm-a": CostRate(2.0)}, "USD"
    )
    install_tier_sections(collector, lambda: RunContext(tiers=tiers))
    view = install_web_ui(env, env.loadkit)
    for i in range(10):  # TTFT 10..19 ms: 6 of 10 (10..15) within 15 ms
        collector.add(record(engine="vllm-a", ttft_ms=10.0 + i, send_ms=i * 50.0))
    doc = env.web_ui.app.test_client().get("/loadkit/stats.json").get_json()
    lines = doc["tiers"]
    assert any(line.startswith("tier fast [ttft_ms=15] vllm-a: attainment 60.0%") for line in lines), lines
    assert any(line.startswith("cost vllm-a: 2.00 USD/h") for line in lines), lines
    assert view is not None
    env.runner.quit()
