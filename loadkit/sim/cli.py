"""``loadkit sim``: serve simulated engines on loopback until SIGINT/SIGTERM.

    loadkit sim --port 8000                       # vLLM-style OpenAI API, default profile
    loadkit sim --serve openai:8000 --serve ollama:8001:profile=fast,decode_base_ms=3
    loadkit sim --port 0 --profile fast --truth-log truth.jsonl --fault drop_mid_stream=0.1

Prints one ``loadkit sim: listening on http://HOST:PORT ...`` line per port once ready.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import signal
import ssl
import sys
from typing import Any

from loadkit.errors import UserError
from loadkit.plugins import load_failures
from loadkit.plugins.loading import unavailable_note
from loadkit.sim.config import (
    PROFILE_HELP,
    PROFILES,
    ConfigError,
    Profile,
    get_profile,
    profile_fields,
    validate,
)
from loadkit.sim.faults import FAULTS, build_plan
from loadkit.sim.protocols import all_families
from loadkit.sim.runner import TruthLog
from loadkit.sim.server import EngineSpec, ServerOptions, SimEngine, start_engine


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="loadkit sim", description="Embedded LLM engine simulator (loopback).")
    p.add_argument(
        "--port", type=int, default=None, help="port of the single engine (0 = any free port; default 8000)"
    )
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    # Checked in engine_specs, not by argparse's choices: an unknown family's error names a
    # plugin that failed to load (argparse's "invalid choice" could not).
    p.add_argument(
        "--engine",
        default="openai",
        metavar="{" + ",".join(all_families()) + "}",
        help="wire protocol family of --port (built-in, or added by an installed plugin)",
    )
    p.add_argument("--profile", default="default", help=f"named profile: {', '.join(PROFILES)}")
    p.add_argument(
        "--serve",
        action="append",
        default=[],
        metavar="FAMILY:PORT[:KEY=VAL,...]",
        help="serve one engine per option; KEY is 'profile' or any profile option (e.g. decode_base_ms)",
    )
    p.add_argument(
        "--seed", type=int, default=0, help="seed of every random draw (output words, EOS, faults)"
    )
    p.add_argument("--truth-log", default=None, metavar="FILE", help="append one JSON line per request")
    p.add_argument(
        "--fault",
        action="append",
        default=[],
        metavar="NAME=[ARG:]FRACTION",
        help=f"inject a fault on a fraction of requests; NAME in {', '.join(FAULTS)}",
    )
    p.add_argument(
        "--stall-seconds", type=float, default=60.0, help="stall_after: close the stalled stream after this"
    )
    p.add_argument(
        "--trickle-interval-ms", type=float, default=5.0, help="trickle: pause between small writes"
    )
    p.add_argument("--retry-after", type=int, default=1, help="Retry-After seconds of http_429")
    p.add_argument(
        "--spin-us",
        type=float,
        default=1200.0,
        help="busy-wait this long before each step end (timing precision)",
    )
    p.add_argument(
        "--sndbuf",
        type=int,
        default=None,
        metavar="BYTES",
        help="SO_SNDBUF of client connections (default: kernel autotuning)",
    )
    p.add_argument(
        "--tls-cert",
        default=None,
        metavar="FILE",
        help="serve https with this PEM certificate chain (the key too, unless --tls-key)",
    )
    p.add_argument("--tls-key", default=None, metavar="FILE", help="PEM private key of --tls-cert")
    p.add_argument(
        "--tls-client-ca",
        default=None,
        metavar="FILE",
        help="with --tls-cert: require client certificates issued by the CAs in this PEM file (mTLS)",
    )
    p.add_argument("--list-profiles", action="store_true", help="print the named profiles as JSON and exit")
    _add_profile_options(p)
    return p


def _add_profile_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("profile options (override the chosen profile)")
    for f in profile_fields():
        flag = "--" + f.name.replace("_", "-")
        if f.type in ("bool", bool):
            g.add_argument(
                flag,
                dest=f.name,
                action=argparse.BooleanOptionalAction,
                default=None,
                help=PROFILE_HELP[f.name],
            )
        else:
            kind = float if "float" in str(f.type) else int if "int" in str(f.type) else str
            g.add_argument(
                flag,
                dest=f.name,
                type=kind,
                default=None,
                metavar=kind.__name__.upper(),
                help=PROFILE_HELP[f.name],
            )


def _global_overrides(args: argparse.Namespace) -> dict[str, Any]:
    return {f.name: getattr(args, f.name) for f in profile_fields() if getattr(args, f.name) is not None}


def parse_serve(spec: str, base_overrides: dict[str, Any], default_profile: str) -> EngineSpec:
    """``FAMILY:PORT[:KEY=VAL,...]`` -> EngineSpec; ConfigError on anything wrong."""
    parts = spec.split(":", 2)
    families = all_families()
    if len(parts) < 2 or parts[0] not in families:
        note = unavailable_note(parts[0], load_failures()) if len(parts) >= 2 else ""
        raise ConfigError(
            f"--serve {spec!r}: expected FAMILY:PORT[:KEY=VAL,...] with FAMILY in {', '.join(families)}{note}"
        )
    port = _port(parts[1], f"--serve {spec!r}")
    kv = _pairs(parts[2], spec) if len(parts) == 3 else {}
    profile = get_profile(str(kv.pop("profile", default_profile)))
    return EngineSpec(parts[0], port, _apply(profile, {**base_overrides, **kv}, spec))


def _port(text: str, where: str) -> int:
    if not text.isdigit() or int(text) > 65535:
        raise ConfigError(f"{where}: port must be 0..65535, got {text!r}")
    return int(text)


def _pairs(text: str, spec: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in filter(None, text.split(",")):
        key, sep, value = item.partition("=")
        if not sep:
            raise ConfigError(f"--serve {spec!r}: {item!r} is not KEY=VALUE")
        out[key.strip().replace("-", "_")] = value.strip()
    return out


def _apply(profile: Profile, overrides: dict[str, Any], where: str) -> Profile:
    types = {f.name: f.type for f in profile_fields()}
    changes = {}
    for key, value in overrides.items():
        if key not in types:
            raise ConfigError(f"{where}: unknown option {key!r}")
        changes[key] = _convert(key, str(types[key]), value)
    return validate(profile.replace(**changes)) if changes else profile


def _convert(key: str, kind: str, value: Any) -> Any:
    if not isinstance(value, str):
        return value
    try:
        if "bool" in kind:
            if value.lower() not in ("true", "false", "1", "0", "yes", "no"):
                raise ValueError(value)
            return value.lower() in ("true", "1", "yes")
        if "float" in kind:
            return float(value)
        if "int" in kind:
            return int(value)
    except ValueError:
        raise ConfigError(f"option {key}: bad value {value!r}") from None
    return value


def engine_specs(args: argparse.Namespace) -> list[EngineSpec]:
    overrides = _global_overrides(args)
    if args.serve and args.port is not None:
        raise ConfigError("use either --port or --serve, not both")
    if args.serve:
        specs = [parse_serve(s, overrides, args.profile) for s in args.serve]
    else:
        if args.engine not in all_families():
            raise ConfigError(
                f"--engine {args.engine!r}: unknown engine family; known: {', '.join(all_families())}"
                f"{unavailable_note(args.engine, load_failures())}"
            )
        port = 8000 if args.port is None else _port(str(args.port), "--port")
        specs = [EngineSpec(args.engine, port, _apply(get_profile(args.profile), overrides, "options"))]
    ports = [s.port for s in specs if s.port]
    if len(ports) != len(set(ports)):
        raise ConfigError("two engines on the same port")
    return specs


def server_options(args: argparse.Namespace) -> ServerOptions:
    if args.sndbuf is not None and args.sndbuf < 1:
        raise ConfigError("--sndbuf must be >= 1")
    for name in ("stall_seconds", "trickle_interval_ms", "spin_us", "retry_after"):
        if not getattr(args, name) >= 0:
            raise ConfigError(f"--{name.replace('_', '-')} must be >= 0")
    if (args.tls_key or args.tls_client_ca) and not args.tls_cert:
        raise ConfigError("--tls-key and --tls-client-ca need --tls-cert")
    options = ServerOptions(
        host=args.host,
        seed=args.seed,
        faults=build_plan(args.fault),
        truth_log=args.truth_log,
        stall_seconds=args.stall_seconds,
        trickle_interval_ms=args.trickle_interval_ms,
        retry_after_s=args.retry_after,
        spin_us=args.spin_us,
        sndbuf=args.sndbuf,
        tls_cert=args.tls_cert,
        tls_key=args.tls_key,
        tls_client_ca=args.tls_client_ca,
    )
    try:
        options.ssl_context()
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(
            f"--tls-cert/--tls-key/--tls-client-ca: cannot use the files given: {exc}"
        ) from None
    return options


async def serve(
    specs: list[EngineSpec], options: ServerOptions, stop: asyncio.Event, state: dict[str, Any] | None = None
) -> None:
    """Run engines until ``stop`` is set; prints the ready lines (``state`` gets the engines)."""
    truth = TruthLog(options.truth_log) if options.truth_log else None
    engines = [SimEngine(s, options, truth, i) for i, s in enumerate(specs)]
    tls = options.ssl_context()
    started = [await start_engine(e, options.host, tls) for e in engines]
    if state is not None:
        state["engines"] = engines
        return await _wait_and_close(stop, started, truth, engines)
    for e in engines:
        print(
            f"loadkit sim: listening on {options.scheme}://{options.host}:{e.port} engine={e.family} "
            f"profile={e.profile.name} model={e.model}",
            flush=True,
        )
    await _wait_and_close(stop, started, truth, engines)


async def _wait_and_close(
    stop: asyncio.Event, started: list[Any], truth: TruthLog | None, engines: list[SimEngine]
) -> None:
    flusher = asyncio.get_running_loop().create_task(_flush_every(truth, 0.5))
    try:
        await stop.wait()
    finally:
        flusher.cancel()
        for server, task in started:
            server.close()
            task.cancel()
        for engine in engines:
            engine.shutdown()
        if truth is not None:
            truth.close()


async def _flush_every(truth: TruthLog | None, seconds: float) -> None:
    while truth is not None:
        await asyncio.sleep(seconds)
        truth.flush()


def _run(specs: list[EngineSpec], options: ServerOptions) -> None:
    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        # The step and output loops must not stop for a full garbage collection walking
        # every object imported at start-up (measured: 50 ms stalls at 2,000 streams).
        gc.collect()
        gc.freeze()
        await serve(specs, options, stop)

    try:
        import uvloop

        uvloop.run(main())
    except ImportError:
        asyncio.run(main())


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    if args.list_profiles:
        import dataclasses
        import json

        print(json.dumps({k: dataclasses.asdict(v) for k, v in PROFILES.items()}, indent=2))
        return 0
    specs = engine_specs(args)  # a ConfigError is a UserError: one line, exit 2
    options = server_options(args)
    try:
        _run(specs, options)
    except OSError as exc:
        raise UserError(f"cannot listen: {exc}") from None
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
