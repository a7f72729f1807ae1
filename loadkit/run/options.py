"""loadkit's command-line options, one "loadkit" group on Locust's parser.

Each option has help text and a LOADKIT_* environment variable; `include_in_web_ui` and
`is_secret` are chosen per option: the API key is secret, things that cannot change between
runs of one process (plugins) stay out of the start form.
"""

from __future__ import annotations

import argparse
from typing import Any

from loadkit.plugins import get_plugin_manager
from loadkit.run.gpuoptions import add_gpu_arguments


class OptionGroup:
    """An argparse group whose add_argument takes Locust's web-UI keywords.

    Locust only understands `include_in_web_ui` / `is_secret` on its top-level parser; arguments
    added to a group share the parser's action list, so setting the same attributes on the
    action makes them show (or hide) in the start form all the same.
    """

    def __init__(self, group: argparse._ArgumentGroup) -> None:
        self._group = group
        self.section = ""  # the add_*_arguments adding now: `loadkit options` lists options by it

    def add_argument(
        self,
        *args: Any,
        include_in_web_ui: bool = True,
        is_secret: bool = False,
        is_required: bool = False,
        is_multiple: bool = False,
        **kwargs: Any,
    ) -> argparse.Action:
        action = self._group.add_argument(*args, **kwargs)
        action.include_in_web_ui = include_in_web_ui  # type: ignore[attr-defined]
        action.is_secret = is_secret  # type: ignore[attr-defined]
        action.is_required = is_required  # type: ignore[attr-defined]
        action.is_multiple = is_multiple  # type: ignore[attr-defined]
        action.loadkit_section = self.section  # type: ignore[attr-defined]
        return action


def add_core_arguments(group: OptionGroup) -> None:
    group.add_argument(
        "--engine",
        default="openai",
        env_var="LOADKIT_ENGINE",
        help="Engine adapter for --host (see `loadkit plugins`), or 'auto' to detect it from the server",
    )
    group.add_argument(
        "--api",
        default="",
        env_var="LOADKIT_API",
        help="Endpoint family where the engine has several: chat, completions, native (default: the engine's first)",
    )
    group.add_argument("--model", default="", env_var="LOADKIT_MODEL", help="Model name sent in requests")
    group.add_argument(
        "--think-tags",
        action="store_true",
        default=False,
        env_var="LOADKIT_THINK_TAGS",
        help="Read <think>...</think> in the answer text as reasoning (servers run without a reasoning parser)",
    )
    group.add_argument(
        "--api-key",
        default="",
        env_var="LOADKIT_API_KEY",
        is_secret=True,
        help="API key sent to the target only (Authorization header); never written to any output",
    )
    group.add_argument(
        "--scenario",
        default="",
        env_var="LOADKIT_SCENARIO",
        help="Scenario describing the traffic: a shipped one by name (see `loadkit scenarios list`) or a TOML file "
        "(default: uneven_chat)",
    )
    # Text, not type=int: the web form hands back "" for "not given" (parsed in runconfig.parse_seed).
    group.add_argument(
        "--seed",
        default="",
        metavar="N",
        env_var="LOADKIT_SEED",
        help="Prompt salt of the run: repeat a run's exact prompts with the value its report.json records "
        "(manifest.prompts.salt); 0: the scenario's own, unsalted prompts (default: a random salt per run, "
        "so a rerun is not answered from the server's prefix cache; lengths and arrivals are the scenario's either way)",
    )


def add_target_arguments(group: OptionGroup) -> None:
    group.add_argument(
        "--target",
        action="append",
        default=[],
        env_var="LOADKIT_TARGET",
        include_in_web_ui=False,
        help="NAME=URL[,engine=E][,api=A][,model=M]: a target to load (repeatable); each gets the same workload, "
        "stats kept under NAME. Default: one target from --host named after the engine",
    )
    group.add_argument(
        "--targets",
        default="",
        env_var="LOADKIT_TARGETS",
        help="Targets as one string, separated by spaces (the web UI's form for --target): "
        "'a=http://h1:8000,engine=vllm b=http://h2:8000'",
    )
    group.add_argument(
        "--skip-reachability-check",
        action="store_true",
        default=False,
        include_in_web_ui=False,
        env_var="LOADKIT_SKIP_REACHABILITY_CHECK",
        help="Start even if a target does not accept connections (they count as connect_error)",
    )


def add_request_arguments(group: OptionGroup) -> None:
    group.add_argument(
        "--honor-retry-after",
        action="store_true",
        default=False,
        env_var="LOADKIT_HONOR_RETRY_AFTER",
        help="After a 429/503 with Retry-After, the virtual user waits that long (at most --max-retry-after) "
        "before its next request, as a polite client would; off: keep the offered load (a load test's default)",
    )
    group.add_argument(
        "--max-retry-after",
        type=float,
        default=30.0,
        env_var="LOADKIT_MAX_RETRY_AFTER",
        help="Cap, in seconds, on a honoured Retry-After",
    )
    group.add_argument(
        "--first-token-timeout",
        type=float,
        default=60.0,
        env_var="LOADKIT_FIRST_TOKEN_TIMEOUT",
        help="Seconds from send to the first token before a request is timeout_first_token",
    )
    group.add_argument(
        "--request-timeout",
        type=float,
        default=300.0,
        env_var="LOADKIT_REQUEST_TIMEOUT",
        help="Seconds from send to the end of the stream before a request is timeout_total",
    )
    group.add_argument(
        "--max-requests",
        type=int,
        default=0,
        env_var="LOADKIT_MAX_REQUESTS",
        help="Stop the run after this many requests have been sent in all (0: no limit)",
    )


def add_load_arguments(group: OptionGroup) -> None:
    group.add_argument(
        "--max-schedule-lag",
        type=float,
        default=0.0,
        env_var="LOADKIT_MAX_SCHEDULE_LAG",
        help="Open loop: drop (and count) a request that could not be sent within this many seconds of its "
        "scheduled time because every user was busy (0: never drop, only count it late)",
    )
    group.add_argument(
        "--late-threshold-ms",
        type=float,
        default=10.0,
        env_var="LOADKIT_LATE_THRESHOLD_MS",
        help="Open loop: a request sent more than this after its scheduled time counts as late",
    )
    group.add_argument(
        "--warmup",
        type=float,
        default=0.0,
        env_var="LOADKIT_WARMUP",
        help="Seconds of warm-up at the start of the run, excluded from the stats (shown as its own stage)",
    )


def add_run_arguments(group: OptionGroup) -> None:
    group.add_argument(
        "--model-config",
        default="",
        env_var="LOADKIT_MODEL_CONFIG",
        help="Hugging Face config.json (or a preset, see `loadkit capacity --list-presets`) of the served model: "
        "the HTML report then plans KV-cache capacity on this run's real lengths",
    )
    group.add_argument(
        "--scrape-interval",
        type=float,
        default=5.0,
        env_var="LOADKIT_SCRAPE_INTERVAL",
        help="Seconds between scrapes of each target's Prometheus metrics (queue, running, KV usage, "
        "prefix hits), stored in the report (0: do not scrape)",
    )
    add_gpu_arguments(group)  # loadkit/run/gpuoptions.py
    group.add_argument(
        "--report-format",
        action="append",
        choices=["llmd-br"],
        default=[],
        env_var="LOADKIT_REPORT_FORMAT",
        include_in_web_ui=False,
        help="Also write the report in this format at the end of the run (repeatable): llmd-br = llm-d "
        "Benchmark Report v0.2, one benchmark_report_v0.2,_loadkit_TARGET.yaml per target (docs/llm-d.md)",
    )
    group.add_argument(
        "--session-header",
        default="",
        env_var="LOADKIT_SESSION_HEADER",
        help="Header carrying the session id on multi-turn traffic, for routers with session affinity (e.g. X-Session-ID)",
    )


# -- strict servers and failing targets (pre-flight, request extras, backoff, breaker) ---------


def add_server_strictness_arguments(group: OptionGroup) -> None:
    """Pre-flight, what is added to every request, backoff after fast failures, the breaker."""
    group.add_argument(
        "--exact-output",
        action=argparse.BooleanOptionalAction,
        default=None,
        env_var="LOADKIT_EXACT_OUTPUT",
        help="Ask the engine for exactly max_tokens (ignore_eos / min_tokens where the adapter has them); "
        "--no-exact-output: let the model stop early. Default: the scenario's [prompt] exact_output "
        "(web UI: true, false, or empty)",
    )
    group.add_argument(
        "--extra-body",
        default="",
        env_var="LOADKIT_EXTRA_BODY",
        metavar="JSON",
        help="JSON object merged into every request body, over loadkit's own fields "
        "(e.g. '{\"temperature\": 0}')",
    )
    group.add_argument(
        "--header",
        action="append",
        default=None,
        env_var="LOADKIT_HEADER",
        is_secret=True,
        metavar="'NAME: VALUE'",
        help="Header sent with every request and probe (repeatable; in the web UI several separated by commas). "
        "Values are treated as secrets: never written to any output",
    )
    group.add_argument(
        "--strict-request",
        action="store_true",
        default=False,
        env_var="LOADKIT_STRICT_REQUEST",
        help="Stop the run when a target refuses the pre-flight request, instead of dropping the fields "
        "loadkit adds (ignore_eos, min_tokens, stream_options) that it refuses",
    )
    group.add_argument(
        "--backoff",
        action=argparse.BooleanOptionalAction,
        default=True,
        env_var="LOADKIT_BACKOFF",
        help="Closed loop: after a request that failed within --backoff-threshold-ms, the user waits "
        "(exponential, capped at --backoff-max, jittered; reset by a success) instead of retrying at once",
    )
    group.add_argument(
        "--backoff-threshold-ms",
        type=float,
        default=50.0,
        env_var="LOADKIT_BACKOFF_THRESHOLD_MS",
        help="A failure that came back faster than this (ms) is a fast failure, followed by backoff",
    )
    group.add_argument(
        "--backoff-max",
        type=float,
        default=5.0,
        env_var="LOADKIT_BACKOFF_MAX",
        help="Cap, in seconds, on one backoff wait",
    )
    group.add_argument(
        "--breaker",
        default="first=20,window=200,failed=90%,min=50",
        env_var="LOADKIT_BREAKER",
        help="Circuit breaker, per target: stop the run (marked invalid) when the first N requests all failed, "
        "or more than PCT percent of the last WINDOW failed (once MIN are in it); 'off' disables it",
    )
    group.add_argument(
        "--breaker-dead-after",
        type=float,
        default=10.0,
        env_var="LOADKIT_BREAKER_DEAD_AFTER",
        metavar="SECONDS",
        help="Circuit breaker's time rule, per target: stop the run when no request succeeded for this many "
        "seconds and every one that ended in that time failed (a target that died, even with few users); 0 disables it",
    )


def add_tls_arguments(group: OptionGroup) -> None:
    """https:// targets (loadkit/client/tls.py builds the one client context from these)."""
    group.add_argument(
        "--ca-bundle",
        default="",
        env_var="LOADKIT_CA_BUNDLE",
        help="PEM file of the CA certificates to trust for https:// targets, instead of the system store "
        "(default: the system store; SSL_CERT_FILE / SSL_CERT_DIR are honoured)",
    )
    group.add_argument(
        "--client-cert",
        default="",
        env_var="LOADKIT_CLIENT_CERT",
        help="PEM client certificate for gateways that require mTLS (its key in the same file, or --client-key)",
    )
    group.add_argument(
        "--client-key",
        default="",
        env_var="LOADKIT_CLIENT_KEY",
        help="PEM private key (unencrypted) of --client-cert",
    )
    group.add_argument(
        "--insecure",
        action="store_true",
        default=False,
        env_var="LOADKIT_INSECURE",
        help="Do not verify https:// targets' certificates and host names (a test deployment only: "
        "anyone on the path can impersonate the server); the report says so",
    )


def add_arguments(parser: Any) -> None:
    """Register every loadkit option (core, stats, and those plugins add) on Locust's parser."""
    group = OptionGroup(parser.add_argument_group("loadkit", "loadkit: LLM load-testing options"))
    for add in (
        add_core_arguments,
        add_target_arguments,
        add_request_arguments,
        add_load_arguments,
        add_run_arguments,
        add_server_strictness_arguments,
        add_tls_arguments,
    ):
        group.section = add.__name__
        add(group)
    try:
        from loadkit.run.costtiers import add_cost_tier_arguments
        from loadkit.stats import add_stats_arguments
    except ImportError:  # stats layer not installed in this build
        pass
    else:
        group.section = add_stats_arguments.__name__
        add_stats_arguments(group)
        group.section = add_cost_tier_arguments.__name__
        add_cost_tier_arguments(group)
    group.section = "plugins"
    get_plugin_manager().hook.loadkit_add_arguments(group=group)
    from loadkit.run.masterport import default_master_port

    default_master_port(parser)  # --processes alone: not Locust's fixed 5557 (run/masterport.py)
