"""loadkit: a Locust-based load generator for LLM inference servers.

``__all__`` is the top-level public API; docs/api/public.md lists every public module and name
and the stability promise (a test imports each one).

``LLMUser``, ``ScenarioUser`` and ``register_listeners`` (docs/locustfiles.md) are imported on
first use: they import Locust, whose gevent monkey-patching must not come with ``import
loadkit`` (the library, the simulator and the report tools run without it).
"""

from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _dist_version
from typing import TYPE_CHECKING, Any

from loadkit.core.adapter import AdapterOptions, EngineAdapter, StreamParser
from loadkit.hookspecs import hookimpl
from loadkit.records import RequestRecord
from loadkit.types import GenerationRequest, HttpRequest, MalformedEvent, TokenEvent, Usage

if TYPE_CHECKING:
    from loadkit.locust.api import register_listeners
    from loadkit.locust.scenario_user import ScenarioUser
    from loadkit.locust.user import LLMUser

# One version, pyproject.toml's, read from the installed distribution's metadata.
try:
    __version__ = _dist_version("loadkit")
except PackageNotFoundError:  # a source tree imported without being installed
    __version__ = "0+unknown"
del PackageNotFoundError

_LOCUST_NAMES = {
    "LLMUser": "loadkit.locust.user",
    "ScenarioUser": "loadkit.locust.scenario_user",
    "register_listeners": "loadkit.locust.api",
}

__all__ = [
    "AdapterOptions",
    "EngineAdapter",
    "GenerationRequest",
    "HttpRequest",
    "LLMUser",
    "MalformedEvent",
    "RequestRecord",
    "ScenarioUser",
    "StreamParser",
    "TokenEvent",
    "Usage",
    "__version__",
    "hookimpl",
    "register_listeners",
]


def __getattr__(name: str) -> Any:
    """PEP 562: the Locust-side names, imported when first asked for."""
    module = _LOCUST_NAMES.get(name)
    if module is None:
        raise AttributeError(f"module 'loadkit' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
