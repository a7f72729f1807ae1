import orjson
import pluggy

import loadkit.report.plugin as report_plugin
from loadkit import hookspecs
from tests.report.conftest import make_rows, report_from_rows


def manager() -> pluggy.PluginManager:
    pm = pluggy.PluginManager("loadkit")
    pm.add_hookspecs(hookspecs)
    pm.register(report_plugin)
    pm.check_pending()
    return pm


def test_final_write_writes_and_announces_the_html(tmp_path, capsys):
    report = report_from_rows({"a": make_rows("a", 30, 1)})
    (tmp_path / "report.json").write_bytes(orjson.dumps(report))
    manager().hook.loadkit_write_report(report=report, report_dir=str(tmp_path), final=False)
    assert not (tmp_path / "report.html").exists()  # built once, from the final figures
    manager().hook.loadkit_write_report(report=report, report_dir=str(tmp_path), final=True)
    assert (tmp_path / "report.html").read_text().startswith("<!DOCTYPE html>")
    assert f"loadkit: HTML report {tmp_path / 'report.html'}" in capsys.readouterr().out


def test_html_writer_never_crashes_the_run(tmp_path, caplog):
    target = tmp_path / "file"
    target.write_text("not a directory")
    manager().hook.loadkit_write_report(report={"engines": {}}, report_dir=str(target), final=True)
    assert "report.html not written" in caplog.text
