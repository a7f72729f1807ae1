"""A block-style YAML text of JSON-like data (dict, list, str, int, float, bool, None).

llm-d-benchmark reads its Benchmark Reports as YAML (``yaml.safe_load``); loadkit does not
depend on PyYAML, and the documents it writes hold only JSON types, so this small emitter is
enough. Every string and key is double-quoted (JSON escapes are YAML escapes), so no text
can turn into a number, a boolean or a null. Floats always carry a dot: PyYAML follows YAML
1.1, where ``1e-05`` is a string and ``1.0e-05`` a float.
"""

from __future__ import annotations

import json
import math
from typing import Any


def scalar(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return ".nan"
        if math.isinf(value):
            return ".inf" if value > 0 else "-.inf"
        text = repr(value)
        if "e" in text and "." not in text.split("e")[0]:
            mantissa, exponent = text.split("e")
            text = f"{mantissa}.0e{exponent}"
        return text
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    raise TypeError(f"not a JSON-like value: {type(value).__name__}")


def _lines(value: Any, indent: int) -> list[str]:
    pad = "  " * indent
    out: list[str] = []
    if isinstance(value, dict):
        for key, item in value.items():
            head = f"{pad}{json.dumps(str(key), ensure_ascii=False)}:"
            if isinstance(item, dict | list) and item:
                out.append(head)
                out += _lines(item, indent + 1)
            else:
                out.append(f"{head} {_inline(item)}")
    elif isinstance(value, list | tuple):
        for item in value:
            if isinstance(item, dict | list) and item:
                body = _lines(item, indent + 1)
                # "- " takes the place of the first line's indentation
                out.append(f"{pad}- {body[0].lstrip()}")
                out += body[1:]
            else:
                out.append(f"{pad}- {_inline(item)}")
    else:
        out.append(pad + scalar(value))
    return out


def _inline(value: Any) -> str:
    if isinstance(value, dict):
        return "{}"
    if isinstance(value, list | tuple):
        return "[]"
    return scalar(value)


def dumps(value: Any) -> str:
    """``value`` as YAML text, ending with a newline."""
    if not isinstance(value, dict | list | tuple) or not value:
        return _inline(value) + "\n"
    return "\n".join(_lines(value, 0)) + "\n"
