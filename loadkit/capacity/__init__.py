"""KV-cache capacity planning: per-token KV size by attention variant and dtype, paged-block
fragmentation over a real length distribution, prefix sharing, and how many sequences fit a GPU.

    from loadkit.capacity import plan, render_table
    p = plan("llama-3-8b", "my-run/", gpu_memory="80GiB")  # a run's report dir: its raw log
    print(render_table(p))
"""

from loadkit.capacity.errors import CapacityError
from loadkit.capacity.kv import kv_bytes_per_token, variant_table
from loadkit.capacity.lengths import (
    LengthSample,
    PrefixSharing,
    from_list,
    lengths_from_scenario,
    read_lengths,
)
from loadkit.capacity.model import ModelSpec, list_presets, load_model, model_from_config
from loadkit.capacity.paging import blocks_per_sequence, fragmentation
from loadkit.capacity.params import ParamCount, count_params
from loadkit.capacity.planner import SCHEMA, plan
from loadkit.capacity.render import render_html, render_table
from loadkit.capacity.report import report_section

__all__ = [
    "SCHEMA",
    "CapacityError",
    "LengthSample",
    "ModelSpec",
    "ParamCount",
    "PrefixSharing",
    "blocks_per_sequence",
    "count_params",
    "fragmentation",
    "from_list",
    "kv_bytes_per_token",
    "lengths_from_scenario",
    "list_presets",
    "load_model",
    "model_from_config",
    "plan",
    "read_lengths",
    "render_html",
    "render_table",
    "report_section",
    "variant_table",
]
