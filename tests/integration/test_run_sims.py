"""`loadkit run --sim NAME=PROFILE,port=PORT` serves the simulator on that port."""

from __future__ import annotations

import pytest

from tests.helpers.ports import free_port
from tests.helpers.runs import check_conservation, load_report
from tests.helpers.simruns import loadkit

pytestmark = pytest.mark.integration


def test_a_sim_on_the_port_asked(tmp_path):
    port = free_port()
    proc = loadkit("run", "--sim", f"a=fast,port={port}", "-u", "2", "-r", "2", "-t", "3s", "--stop-timeout", "5",
                   "--report-dir", str(tmp_path / "r"))  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert f"loadkit run: simulator a (profile fast) at http://127.0.0.1:{port}" in proc.stdout
    report = check_conservation(tmp_path / "r")
    assert report["valid"] and report["engines"]["a"]["ok"] > 0
    assert load_report(tmp_path / "r")["manifest"]["targets"][0]["url"] == f"http://127.0.0.1:{port}"


def test_a_bad_sim_value_is_one_line_and_exit_2():
    proc = loadkit("run", "--sim", "a=fast,prot=1", "-t", "1s")
    assert proc.returncode == 2
    assert proc.stderr.strip().endswith("--sim 'a=fast,prot=1': unknown part 'prot=1'; allowed keys: port")
