"""Keep secret options (``is_secret``, e.g. --api-key) out of the page Locust sends the browser.

Locust masks a secret in the start form but still embeds its value in the page's template
arguments, where "view source" shows it. Here the value is blanked on every render, and a
blank secret in a /swarm form means "keep the value given at startup": without that, starting a
run from the form would overwrite the real key with the empty string.
"""

from __future__ import annotations

from typing import Any

from flask import request
from werkzeug.datastructures import ImmutableMultiDict

KEEP_HINT = " (value given at startup is kept and not shown; type one here to replace it)"


def hide_secret_defaults(template_args: dict[str, Any]) -> set[str]:
    """Blank the default of every secret start-form option; returns their names."""
    names = set()
    for name, option in (template_args.get("extra_options") or {}).items():
        if not option.get("is_secret"):
            continue
        names.add(name)
        if option.get("default_value"):
            option["default_value"] = ""
            option["help_text"] = (option.get("help_text") or "") + KEEP_HINT
    return names


def install_secret_hiding(web_ui: Any, base_path: str) -> None:
    """Wrap ``update_template_args`` and drop blank secrets from /swarm posts."""
    secret_names: set[str] = set()
    original = web_ui.update_template_args

    def update_template_args_hiding_secrets() -> None:
        original()
        secret_names.update(hide_secret_defaults(web_ui.template_args))

    web_ui.update_template_args = update_template_args_hiding_secrets
    if web_ui.template_args:
        secret_names.update(hide_secret_defaults(web_ui.template_args))

    def keep_blank_secrets() -> None:
        if request.method != "POST" or request.path != f"{base_path}/swarm":
            return
        form = request.form
        if any(form.get(name) == "" for name in secret_names):
            kept = [(k, v) for k, v in form.items(multi=True) if not (k in secret_names and v == "")]
            request.form = ImmutableMultiDict(kept)

    web_ui.app.before_request(keep_blank_secrets)
