"""`loadkit plugins`: every registered engine with the plugin and version providing it, as JSON."""

from __future__ import annotations

import sys

import orjson

from loadkit.plugins import PluginError, engine_registry, new_plugin_manager


def main(argv: list[str]) -> int:
    if argv and argv[0] in ("-h", "--help"):
        print("usage: loadkit plugins\n\nPrint every registered engine as JSON (honours LOADKIT_LOAD_PLUGINS).")
        return 0
    try:
        registry = engine_registry(new_plugin_manager())
    except PluginError as exc:
        print(f"loadkit plugins: error: {exc}", file=sys.stderr)
        return 2
    engines = [
        {"engine": info.name, "plugin": info.plugin, "version": info.version, "description": info.description,
         "apis": list(info.adapter.apis), "framing": info.adapter.framing}
        for info in sorted(registry.values(), key=lambda i: i.name)
    ]
    sys.stdout.write(orjson.dumps({"engines": engines}, option=orjson.OPT_INDENT_2).decode() + "\n")
    return 0
