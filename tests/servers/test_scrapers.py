"""One scraper constructor (loadkit.servers.metrics.scraper_for) for the run's scraping and the
web UI's live queue column: both scrape with the target's own TLS context and skip engines
that expose no metrics."""

from __future__ import annotations

from collections.abc import Iterator
from typing import ClassVar

import pytest

from loadkit.client.httpstream import Endpoint
from loadkit.core.adapter import AdapterOptions
from loadkit.engines.vllm import VLLMAdapter
from loadkit.locust.scraping import ServerMetrics
from loadkit.servers.metrics import scraper_for
from loadkit.servers.targets import Target, TargetSpec
from loadkit.sim.testing import SimHandle, sim_process
from loadkit.webui.live import QueueProbe
from tests.helpers.certs import TlsFiles, make_tls_files


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    return make_tls_files(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def tls_sim(tls_files: TlsFiles) -> Iterator[SimHandle]:
    with sim_process("--profile", "fast", "--tls-cert", tls_files.server) as sim:
        yield sim


def private_ca_target(url: str, tls_files: TlsFiles, adapter: VLLMAdapter | None = None) -> Target:
    """A target whose endpoint trusts the test CA, while this process's context (the system
    trust store) does not: only a scraper that takes the target's context can reach it."""
    endpoint = Endpoint.parse(url, ssl_context=tls_files.client_context())
    return Target(
        TargetSpec("sim", url, "vllm"), adapter or VLLMAdapter(AdapterOptions(model="sim")), endpoint
    )


def test_web_ui_queue_column_scrapes_an_https_target_with_a_private_ca(
    tls_sim: SimHandle, tls_files: TlsFiles
) -> None:
    target = private_ca_target(tls_sim.url, tls_files)
    waiting = QueueProbe().read([target])
    assert set(waiting) == {"sim"}
    assert isinstance(waiting["sim"], float), "the scrape failed: the web UI dropped the target's TLS context"


def test_run_scraping_and_web_ui_take_the_same_scraper(tls_sim: SimHandle, tls_files: TlsFiles) -> None:
    target = private_ca_target(tls_sim.url, tls_files)
    row = scraper_for(target)
    assert row is not None
    sample = row.sample()
    assert sample["error"] is None and "waiting" in sample["values"]
    metrics = ServerMetrics([target], interval_s=0)
    metrics.scrape_once()
    assert metrics.section()["sim"]["errors"] == 0


class _NoMetricsEndpoint(VLLMAdapter):
    """Names metrics but serves none (``metrics_path`` None): nothing to scrape."""

    metrics_path: ClassVar[str | None] = None


def test_engines_without_a_metrics_path_are_not_scraped_by_either(tls_files: TlsFiles) -> None:
    target = private_ca_target("https://127.0.0.1:9", tls_files, _NoMetricsEndpoint(AdapterOptions()))
    assert scraper_for(target) is None
    assert QueueProbe().read([target]) == {}
    assert ServerMetrics([target], interval_s=0).section() == {}
