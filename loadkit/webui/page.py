"""The live chart page served at /loadkit/: one self-contained HTML document.

Locust's React UI has no chart-extension point, so loadkit serves its own page: inline CSS and
JavaScript, SVG drawn by hand, nothing fetched from anywhere but ``stats.json`` next to it
(the machine running the test often has no internet, and a CDN would leak the run's URL).
Engine names only ever reach the DOM through ``textContent``.
"""

from __future__ import annotations

POLL_MS = 2000

CHART_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>loadkit · live LLM charts</title>
<style>
body{font-family:system-ui,sans-serif;margin:16px;background:#fafafa;color:#222}
h1{font-size:20px;margin:0 0 4px} .sub{color:#666;font-size:13px;margin-bottom:12px}
.grid{display:grid;grid-template-columns:repeat(auto-fit,minmax(460px,1fr));gap:12px}
.card{background:#fff;border:1px solid #ddd;border-radius:6px;padding:8px}
.card h2{font-size:14px;margin:0 0 4px} svg{width:100%;height:220px}
.axis{stroke:#999;stroke-width:1} .grid-line{stroke:#eee} text{font-size:10px;fill:#555}
.legend{font-size:12px;margin-top:4px} .legend span{margin-right:12px;white-space:nowrap}
.empty{fill:#999;font-size:13px} a{color:#1565c0}
#status.bad{color:#b71c1c}
#warnings{color:#b71c1c;margin:4px 0 8px 0}
</style></head>
<body>
<h1>loadkit · live LLM charts</h1>
<div class="sub"><span id="status">waiting for data…</span> ·
<a href="../">back to Locust</a> · <a href="stats.csv">LLM stats CSV</a> ·
<a href="stats.json">JSON</a> · <a href="report" target="_blank">final HTML report</a></div>
<ul id="warnings" class="bad"></ul>
<div class="grid">
<div class="card"><h2>TTFT ms (p50 solid, p99 dashed; last WINDOW s)</h2><svg id="ttft"></svg><div class="legend" id="ttft-legend"></div></div>
<div class="card"><h2>TPOT ms (p50 solid, p99 dashed; last WINDOW s)</h2><svg id="tpot"></svg><div class="legend" id="tpot-legend"></div></div>
<div class="card"><h2>Output tokens/s (per second)</h2><svg id="tokps"></svg><div class="legend" id="tokps-legend"></div></div>
<div class="card"><h2>In-flight requests (solid) · server queue (dashed, when scraped)</h2><svg id="inflight"></svg><div class="legend" id="inflight-legend"></div></div>
</div>
<script>
"use strict";
const NS = "http://www.w3.org/2000/svg";
const COLORS = ["#1565c0","#c62828","#2e7d32","#ef6c00","#6a1b9a","#00838f","#5d4037","#ad1457"];
const W = 600, H = 220, L = 48, R = 10, T = 10, B = 24;
function el(name, attrs, parent) {
  const e = document.createElementNS(NS, name);
  for (const k in attrs) e.setAttribute(k, attrs[k]);
  if (parent) parent.appendChild(e);
  return e;
}
function fmt(v) { return v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2); }
function bounds(lines) {
  let x0 = Infinity, x1 = -Infinity, y1 = 0;
  for (const ln of lines) for (let i = 0; i < ln.x.length; i++) {
    if (ln.y[i] === null || ln.y[i] === undefined) continue;
    x0 = Math.min(x0, ln.x[i]); x1 = Math.max(x1, ln.x[i]); y1 = Math.max(y1, ln.y[i]);
  }
  if (x0 === Infinity) return null;
  if (x1 === x0) x1 = x0 + 1;
  return {x0, x1, y1: y1 > 0 ? y1 * 1.1 : 1};
}
function pathOf(ln, sx, sy) {
  // A gap (null) breaks the line: "not measured" is never drawn as zero.
  let d = "", pen = false;
  for (let i = 0; i < ln.x.length; i++) {
    const y = ln.y[i];
    if (y === null || y === undefined) { pen = false; continue; }
    d += (pen ? "L" : "M") + sx(ln.x[i]).toFixed(1) + " " + sy(y).toFixed(1);
    pen = true;
  }
  return d;
}
function axes(svg, b, sx, sy) {
  for (let i = 0; i <= 4; i++) {
    const v = b.y1 * i / 4, y = sy(v);
    el("line", {x1: L, x2: W - R, y1: y, y2: y, class: "grid-line"}, svg);
    el("text", {x: L - 4, y: y + 3, "text-anchor": "end"}, svg).textContent = fmt(v);
  }
  const span = b.x1 - b.x0;
  for (let i = 0; i <= 4; i++) {
    const x = b.x0 + span * i / 4;
    const anchor = i === 0 ? "start" : i === 4 ? "end" : "middle";
    el("text", {x: sx(x), y: H - 6, "text-anchor": anchor}, svg).textContent =
      new Date(x * 1000).toTimeString().slice(0, 8);
  }
  el("line", {x1: L, x2: L, y1: T, y2: H - B, class: "axis"}, svg);
  el("line", {x1: L, x2: W - R, y1: H - B, y2: H - B, class: "axis"}, svg);
}
function draw(id, lines) {
  const svg = document.getElementById(id);
  svg.setAttribute("viewBox", "0 0 " + W + " " + H);
  while (svg.firstChild) svg.removeChild(svg.firstChild);
  const legend = document.getElementById(id + "-legend");
  legend.textContent = "";
  const b = bounds(lines);
  if (!b) { el("text", {x: W / 2, y: H / 2, "text-anchor": "middle", class: "empty"}, svg).textContent = "no data yet"; return; }
  const sx = x => L + (x - b.x0) / (b.x1 - b.x0) * (W - L - R);
  const sy = y => H - B - y / b.y1 * (H - T - B);
  axes(svg, b, sx, sy);
  for (const ln of lines) {
    const d = pathOf(ln, sx, sy);
    if (!d) continue;
    const p = el("path", {d, fill: "none", stroke: ln.color, "stroke-width": 1.6, class: "series"}, svg);
    if (ln.dashed) p.setAttribute("stroke-dasharray", "5 3");
  }
  const seen = new Set();
  for (const ln of lines) {
    if (seen.has(ln.engine)) continue;
    seen.add(ln.engine);
    const s = document.createElement("span");
    s.style.color = ln.color; s.textContent = "\\u25A0 " + ln.engine;
    legend.appendChild(s);
  }
}
function lines(data, fn) {
  const out = [];
  Object.keys(data).sort().forEach((engine, i) => fn(engine, data[engine], COLORS[i % COLORS.length], out));
  return out;
}
function render(doc) {
  const w = doc.windowed, s = doc.seconds;
  const lat = m => lines(w, (e, d, c, out) => {
    out.push({engine: e, color: c, x: d.t, y: d[m + "_p50"]});
    out.push({engine: e, color: c, x: d.t, y: d[m + "_p99"], dashed: true});
  });
  draw("ttft", lat("ttft_ms"));
  draw("tpot", lat("tpot_ms"));
  draw("tokps", lines(s, (e, d, c, out) => out.push({engine: e, color: c, x: d.unix, y: d.output_tokens})));
  const inflight = lines(s, (e, d, c, out) => out.push({engine: e, color: c, x: d.unix, y: d.in_flight}));
  lines(doc.queue || {}, (e, d, c, out) => { if (d.waiting.some(v => v !== null)) out.push({engine: e, color: c, x: d.t, y: d.waiting, dashed: true}); })
    .forEach(ln => { ln.color = inflight.find(o => o.engine === ln.engine)?.color || ln.color; inflight.push(ln); });
  draw("inflight", inflight);
  const st = document.getElementById("status");
  st.className = doc.valid ? "" : "bad";
  st.textContent = "state: " + doc.state + " · engines: " + Object.keys(s).length +
    " · requests: " + doc.rows.filter(r => r.label === "*" && r.user_class === "*").reduce((a, r) => a + r.requests, 0) +
    (doc.valid ? "" : " · run INVALID (see report)") + " · updated " + new Date().toTimeString().slice(0, 8);
}
async function poll() {
  try {
    const resp = await fetch("stats.json", {cache: "no-store", credentials: "same-origin"});
    if (!resp.ok) throw new Error("HTTP " + resp.status);
    const doc = await resp.json();
    render(doc);
    // Warnings (client saturated, lost workers, schedule behind) shown as they are raised.
    const ul = document.getElementById("warnings");
    ul.replaceChildren(...(doc.warnings || []).map(w => { const li = document.createElement("li"); li.textContent = w; return li; }));
  } catch (err) {
    const st = document.getElementById("status");
    st.className = "bad"; st.textContent = "cannot read stats.json: " + err.message;
  }
  setTimeout(poll, POLL);
}
const POLL = POLL_MS_VALUE;
poll();
</script></body></html>
"""


def chart_page(window_s: float) -> str:
    return CHART_PAGE.replace("POLL_MS_VALUE", str(POLL_MS)).replace("WINDOW", f"{window_s:g}")
