"""Every hook loadkit calls. Plugins implement them with ``@loadkit.hookimpl``.

Specs may gain arguments in later versions; they never lose or rename one, so a plugin written
against this file keeps working. Where a hook runs matters in distributed runs: "local" is a
plain (non-distributed) run, "master" and "worker" are Locust's distributed roles.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    import argparse

    from loadkit.core.adapter import EngineAdapter
    from loadkit.core.kinds import RequestKind
    from loadkit.records import RequestRecord
    from loadkit.sim.protocols import SimProtocol

hookspec = pluggy.HookspecMarker("loadkit")
hookimpl = pluggy.HookimplMarker("loadkit")


@hookspec
def loadkit_register_engines(register: Callable[[type[EngineAdapter]], None]) -> None:
    """Register engine adapters.

    Called once per process, when loadkit first needs the engine registry, on every node
    (local, master, worker); again only if the set of plugins changes.

    :param register: call it once per adapter class (a subclass of
        ``loadkit.engines.base.EngineAdapter``, defined in ``loadkit.core.adapter``, with a
        unique ``name``). Registering a name that another plugin already registered is an
        error that names both plugins.
    :return: nothing; results are ignored.
    """


@hookspec
def loadkit_register_sim_protocols(register: Callable[[SimProtocol], None]) -> None:
    """Register wire protocols for ``loadkit sim`` (``--engine NAME``, ``--serve NAME:PORT``).

    Called once per simulator process when it starts (``loadkit sim``, and
    ``loadkit.sim.testing`` helpers), not during a load test on any Locust node.

    :param register: call it once per ``loadkit.sim.protocols.SimProtocol``. The protocol
        frames requests and answers; the simulator supplies batching, the prefix cache,
        faults and the truth log. A name a built-in family or another plugin already uses
        is an error that names the plugin.
    :return: nothing; results are ignored.
    """


@hookspec
def loadkit_register_kinds(register: Callable[[RequestKind], None]) -> None:
    """Register request kinds beyond loadkit's own (chat, embeddings, rerank), e.g. audio transcription.

    Called once per process, when loadkit first needs the kind registry, on every node (local,
    master, worker). A scenario's ``[[parts]]`` entry with ``kind = NAME`` then builds its
    requests with the kind's ``build`` from the entry's ``keys``; the targets' adapters say
    which kinds they serve (``EngineAdapter.kind_paths``) and parse the answers
    (``new_body_parser`` for a kind that is not streamed). docs/writing-a-plugin.md shows one.

    :param register: call it once per ``loadkit.core.kinds.RequestKind`` with a unique
        ``name``; a name loadkit or another plugin already uses is an error naming both.
    :return: nothing; results are ignored.
    """


@hookspec(firstresult=True)
def loadkit_detect_engine(probes: dict[str, Any]) -> str | None:
    """Decide which engine serves a target, for ``--engine auto``.

    Called on the node that builds the run's targets (local or master, never a worker: the
    master hands its answer to the workers), at most once per process and target URL whose
    engine is ``auto``, the first time loadkit builds the targets. Stops at the first non-None result; the built-in generic
    OpenAI detector runs last (``trylast``) and always answers ``"openai"``.

    :param probes: what loadkit fetched from the server: ``{path: {"status": int,
        "headers": {...}, "json": parsed body or None, "text": body text}}`` for the paths
        every registered adapter lists in ``info_paths``; unreachable paths are absent.
    :return: a registered engine name, or None to let later plugins decide.
    """


@hookspec
def loadkit_add_arguments(group: argparse._ArgumentGroup) -> None:
    """Add command-line options to loadkit's option group on Locust's parser.

    Called once while Locust builds its parser, on every node. Options added here reach the
    plugin by their ``dest`` through ``loadkit_configure`` (and adapters through
    ``AdapterOptions.run_options``), once per test start. Give each a help text and, where a
    user may set it from the environment, an ``env_var="LOADKIT_..."``; pass
    ``include_in_web_ui=False`` for anything that must not show in the start form and
    ``is_secret=True`` for keys and passwords.

    :param group: the argparse group named "loadkit".
    :return: nothing.
    """


@hookspec
def loadkit_configure(options: Mapping[str, Any]) -> None:
    """Read the run's options, including the ones this plugin added with ``loadkit_add_arguments``.

    Called whenever loadkit builds a run's targets from the options: at start-up and again at
    every ``test_start``, so possibly several times per process (keep it idempotent). Runs on
    every node (local, master, worker); workers see the values the master sent. Adapters get
    the same mapping as ``AdapterOptions.run_options`` and need no hook to read it.

    :param options: every option by argparse ``dest`` (``"host"``, ``"engine"``,
        ``"anthropic_version"``, ...), read-only. ``"api_key"`` is in it: never log it.
    :return: nothing. Raise ``ValueError`` to refuse a value: the run stops before any
        request with the message, naming the plugin.
    """


@hookspec
def loadkit_request_finished(record: RequestRecord) -> None:
    """Observe one finished request.

    Called on the node that sent the request (local or worker), after its outcome is final
    and before it enters the stats, once per request in completion order (warm-up requests,
    which the run's stats leave out, excluded). Keep it cheap: it
    runs on the load-generating path. An exception raised here marks the run invalid (exit
    code non-zero) and names the plugin; the record is still counted.

    :param record: the finished ``loadkit.records.RequestRecord``; do not mutate it.
    :return: nothing.
    """


@hookspec
def loadkit_write_report(report: dict[str, Any], report_dir: str, final: bool) -> None:
    """Write one report format into ``report_dir`` (loadkit's own report.json, CSV files and
    report.html are implementations of this hook).

    Called on the node that owns the merged stats (local or master) every time loadkit writes
    its reports: at test stop and once more, with ``final`` True, at the end of the run (a
    run stopped in the web UI: at its stop, the next Start writing another directory).
    loadkit's writers run first (``tryfirst``), so their files exist when yours runs. An
    exception raised here is logged with the plugin's name, marks the run invalid (the
    reason is in report.json's ``invalid_reasons``) and does not stop the other writers.

    :param report: the ``loadkit.report/1`` document being written to ``report.json``.
    :param report_dir: the directory to write into.
    :param final: True for the end-of-run write (write expensive formats only then).
    :return: nothing; results are ignored.
    """


@hookspec
def loadkit_report_written(report: dict[str, Any], report_dir: str) -> None:
    """Act on the final report, e.g. to upload it or write another format.

    Called once at the end of a run (each web-UI run at its Stop) on the node that owns the
    merged stats (local or master), after every ``loadkit_write_report`` implementation has
    run, so ``report.json``, ``report.html`` and the other files exist in ``report_dir``. An exception raised here is
    logged with the plugin's name and marks the run invalid (report.json is rewritten with
    the reason); the other implementations still run.

    :param report: the ``loadkit.report/1`` document as written to ``report.json``.
    :param report_dir: the directory the reports were written to.
    :return: nothing.
    """
