"""When loadkit picks the master port of a --processes run (loadkit/run/masterport.py)."""

from __future__ import annotations

import argparse

import pytest

from loadkit.run.masterport import default_master_port, wants_free_port


@pytest.mark.parametrize(
    ("argv", "environ", "wanted"),
    [
        (["--processes", "2"], {}, True),
        (["--processes=4", "--headless"], {}, True),
        ([], {"LOCUST_PROCESSES": "2"}, True),
        ([], {}, False),  # not a --processes run
        (["--processes", "2", "--master-port", "6000", "--master-bind-port", "6000"], {}, False),
        (["--processes", "2", "--master-bind-port=6000"], {}, False),
        (["--processes", "2"], {"LOCUST_MASTER_PORT": "6000"}, False),
        (["--processes", "2", "--worker", "--master-host", "h"], {}, False),  # workers for a remote master
        (["--processes", "2"], {"LOCUST_MODE_WORKER": "true"}, False),
    ],
)
def test_a_free_port_only_for_a_local_processes_run_whose_port_nobody_chose(argv, environ, wanted):
    assert wants_free_port(argv, environ) is wanted


def test_both_ports_default_to_one_free_port_and_an_explicit_one_wins():
    parser = argparse.ArgumentParser()
    parser.add_argument("--master-port", type=int, default=5557)
    parser.add_argument("--master-bind-port", type=int, default=5557)
    port = default_master_port(parser, ["--processes", "2"], {})
    assert port is not None and port != 5557
    options = parser.parse_args([])
    assert options.master_port == options.master_bind_port == port
    assert default_master_port(argparse.ArgumentParser(), ["--headless"], {}) is None
