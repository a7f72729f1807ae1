"""One error hierarchy: every error a user can fix derives from ``loadkit.errors.UserError``, so
a caller needs one ``except UserError`` to print it as one line and exit 2.

The walk imports every module of the package in a subprocess (the Locust glue monkey-patches
gevent on import, which the main test phase must not get) and lists each exception class a
module defines. An exception class that is not a UserError must be listed below with why."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from loadkit.errors import UserError

# Not a user's mistake: request outcomes, control-flow signals, internals, the test kit.
NOT_USER_ERRORS = {
    "loadkit.servers.info.TokenizeError": "a server that cannot count tokens: the caller falls back or reports it",
    "loadkit.stats.rawlog.MalformedLine": "one raw-log line a reader skips and counts, not a user's mistake",
    "loadkit.client.events.StreamDone": "control flow: the end of a stream, not an error",
    "loadkit.client.httpstream.ConnectFailed": "one request's transport failure, recorded as its outcome",
    "loadkit.client.httpstream.ProtocolError": "a server's malformed HTTP answer, recorded as the request's outcome",
    "loadkit.client.tls.TlsError": "one request's TLS failure (its outcome); at start the glue turns it into a ConfigError",
    "loadkit.servers.metrics.MetricsError": "a server's metrics endpoint cannot be read: a warning, the run goes on",
    "loadkit.servers.gpu.GpuError": "one failed GPU reading: a sample row with its error, the run goes on (docs/gpu.md)",
    "loadkit.sim.images.FetchError": "a simulated engine's failed image fetch: the request's HTTP 400 answer",
    "loadkit.locust.failures.RequestOutcomeError": "what Locust's request event carries for a failed request",
    "loadkit.locust.starts.StartRefused": "worker control flow: the master refused the start and told the user",
    "loadkit.sim.wire.common.WireError": "a simulated engine's refusal of a request: an HTTP answer",
    "loadkit.stats.distributed.PayloadError": "a worker snapshot the master drops and counts; never reaches the user",
    "loadkit.testing.adapters._Cancelled": "test kit internal: cancels a replayed stream",
    "loadkit.testing.llamacpp.LlamaServerUnavailable": "test kit: a pytest skip reason",
    "loadkit.testing.llamacpp.LlamaServerError": "test kit: the llama.cpp server a test started failed",
    "loadkit.types.MalformedEvent": "a stream event no parser accepts, recorded as the request's outcome",
    "loadkit.workload.mooncakerows._ShortRow": "one short trace row, padded, counted or refused by the reader",
    "loadkit.workload.tracerows.BadRow": "one bad trace row, skipped and counted or refused as a TraceReadError",
    "loadkit.verify.trace.TraceUnread": 'the oracle cannot recompute a trace\'s asked part: it says "not checked" and why',
}

WALK = """
import importlib, inspect, json, pkgutil, sys
import loadkit
from loadkit.errors import UserError

found = {}
for info in pkgutil.walk_packages(loadkit.__path__, "loadkit."):
    if info.name.rsplit(".", 1)[-1] == "__main__":  # runs the command on import
        continue
    module = importlib.import_module(info.name)
    for obj in vars(module).values():
        if inspect.isclass(obj) and issubclass(obj, BaseException) and obj.__module__ == info.name:
            found[info.name + "." + obj.__qualname__] = issubclass(obj, UserError)
json.dump(found, sys.stdout)
"""


@pytest.fixture(scope="module")
def exception_classes() -> dict[str, bool]:
    out = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", WALK], capture_output=True, text=True, timeout=120, check=True
    )
    found: dict[str, bool] = json.loads(out.stdout)
    return found


def test_every_user_facing_error_is_a_user_error(exception_classes: dict[str, bool]) -> None:
    strays = sorted(
        name for name, is_user in exception_classes.items() if not is_user and name not in NOT_USER_ERRORS
    )
    assert not strays, (
        f"derive these from loadkit.errors.UserError, or list them in NOT_USER_ERRORS with why: {strays}"
    )


def test_the_listed_exceptions_exist_and_are_not_user_errors(exception_classes: dict[str, bool]) -> None:
    for name in NOT_USER_ERRORS:
        assert exception_classes.get(name) is False, (
            f"{name}: gone or now a UserError; update NOT_USER_ERRORS"
        )


def test_the_named_errors_are_user_errors_and_keep_their_old_bases() -> None:
    """The hierarchy the docs name; each keeps its former base, so an ``except ValueError``
    (or RuntimeError) that caught it still does."""
    from loadkit.capacity.errors import CapacityError
    from loadkit.client.tls import TlsConfigError
    from loadkit.plugins import PluginError
    from loadkit.report.rules import RuleError
    from loadkit.servers.targets import TargetError
    from loadkit.sim.config import ConfigError as SimConfigError
    from loadkit.sim.protocols import ProtocolError
    from loadkit.workload import ScenarioError
    from loadkit.workload.tracereader import TraceReadError

    for cls in (CapacityError, TlsConfigError, TargetError, RuleError, SimConfigError, ProtocolError,
                ScenarioError, TraceReadError):  # fmt: skip
        assert issubclass(cls, UserError) and issubclass(cls, ValueError), cls
    assert issubclass(PluginError, UserError) and issubclass(PluginError, RuntimeError)
