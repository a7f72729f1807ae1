"""`loadkit plugins`: every registered engine, and every protocol ``loadkit sim`` can serve (its
built-in families and those plugins add), with the plugin and version providing it, as JSON
(and, under ``failed``, any installed plugin that could not be loaded, with its error)."""

from __future__ import annotations

import sys

import orjson

from loadkit.errors import UserError
from loadkit.plugins import engine_registry, load_failures, new_plugin_manager
from loadkit.sim.protocols import listing


def main(argv: list[str]) -> int:
    if argv and argv[0] in ("-h", "--help"):
        print(
            "usage: loadkit plugins\n\nPrint every registered engine and simulator protocol as JSON "
            "(honours LOADKIT_LOAD_PLUGINS)."
        )
        return 0
    try:
        pm = new_plugin_manager()
        registry = engine_registry(pm)
        protocols = listing(pm)
    except UserError as exc:  # PluginError, ProtocolError
        print(f"loadkit plugins: error: {exc}", file=sys.stderr)
        return 2
    engines = [
        {
            "engine": info.name,
            "plugin": info.plugin,
            "version": info.version,
            "description": info.description,
            "apis": list(info.adapter.apis),
            "framing": info.adapter.framing,
        }
        for info in sorted(registry.values(), key=lambda i: i.name)
    ]
    out: dict[str, object] = {"engines": engines, "simulator_protocols": protocols}
    if failed := load_failures(pm):
        out["failed"] = [f.as_dict() for f in failed]
    sys.stdout.write(orjson.dumps(out, option=orjson.OPT_INDENT_2).decode() + "\n")
    return 0
