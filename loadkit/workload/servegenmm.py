"""ServeGen's multimodal datasets (its MULTIMODAL category, e.g. mm-image), refused by name.

Their windows carry image (audio, video) counts and sizes beside the text lengths; replaying
the text alone would send requests without their images, so a dataset with such a field is
refused, naming the window and the field, instead of failing on a missing input_tokens or
being replayed as text (docs/scenarios.md, ServeGen).
"""

from __future__ import annotations

from pathlib import Path

from loadkit.workload.tracereader import TraceReadError

# Words in a field name that mark ServeGen's multimodal datasets (their windows give image,
# audio or video counts and sizes beside, or instead of, the text's input_tokens).
_MULTIMODAL_WORDS = ("image", "video", "audio", "modal", "mm_")


def refuse_multimodal(path: Path, doc: dict[str, object], keys: list[str]) -> None:
    """A multimodal dataset is refused by name: replaying its text lengths alone would send
    requests without their images, and its own fields are not read yet."""
    for key in keys:
        entry = doc[key]
        if not isinstance(entry, dict):
            continue
        found = sorted(f for f in entry if any(w in str(f).lower() for w in _MULTIMODAL_WORDS))
        if found:
            raise TraceReadError(
                f"{path}: window {key}: field {found[0]!r}: multimodal ServeGen rows are not yet supported "
                f"(found {', '.join(repr(f) for f in found)}; loadkit replays ServeGen's language and "
                "reasoning datasets: input_tokens, output_tokens, reason_ratio). For images, use a "
                "[[parts]] scenario with an [images] table (docs/scenarios.md)"
            )
