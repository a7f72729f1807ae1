"""Real headless Locust runs against scripted strict or failing servers: pre-flight drops the
fields a server refuses (or stops with its text), refuses an unknown model with the served list,
--extra-body / --header reach the server, backoff bounds a fast-failing server's request rate,
and the circuit breaker stops a dead target within a few dozen requests with one clear line.
Every run that starts ends with the conservation check; a run refused at pre-flight writes no
report and sends nothing but the pre-flight request."""

from __future__ import annotations

import json
import socket
import subprocess
import time
import urllib.parse
import urllib.request

import pytest

from tests.helpers.ports import free_port
from tests.helpers.processes import get_json, stop_process, wait_for, web_ready
from tests.helpers.runs import REPO, SCENARIOS, check_conservation, locust_cmd, raw_records, run_locust
from tests.helpers.scripted_server import ScriptedServer
from tests.helpers.strict_server import CHAT_FIELDS, StrictOpenAI

pytestmark = pytest.mark.integration

TINY = str(SCENARIOS / "tiny_fixed.toml")
EXACT_FIELDS = {"ignore_eos", "min_tokens"}


def headless(url: str, report_dir, *extra: str, users: int = 2, seconds: int = 20) -> list[str]:
    return ["--headless", "-u", str(users), "-r", str(users), "-t", f"{seconds}s", "--stop-timeout", "3",
            "--host", url, "--scenario", TINY, "--report-dir", str(report_dir), "--raw-log",
            "--no-console-table", *extra]  # fmt: skip


def two_processes() -> list[str]:
    """--processes 2 on a port of its own (other runs on this machine may hold Locust's 5557)."""
    port = str(free_port())
    return ["--processes", "2", "--master-bind-port", port, "--master-port", port]


def dead_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def total_requests(report) -> int:
    return sum(e["requests"] for e in report["engines"].values())


@pytest.mark.parametrize("processes", [1, 2])
def test_server_refusing_loadkit_fields_runs_without_them(tmp_path, processes):
    server = StrictOpenAI(allowed=CHAT_FIELDS)
    extra = two_processes() if processes > 1 else []
    with ScriptedServer(server) as srv:
        proc = run_locust(
            *headless(srv.url, tmp_path / "r", "--engine", "vllm", "--max-requests", "30", *extra)
        )
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = check_conservation(tmp_path / "r")
    assert report["engines"]["vllm"]["outcomes"] == {"ok": 30}
    posts = server.posts()
    # Pre-flight once (on the master): the refused request, the accepted one; then the run,
    # every worker sending without the fields.
    assert len(posts) == 2 + 30
    assert EXACT_FIELDS <= set(posts[0].body) and not any(EXACT_FIELDS & set(p.body) for p in posts[1:])
    lines = [line for line in proc.stderr.splitlines() if "refused fields loadkit adds" in line]
    assert len(lines) == 1 and "Unexpected fields in the request" in lines[0], proc.stderr[-3000:]
    assert "sending without ignore_eos, min_tokens" in lines[0]
    assert report["manifest"]["preflight"]["vllm"]["drop"] == ["ignore_eos", "min_tokens"]
    assert all(r["outcome"] == "ok" for r in raw_records(tmp_path / "r"))


def test_strict_request_stops_with_the_servers_message(tmp_path):
    server = StrictOpenAI(allowed=CHAT_FIELDS)
    with ScriptedServer(server) as srv:
        proc = run_locust(
            *headless(srv.url, tmp_path / "r", "--engine", "vllm", "--strict-request"), timeout=60
        )
    assert proc.returncode == 2, proc.stderr[-3000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("loadkit: error:")]
    assert (
        len(errors) == 1
        and "Unexpected fields in the request" in errors[0]
        and "--strict-request" in errors[0]
    )
    assert "Traceback" not in proc.stderr
    assert len(server.posts()) == 1 and not (tmp_path / "r" / "report.json").exists()


def test_unknown_model_is_refused_at_preflight_with_the_served_list(tmp_path):
    server = StrictOpenAI(models=("served-a", "served-b"), check_model=True)
    with ScriptedServer(server) as srv:
        proc = run_locust(*headless(srv.url, tmp_path / "r", "--model", "wrong-model"), timeout=60)
    assert proc.returncode == 2, proc.stderr[-3000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("loadkit: error:")]
    assert len(errors) == 1, proc.stderr[-3000:]
    assert "The model `wrong-model` does not exist" in errors[0] and "served-a, served-b" in errors[0]
    assert [(r.method, r.path) for r in server.received] == [
        ("GET", "/v1/models"),
        ("POST", "/v1/chat/completions"),
    ]
    assert not (tmp_path / "r" / "report.json").exists()


def test_refusal_without_model_lists_the_served_models(tmp_path):
    server = StrictOpenAI(models=("served-a", "served-b"), check_model=True)
    with ScriptedServer(server) as srv:
        proc = run_locust(*headless(srv.url, tmp_path / "r"), timeout=60)
    assert proc.returncode == 2, proc.stderr[-3000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("loadkit: error:")]
    assert len(errors) == 1, proc.stderr[-3000:]
    assert "does not exist" in errors[0] and "it serves: served-a, served-b (give --model)" in errors[0]
    assert not (tmp_path / "r" / "report.json").exists()


def test_dead_port_with_skipped_check_says_unreachable(tmp_path):
    proc = run_locust(*headless(dead_url(), tmp_path / "r", "--skip-reachability-check", "--model", "m",
                                "--max-requests", "3"), timeout=60)  # fmt: skip
    assert proc.returncode == 3, proc.stderr[-3000:]
    check_conservation(tmp_path / "r")
    lines = [line for line in proc.stderr.splitlines() if "pre-flight" in line]
    assert len(lines) == 1 and "is unreachable" in lines[0] and "Connection refused" in lines[0], proc.stderr[
        -3000:
    ]
    assert "lists no models" not in proc.stderr


def test_extra_body_and_headers_reach_the_server_and_secrets_no_output(tmp_path):
    secret = "tok-" + "5e" * 12
    server = StrictOpenAI()
    with ScriptedServer(server) as srv:
        proc = run_locust(*headless(srv.url, tmp_path / "r", "--engine", "vllm", "--max-requests", "12",
                                    "--extra-body", '{"temperature": 0.25, "seed": 7}', "--no-exact-output",
                                    "--header", "X-Route: blue", "--header", f"X-Api-Token: {secret}"))  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = check_conservation(tmp_path / "r")
    assert report["engines"]["vllm"]["outcomes"] == {"ok": 12}
    posts = server.posts()
    assert len(posts) == 1 + 12
    for post in posts:
        assert post.body["temperature"] == 0.25 and post.body["seed"] == 7
        assert not EXACT_FIELDS & set(post.body)  # --no-exact-output over the scenario's default
        assert post.headers["x-route"] == "blue" and post.headers["x-api-token"] == secret
    assert report["manifest"]["request_options"] == {
        "extra_body": {"temperature": 0.25, "seed": 7}, "headers": {"X-Route": "***", "X-Api-Token": "***"},
        "exact_output": False, "strict_request": False}  # fmt: skip
    outputs = [proc.stdout, proc.stderr] + [p.read_text() for p in (tmp_path / "r").rglob("*") if p.is_file()]
    assert all(secret not in text for text in outputs)


def test_headers_go_with_engine_auto_probes_too(tmp_path):
    server = StrictOpenAI(owner="vllm", require=("x-api-key", "k-123"))
    with ScriptedServer(server) as srv:
        proc = run_locust(*headless(srv.url, tmp_path / "r", "--engine", "auto", "--header", "X-Api-Key: k-123",
                                    "--max-requests", "5"))  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = check_conservation(tmp_path / "r")
    # Behind the key, only probes that carry --header see vLLM's fingerprint (owned_by "vllm").
    assert report["manifest"]["targets"][0]["engine"] == "vllm"
    assert [section["outcomes"] for section in report["engines"].values()] == [{"ok": 5}]
    assert all(r.headers.get("x-api-key") == "k-123" for r in server.received)


def test_backoff_bounds_the_request_rate_of_a_fast_failing_server(tmp_path):
    server = StrictOpenAI(fail_status=500)
    users, seconds = 4, 5
    with ScriptedServer(server) as srv:
        started = time.monotonic()
        proc = run_locust(
            *headless(srv.url, tmp_path / "r", "--breaker", "off", users=users, seconds=seconds)
        )
        wall = time.monotonic() - started
        hot = run_locust(*headless(srv.url, tmp_path / "hot", "--breaker", "off", "--no-backoff",
                                   users=1, seconds=2))  # fmt: skip
    # Nothing succeeded: both runs are invalid (exit 3), and still fully accounted for.
    assert proc.returncode == 3 and hot.returncode == 3, proc.stderr[-3000:]
    report = check_conservation(tmp_path / "r")
    n = report["engines"]["openai"]["outcomes"]["http_error:500"]
    assert n == total_requests(report)
    # The k-th failure in a row waits at least 25 ms * 2**(k-1) (capped at 2.5 s): within `wall`
    # seconds a user sends at most 1 + the number of waits that fit, with no backoff hundreds.
    fit, elapsed = 1, 0.0
    while elapsed + min(2.5, 0.025 * 2 ** (fit - 1)) <= wall:
        elapsed += min(2.5, 0.025 * 2 ** (fit - 1))
        fit += 1
    assert users * 5 <= n <= users * fit, (n, fit, wall)
    unbounded = check_conservation(tmp_path / "hot")["engines"]["openai"]["outcomes"]["http_error:500"]
    assert unbounded > 10 * n / users, (unbounded, n)  # one user without backoff, in less time


def breaker_lines(stderr: str) -> int:
    """Log lines announcing the breaker's trip; the final "run INVALID" summary lists the reason
    again as an item of its own ("  - circuit breaker: ..."), which is not counted."""
    return sum("circuit breaker: target" in line for line in stderr.splitlines() if line.startswith("["))


def test_breaker_stops_a_dead_target_within_a_few_dozen_requests(tmp_path):
    started = time.monotonic()
    proc = run_locust(
        *headless(dead_url(), tmp_path / "r", "--skip-reachability-check", users=10, seconds=60)
    )
    wall = time.monotonic() - started
    assert proc.returncode == 3, proc.stderr[-3000:]
    report = check_conservation(tmp_path / "r")
    outcomes = report["engines"]["openai"]["outcomes"]
    assert set(outcomes) <= {"connect_error", "cancelled"} and 20 <= outcomes["connect_error"] <= 20 + 10
    assert wall < 30, wall  # stopped by the breaker, not by -t 60s
    assert report["valid"] is False
    reasons = [e for e in report["invalid_reasons"] if "circuit breaker" in e]
    assert len(reasons) == 1 and "the first 20 requests all failed" in reasons[0]
    assert "connect_error: cannot connect" in reasons[0] and "Connection refused" in reasons[0]
    assert breaker_lines(proc.stderr) == 1, proc.stderr[-3000:]


def test_breaker_window_stops_a_target_that_dies_during_the_run(tmp_path):
    server = StrictOpenAI(fail_status=503, fail_after_s=2.0, gap_s=0.03)
    with ScriptedServer(server) as srv:
        started = time.monotonic()
        proc = run_locust(*headless(srv.url, tmp_path / "r", "--breaker", "window=60,failed=90%,min=30",
                                    users=20, seconds=60))  # fmt: skip
        wall = time.monotonic() - started
    assert proc.returncode == 3, proc.stderr[-3000:]
    report = check_conservation(tmp_path / "r")
    outcomes = report["engines"]["openai"]["outcomes"]
    assert outcomes["ok"] >= 50 and outcomes["http_error:503"] >= 55, outcomes
    assert wall < 30, wall
    reasons = [e for e in report["invalid_reasons"] if "circuit breaker" in e]
    assert len(reasons) == 1 and "of the last 60 requests failed (more than 90 %)" in reasons[0], report[
        "invalid_reasons"
    ]
    assert "http_error:503: HTTP 503" in reasons[0] and "the engine is broken" in reasons[0]
    assert breaker_lines(proc.stderr) == 1


@pytest.mark.slow
def test_breaker_on_one_worker_stops_the_whole_distributed_run(tmp_path):
    started = time.monotonic()
    proc = run_locust(*headless(dead_url(), tmp_path / "r", "--skip-reachability-check", *two_processes(),
                                users=10, seconds=60), timeout=120)  # fmt: skip
    wall = time.monotonic() - started
    assert proc.returncode == 3, proc.stderr[-3000:]
    report = check_conservation(tmp_path / "r")
    outcomes = report["engines"]["openai"]["outcomes"]
    # Each worker judges its share (10) of the first 20; the first to trip stops both.
    assert 10 <= outcomes["connect_error"] <= 20 + 10, outcomes
    assert wall < 40, wall
    assert report["valid"] is False and report["workers"]["count"] == 2
    reasons = [e for e in report["invalid_reasons"] if "circuit breaker" in e]
    assert len(reasons) == 1 and "seen by worker" in reasons[0] and "the first 10 requests" in reasons[0]
    assert breaker_lines(proc.stderr) == 1, proc.stderr[-3000:]


@pytest.mark.parametrize(
    ("args", "says"),
    [(["--extra-body", "{bad"], "--extra-body: not valid JSON"), (["--extra-body", "[1]"], "must be a JSON object"),
     (["--header", "novalue"], "--header: expected 'Name: value'"), (["--breaker", "first=x"], "--breaker"),
     (["--backoff-max", "0"], "--backoff-max")],
)  # fmt: skip
def test_bad_request_options_are_one_clear_line(tmp_path, args, says):
    proc = run_locust(*headless("http://127.0.0.1:9", tmp_path / "r", *args), timeout=60)
    assert proc.returncode == 2, proc.stderr[-2000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("loadkit: error:")]
    assert len(errors) == 1 and says in errors[0] and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert not (tmp_path / "r" / "report.json").exists()


def test_manifest_says_what_preflight_saw(tmp_path):
    server = StrictOpenAI(models=("served-a",))
    with ScriptedServer(server) as srv:
        proc = run_locust(*headless(srv.url, tmp_path / "r", "--model", "other", "--max-requests", "6"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = check_conservation(tmp_path / "r")
    seen = report["manifest"]["preflight"]["openai"]
    assert seen["served_models"] == ["served-a"] and seen["outcome"] == "ok" and seen["requests"] == 1
    assert "ignores the model field" in seen["notes"][0]
    assert sum("ignores the model field" in line for line in proc.stderr.splitlines()) == 1
    assert json.dumps(report["manifest"]["request_options"])  # plain data


def swarm(base: str, form: dict[str, str]) -> dict:
    """POST the start form as Locust's web UI does; its JSON reply."""
    data = urllib.parse.urlencode(form).encode()
    with urllib.request.urlopen(urllib.request.Request(base + "/swarm", data=data), timeout=60) as resp:
        return json.loads(resp.read())  # type: ignore[no-any-return]


@pytest.mark.parametrize("processes", [1, 2])
def test_web_ui_start_refused_at_preflight_answers_success_false(tmp_path, processes):
    """Locust's /swarm answers before the test start runs; loadkit's reply waits for it, so a
    start pre-flight refuses is a failed start in the form, with the server's text. Distributed,
    no worker sends anything for a refused start (Locust may deliver its spawn message after
    the stop: the worker then asks the master, which says the start was refused), neither
    before nor after an accepted one."""
    server = StrictOpenAI(models=("served-a", "served-b"), check_model=True)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    extra = two_processes() if processes > 1 else []

    def state() -> str:
        return get_json(base + "/stats/requests")["state"]  # type: ignore[no-any-return]

    def refused_start(posts_before: int) -> None:
        refused = swarm(base, {**form, "model": "wrong-model"})  # the form's value stays in the options
        assert refused["success"] is False, refused
        assert "The model `wrong-model` does not exist" in refused["message"], refused
        assert "served-a, served-b" in refused["message"] and refused["message"].startswith("loadkit: ")
        wait_for("the refused run to stop", lambda: state() == "stopped", 30)
        # Locust may deliver the refused start's spawn to a worker seconds after the stop (seen:
        # 3.5 s); that worker's users send nothing, and its "done" ends the run it started again.
        time.sleep(5)
        wait_for("the refused run to stay stopped", lambda: state() == "stopped", 30)
        assert len(server.posts()) == posts_before + 1  # the pre-flight request only

    form = {"user_count": "2", "spawn_rate": "2", "max_requests": "4"}
    with ScriptedServer(server) as srv, open(tmp_path / "log", "wb") as log:
        proc = subprocess.Popen(
            locust_cmd(
                "--web-host",
                "127.0.0.1",
                "--web-port",
                str(port),
                "--host",
                srv.url,
                "--model",
                "wrong-model",
                "--scenario",
                TINY,
                *extra,
                "--report-dir",
                str(tmp_path / "r"),
                "--no-console-table",
            ),  # fmt: skip
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=REPO,
        )
        try:
            wait_for("the web UI", web_ready(base), 30)
            if processes > 1:
                wait_for(
                    "two workers", lambda: get_json(base + "/stats/requests").get("worker_count") == 2, 60
                )
            refused_start(0)
            accepted = swarm(base, {**form, "model": "served-a"})
            assert accepted["success"] is True, accepted
            # Its end is its report written: Locust's state reads "stopped" as soon as the workers
            # stop, while the master may still be ending the run, and a form posted then is
            # Locust's edit of a running test (no start, nothing to refuse).
            wait_for(
                "the accepted run's end",
                lambda: (
                    len(server.posts()) == 1 + 1 + 4
                    and state() == "stopped"
                    and (tmp_path / "r-2" / "report.json").exists()
                ),
                60,
            )
            wait_for("the accepted run to stay stopped", lambda: state() == "stopped", 30)
            refused_start(1 + 1 + 4)  # after a run: no worker sends under that run's configuration
        finally:
            stop_process(proc)
    assert "Traceback" not in (tmp_path / "log").read_text()


def test_web_ui_form_options_reach_the_server_and_preflight_runs_per_start(tmp_path):
    """Started from the web UI's form (no early check): pre-flight runs at every start with
    that start's options, and a decision of an earlier start does not carry over."""
    server = StrictOpenAI(allowed=CHAT_FIELDS | {"temperature"})
    port = free_port()
    base = f"http://127.0.0.1:{port}"

    def start(**form: str) -> dict:
        return swarm(base, {"user_count": "2", "spawn_rate": "2", **form})

    def stopped() -> bool:
        return get_json(base + "/stats/requests")["state"] == "stopped"

    with ScriptedServer(server) as srv, open(tmp_path / "log", "wb") as log:
        proc = subprocess.Popen(
            locust_cmd(
                "--web-host",
                "127.0.0.1",
                "--web-port",
                str(port),
                "--host",
                srv.url,
                "--engine",
                "vllm",
                "--scenario",
                TINY,
                "--report-dir",
                str(tmp_path / "r"),
                "--no-console-table",
            ),  # fmt: skip
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=REPO,
        )
        try:
            wait_for("the web UI", web_ready(base), 30)
            with urllib.request.urlopen(base + "/", timeout=5) as resp:
                page = resp.read().decode()
            for name in (
                "extra_body",
                "header",
                "strict_request",
                "exact_output",
                "backoff",
                "breaker",
                "breaker_dead_after",
            ):
                assert f'"{name}"' in page, name  # in the start form
            assert start(max_requests="8", extra_body='{"temperature": 0.5}', header="X-Route: green")[
                "success"
            ]
            wait_for("the first run to end", lambda: stopped() and len(server.posts()) >= 10, 30)
            first_run = server.posts()
            # Refused at pre-flight: the form's reply says so (issue 32: it was success: true).
            refused = start(max_requests="8", strict_request="true")
            assert refused["success"] is False and "Unexpected fields in the request" in refused["message"], (
                refused
            )
            assert "--strict-request: stopped" in refused["message"]
            wait_for(
                "the second start to be refused",
                lambda: stopped() and len(server.posts()) > len(first_run),
                30,
            )
            time.sleep(0.5)
        finally:
            stop_process(proc)
    text = (tmp_path / "log").read_text()
    posts = server.posts()
    # Start 1: refused with ignore_eos/min_tokens, accepted without, then the 8 requests of the run.
    assert len(first_run) == 10 and EXACT_FIELDS <= set(first_run[0].body), text[-3000:]
    assert all(p.body["temperature"] == 0.5 and p.headers["x-route"] == "green" for p in first_run)
    assert not any(EXACT_FIELDS & set(p.body) for p in first_run[1:])
    # Start 2 (--strict-request from the form): a fresh pre-flight, with the fields again, refused; nothing sent.
    assert len(posts) == len(first_run) + 1 and EXACT_FIELDS <= set(posts[-1].body)
    assert "Unexpected fields in the request" in text and "--strict-request: stopped" in text
    assert "Traceback" not in text
