"""Hook calls go through pluggy (order, wrappers, argument filtering) and still name the plugin
that failed; the engine registry is built once per plugin manager."""

from __future__ import annotations

import pytest

from loadkit import hookimpl
from loadkit.engines.base import EngineAdapter
from loadkit.plugins import PluginError, engine_registry, get_engine, new_plugin_manager
from loadkit.plugins.guard import failure_of
from loadkit.run.runoptions import configure_plugins, run_options


class Calls:
    """Plugins that append to one shared list, so the test reads the order pluggy used."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def plugin(self, tag: str, fail: bool = False, **opts):
        seen = self.seen

        class Plugin:
            @hookimpl(**opts)
            def loadkit_request_finished(self):  # names no argument: pluggy passes none
                seen.append(tag)
                if fail:
                    raise RuntimeError(f"{tag} broke")

        return Plugin()


def manager(*plugins):
    pm = new_plugin_manager(load_entry_points=False)
    for i, plugin in enumerate(plugins):
        pm.register(plugin, name=f"loadkit-p{i}")
    return pm


def test_order_is_pluggys_and_a_failure_is_contained_and_named():
    c = Calls()
    pm = manager(c.plugin("last", trylast=True), c.plugin("plain"), c.plugin("broken", fail=True),
                 c.plugin("first", tryfirst=True))  # fmt: skip
    assert pm.hook.loadkit_request_finished(record=object()) == []
    assert c.seen == ["first", "broken", "plain", "last"]  # tryfirst, newest first, trylast
    [failure] = pm.take_failures("loadkit_request_finished")
    assert (
        failure.describe()
        == "plugin 'loadkit-p2' raised RuntimeError('broken broke') in loadkit_request_finished"
    )
    assert pm.take_failures("loadkit_request_finished") == []


def test_a_wrapper_wraps_and_a_wrappers_failure_propagates_named():
    c = Calls()

    class Wrapper:
        @hookimpl(wrapper=True)
        def loadkit_request_finished(self, record):
            c.seen.append(f"before {record}")
            result = yield
            c.seen.append("after")
            if record == "boom":
                raise ValueError("wrapper says no")
            return result

    pm = manager(c.plugin("plain"), Wrapper())
    pm.hook.loadkit_request_finished(record="r1")
    assert c.seen == ["before r1", "plain", "after"]
    with pytest.raises(ValueError, match="wrapper says no") as info:
        pm.hook.loadkit_request_finished(record="boom")
    assert failure_of(info.value).plugin == "loadkit-p1"


def test_a_refused_option_names_the_innermost_plugin_through_a_wrapper():
    class Refuses:
        @hookimpl
        def loadkit_configure(self, options):
            raise ValueError("--x must be y")

    class Wraps:
        @hookimpl(hookwrapper=True)
        def loadkit_configure(self):
            yield

    pm = manager(Refuses(), Wraps())
    with pytest.raises(PluginError, match=r"plugin 'loadkit-p0' refused the options: --x must be y"):
        configure_plugins(run_options({}), pm)


def test_engine_registry_is_built_once_and_again_when_plugins_change():
    calls = []

    class Adapter(EngineAdapter):
        name = "counted"

    class Counts:
        @hookimpl
        def loadkit_register_engines(self, register):
            calls.append(1)
            register(Adapter)

    pm = manager(Counts())
    for _ in range(7):  # what a plain run used to do: one registry build per lookup
        assert get_engine("counted", pm).plugin == "loadkit-p0"
    assert len(calls) == 1
    assert list(engine_registry(pm))[0] == "openai"  # built-ins first, in registration order
    pm.register(type("Other", (), {})(), name="loadkit-other")
    engine_registry(pm)
    assert len(calls) == 2


def test_a_clash_names_both_plugins_in_registration_order():
    class Adapter(EngineAdapter):
        name = "vllm"

    class Clash:
        @hookimpl
        def loadkit_register_engines(self, register):
            register(Adapter)

    with pytest.raises(
        PluginError, match=r"engine 'vllm' registered twice: by 'loadkit' and by 'loadkit-p0'"
    ):
        engine_registry(manager(Clash()))


def test_a_builtin_failure_is_not_contained():
    pm = new_plugin_manager(load_entry_points=False)
    with pytest.raises(KeyError) as info:  # loadkit's own writer given no report: its bug, raised
        pm.hook.loadkit_write_report(report={}, report_dir="/nonexistent", final=False)
    assert failure_of(info.value).plugin == "loadkit"
    assert pm.take_failures("loadkit_write_report") == []
