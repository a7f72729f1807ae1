"""The run's status on Locust's own page: validity, why not, warnings, SLOs, server messages,
the exceptions the locustfile's tasks raised, and why the last start failed.

Locust's extended tab is a plain-text table, so the status is a small panel of its own: a
script tag added to Locust's index page loads STATUS_SCRIPT, which polls ``stats.json`` and
draws the panel above Locust's app (outside React's root, so Locust never redraws it away).
It shows on the LLM tab, and on every tab when the last start failed. Everything from the
server reaches the DOM through ``textContent`` only.
"""

from __future__ import annotations

from typing import Any

from loadkit.stats.messages import top_messages

SCRIPT_PATH = "status.js"  # under /loadkit/
SCRIPT_TAG = '<script src="./loadkit/status.js" defer></script>'

STATUS_SCRIPT = r"""
"use strict";
(function () {
  const here = document.currentScript ? document.currentScript.src : location.href;
  const STATS = new URL("stats.json", here).toString();
  const POLL_MS = 2000;
  const box = document.createElement("div");
  box.id = "loadkit-status";
  box.style.cssText = "font:13px/1.4 system-ui,sans-serif;margin:6px 12px;padding:6px 10px;border-radius:4px;" +
    "border:1px solid #bbb;background:#fafafa;color:#222;display:none";
  function add(parent, tag, text, id, css) {
    const e = document.createElement(tag);
    if (text !== undefined) e.textContent = text;
    if (id) e.id = id;
    if (css) e.style.cssText = css;
    parent.appendChild(e);
    return e;
  }
  function list(parent, id, title, items) {
    if (!items.length) return;
    const wrap = add(parent, "div", undefined, id);
    add(wrap, "b", title);
    const ul = add(wrap, "ul", undefined, undefined, "margin:2px 0 4px 18px;padding:0");
    items.forEach(t => add(ul, "li", t));
  }
  function onLlmTab() { return new URLSearchParams(location.search).get("tab") === "llm"; }
  function validity(doc) {
    if (doc.state === "ready" && !doc.requests) return ["no run yet", "#555"];
    const so = ["running", "spawning"].includes(doc.state) ? " so far" : "";
    return doc.valid ? ["valid" + so, "#2e7d32"] : ["INVALID" + so, "#c62828"];
  }
  function render(doc) {
    box.replaceChildren();
    const [word, colour] = validity(doc);
    const head = add(box, "div");
    add(head, "b", "loadkit run: ");
    add(head, "span", word, "loadkit-validity", "font-weight:600;color:" + colour);
    add(head, "span", " · state " + doc.state + " · " + doc.requests + " requests");
    if (doc.start_error) {
      add(box, "div", "The last start failed: " + doc.start_error, "loadkit-start-error",
          "color:#c62828;font-weight:600;margin-top:3px");
    }
    list(box, "loadkit-reasons", "Why the run is invalid:", doc.invalid_reasons || []);
    list(box, "loadkit-warnings", "Warnings:", doc.warnings || []);
    list(box, "loadkit-gpu", "GPU now (docs/gpu.md):", doc.gpu_now || []);
    const slos = Object.entries(doc.slos || {}).map(([k, v]) => k + " ≤ " + v + " ms");
    add(box, "div", "SLOs in force: " + (slos.length ? slos.join(", ") : "none (goodput not computed)"),
        "loadkit-slos", "margin-top:3px");
    list(box, "loadkit-messages", "Failed requests, top server messages:",
         (doc.messages || []).map(m => m.engine + " · " + m.outcome + " ×" + m.count + ": " + m.message));
    list(box, "loadkit-task-errors", "Exceptions in the locustfile's tasks (what they would have sent next was not sent):",
         (doc.task_errors || []).map(e => e.user_class + " · " + e.type + " ×" + e.count + ": " + e.message +
                                         (e.where ? " (at " + e.where + ")" : "")));
    box.style.borderColor = doc.valid && !doc.start_error ? "#bbb" : "#c62828";
    box.style.display = onLlmTab() || doc.start_error ? "block" : "none";
  }
  async function poll() {
    try {
      const resp = await fetch(STATS, {cache: "no-store", credentials: "same-origin"});
      if (resp.ok) render(await resp.json());
    } catch (err) { /* Locust's own page shows that the server is gone */ }
    setTimeout(poll, POLL_MS);
  }
  function start() {
    document.body.insertBefore(box, document.body.firstChild);
    poll();
  }
  if (document.body) start(); else document.addEventListener("DOMContentLoaded", start);
})();
"""


def status_fields(report: dict[str, Any], start_error: str | None) -> dict[str, Any]:
    """The stats.json fields the panel draws (besides state, valid, warnings and slos)."""
    messages = []
    for engine, section in report["engines"].items():
        messages += [{"engine": engine, "outcome": o, "count": n, "message": m}
                     for o, n, m in top_messages(section, 3)]  # fmt: skip
    task_errors = [{"user_class": c, "type": e["type"], "count": e["count"], "message": e["message"],
                    "where": e.get("where", "")}
                   for c, s in (report.get("task_errors") or {}).items() for e in s.get("errors", [])[:3]]  # fmt: skip
    return {
        "invalid_reasons": report.get("invalid_reasons") or [],
        "start_error": start_error,
        "requests": sum(s["requests"] for s in report["engines"].values()),
        "messages": messages,
        "task_errors": task_errors,
    }


def with_status_script(html: str) -> str:
    """Locust's index page with the panel's script tag, added once."""
    if SCRIPT_TAG in html or "</body>" not in html:
        return html
    return html.replace("</body>", SCRIPT_TAG + "</body>", 1)
