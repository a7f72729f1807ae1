"""Byte sizes of data types, and memory sizes as people write them ("80GiB", "40GB")."""

from __future__ import annotations

import re

from loadkit.capacity.errors import CapacityError

# Bytes per element. int4 packs two values per byte; the scales/zero-points that real int4
# formats carry (about 3% at group size 128) are deliberately left out: see docs/capacity.md.
DTYPE_BYTES: dict[str, float] = {
    "fp32": 4.0,
    "fp16": 2.0,
    "bf16": 2.0,
    "fp8": 1.0,
    "int8": 1.0,
    "int4": 0.5,
}

_ALIASES = {
    "float32": "fp32",
    "float": "fp32",
    "float16": "fp16",
    "half": "fp16",
    "bfloat16": "bf16",
    "fp8_e4m3": "fp8",
    "fp8_e5m2": "fp8",
    "float8": "fp8",
    "e4m3": "fp8",
    "e5m2": "fp8",
}

_UNITS = {
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}
_SIZE_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([a-zA-Z]+)\s*$")


def normalise_dtype(name: str) -> str:
    """Canonical dtype name ('bfloat16' -> 'bf16'); CapacityError for an unknown one."""
    key = name.strip().lower()
    key = _ALIASES.get(key, key)
    if key not in DTYPE_BYTES:
        known = ", ".join(DTYPE_BYTES)
        raise CapacityError(f"unknown dtype {name!r} (known: {known})")
    return key


def dtype_bytes(name: str) -> float:
    return DTYPE_BYTES[normalise_dtype(name)]


def parse_memory(text: str) -> int:
    """'80GiB' -> 85899345920. A unit is required: a bare '80' is ambiguous (GB or GiB?)."""
    match = _SIZE_RE.match(text)
    unit = match.group(2).lower() if match else ""
    if match is None or unit not in _UNITS:
        raise CapacityError(f"memory size {text!r}: expected a number and a unit, e.g. 80GiB or 40GB")
    return int(float(match.group(1)) * _UNITS[unit])


def format_bytes(n: float | None) -> str:
    """Binary units, three significant digits: 131072 -> '128 KiB', 524288 -> '512 KiB'."""
    if n is None:
        return "-"
    sign = "-" if n < 0 else ""
    value = abs(float(n))
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{sign}{_three_digits(value)} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def _three_digits(value: float) -> str:
    if value == int(value):
        return str(int(value))
    if value >= 100:
        return f"{value:.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"
