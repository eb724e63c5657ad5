"""The CSS and JavaScript of the HTML report (:mod:`.html`), inlined into every report.

Kept as string constants so the report is one self-contained file: no CDN, no network, no
package data to locate. The script reads the JSON in ``<script id="report-data">`` and draws
the per-trace views (waterfall, flame chart, category bars, findings) and the cross-run charts
into SVG with plain DOM calls. Text from traces is only ever set with ``textContent`` or
``setAttribute``, never parsed as HTML.
"""

from __future__ import annotations

CSS = """
:root {
  --fg: #1d2330; --muted: #5f6b7a; --line: #e3e7ee; --bg: #f6f7fb; --card: #ffffff;
  --accent: #2f54eb; --cp: #111827;
}
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--fg);
  font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
header { background: #18202f; color: #fff; padding: 18px 28px; }
header h1 { margin: 0; font-size: 20px; font-weight: 600; }
header .sub { color: #b8c2d6; font-size: 13px; margin-top: 4px; }
main { padding: 18px 28px 40px; max-width: 1500px; margin: 0 auto; }
section.card { background: var(--card); border: 1px solid var(--line); border-radius: 8px;
  padding: 14px 18px; margin: 0 0 18px; box-shadow: 0 1px 2px rgba(16, 24, 40, .04); }
h2 { font-size: 16px; margin: 0 0 10px; font-weight: 600; }
h3 { font-size: 14px; margin: 14px 0 6px; font-weight: 600; color: var(--muted); }
.note { color: var(--muted); font-size: 12.5px; margin: 4px 0 8px; }
.facts { display: flex; flex-wrap: wrap; gap: 10px; margin: 4px 0 0; }
.fact { background: var(--bg); border: 1px solid var(--line); border-radius: 6px; padding: 6px 12px; min-width: 110px; }
.fact b { display: block; font-size: 17px; }
.fact span { color: var(--muted); font-size: 12px; }
.legend { display: flex; flex-wrap: wrap; gap: 14px; font-size: 12.5px; margin: 6px 0 8px; color: var(--muted); }
.legend i { display: inline-block; width: 12px; height: 12px; border-radius: 2px; margin-right: 5px;
  vertical-align: -2px; }
.legend i.cp { background: #fff; border: 2px solid var(--cp); }
.legend i.off { background: #c9ced8; opacity: .6; }
.scroll { max-height: 640px; overflow: auto; border: 1px solid var(--line); border-radius: 6px; }
/* 13 rows and half of the next, so that the cut shows there is more. */
.scroll.short { max-height: 435px; }
/* As tall as its rows: the page is the one scroll, no row is cut in half by a box's edge. */
.wide { overflow-x: auto; border: 1px solid var(--line); border-radius: 6px; }
svg.sticky-axis { position: sticky; top: 0; z-index: 1; background: #fff; border-bottom: 1px solid var(--line); }
svg { display: block; font: 11px system-ui, -apple-system, "Segoe UI", Roboto, Arial, sans-serif; }
svg .axis text { fill: var(--muted); }
svg .axis line.grid { stroke: #eef0f4; }
svg .axis line.tick, svg .axis line.base { stroke: #aab2bf; }
svg .axis-title { fill: var(--muted); font-size: 11.5px; }
svg rect.span { stroke: rgba(0, 0, 0, .18); stroke-width: .5; }
svg rect.span.off { opacity: .42; }
svg g.phases.off { opacity: .5; }
svg.load-track { display: block; border-bottom: 1px solid var(--line); }
svg.load-track .running { fill: none; stroke: #7b5cf0; stroke-width: 1.5; }
svg.load-track .waiting { fill: rgba(214, 69, 69, .18); stroke: #d64545; stroke-width: 1.5; }
svg rect.span.cp { stroke: var(--cp); stroke-width: 1.4; }
svg rect.span.hl { stroke: #e11d48; stroke-width: 2.5; opacity: 1; }
#findings tr.finding[title] { cursor: pointer; }
#findings tr.finding.active { background: #fff1f3; }
#findings .where, #findings .suggestion { margin-top: 3px; font-size: 12px; color: #444; }
#findings .suggestion { color: #1a5e20; }
#findings .caveat, #findings ul.anomalies { color: #8a4b00; font-size: 12px; }
#findings ul.anomalies { margin: 0 0 8px; padding-left: 18px; }
#findings p.combined { margin: 0 0 8px; font-weight: 600; }
svg rect.span:hover { opacity: 1; stroke: #000; stroke-width: 2; }
svg text.label { fill: var(--fg); }
svg text.label.cp { font-weight: 600; }
svg text.inbar { fill: #fff; pointer-events: none; }
svg text.value { fill: var(--muted); }
svg rect.row-stripe { fill: #f7f8fb; }
table { border-collapse: collapse; width: 100%; font-size: 13px; }
th, td { text-align: left; padding: 5px 8px; border-bottom: 1px solid var(--line); vertical-align: top; }
th { color: var(--muted); font-weight: 600; font-size: 12px; background: #fafbfc; position: sticky; top: 0; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.mono { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 12px; }
#trace-table tbody tr { cursor: pointer; }
#trace-table tbody tr:hover { background: #f1f4ff; }
#trace-table tbody tr.selected { background: #e2e9ff; }
#trace-table tbody tr.nodata { cursor: default; color: var(--muted); }
.badge { display: inline-block; padding: 1px 7px; border-radius: 10px; font-size: 11.5px;
  background: #eef1f6; color: #3a4556; white-space: nowrap; }
.badge.saving { background: #e7f6ec; color: #17663a; }
td.barcell { width: 190px; white-space: nowrap; }
.bar { height: 9px; background: #3fa66b; border-radius: 2px; display: inline-block; vertical-align: middle; }
.grid2 { display: grid; grid-template-columns: 1fr 1fr; gap: 18px; }
@media (max-width: 1100px) { .grid2 { grid-template-columns: 1fr; } }
.empty { color: var(--muted); font-style: italic; }
.seq { font-size: 12px; }
.seq .step { display: inline-block; padding: 0 5px; margin: 1px 1px; border-radius: 3px; color: #fff; }
footer { color: var(--muted); font-size: 12px; text-align: center; padding: 10px; }
"""

JS = r"""
(function () {
  "use strict";
  var DATA = JSON.parse(document.getElementById("report-data").textContent);
  var SVGNS = "http://www.w3.org/2000/svg";
  var COLORS = DATA.colors;
  // Span row fields (see SPAN_FIELDS in html.py).
  var F = {};
  DATA.span_fields.forEach(function (name, i) { F[name] = i; });

  function svg(tag, attrs, parent) {
    var e = document.createElementNS(SVGNS, tag);
    if (attrs) { for (var k in attrs) { e.setAttribute(k, attrs[k]); } }
    if (parent) { parent.appendChild(e); }
    return e;
  }
  function html(tag, cls, text, parent) {
    var e = document.createElement(tag);
    if (cls) { e.className = cls; }
    if (text !== null && text !== undefined) { e.textContent = text; }
    if (parent) { parent.appendChild(e); }
    return e;
  }
  function clear(e) { while (e.firstChild) { e.removeChild(e.firstChild); } return e; }
  function byId(id) { return document.getElementById(id); }
  function color(cat) { return COLORS[cat] || "#9aa5b1"; }

  // As core.units.format_duration writes durations: three significant digits, SI units, "1.71 s";
  // from 100 s on in minutes and hours, "2 min 16 s", "12.3 min", "1 h 5 min", "33.4 h".
  function fmtLong(s) {
    var whole = Math.round(s), minutes = Math.round(s / 60);
    if (whole < 600) { return Math.floor(whole / 60) + " min " + whole % 60 + " s"; }
    if (Number((s / 60).toFixed(1)) < 60) { return (s / 60).toFixed(1) + " min"; }
    if (minutes < 600) { return Math.floor(minutes / 60) + " h " + minutes % 60 + " min"; }
    return (s / 3600).toFixed(Number((s / 3600).toFixed(1)) < 100 ? 1 : 0) + " h";
  }
  function fmt(ms) {
    if (ms === null || ms === undefined || isNaN(ms)) { return "-"; }
    if (Math.abs(ms) >= 99950) { return (ms < 0 ? "-" : "") + fmtLong(Math.abs(ms) / 1000); }
    var units = [[1e9, "s"], [1e6, "ms"], [1e3, "\u00b5s"], [1, "ns"]], ns = ms * 1e6;
    for (var i = 0; i < units.length; i++) {
      if (Math.abs(ns) >= units[i][0] || i === units.length - 1) {
        var v = ns / units[i][0], a = Math.abs(v);
        var text = v.toFixed(i === 3 || a >= 100 ? 0 : a >= 10 ? 1 : 2);
        if (i > 0 && Math.abs(Number(text)) >= 1000) { return fmt((v < 0 ? -1 : 1) * units[i - 1][0] / 1e6); }
        return text + " " + units[i][1];
      }
    }
  }
  // As core.units.plural and format_usd: "1 span", "3 spans"; "$0.0123".
  function plural(n, noun) { return num(n) + " " + (n === 1 ? noun : noun + "s"); }
  function usd(x) {
    if (x >= 1) { return "$" + x.toFixed(2); }
    return x > 0 && x < 0.00005 ? "<$0.0001" : "$" + x.toFixed(4);
  }
  function pct(x) { return (100 * x).toFixed(x < 0.1 ? 1 : 0) + "%"; }
  function num(x) { return x === null || x === undefined ? "-" : x.toLocaleString("en-US"); }

  function niceStep(range, target) {
    if (!(range > 0)) { return 1; }
    var raw = range / Math.max(1, target);
    var mag = Math.pow(10, Math.floor(Math.log(raw) / Math.LN10));
    var n = raw / mag;
    return (n < 1.5 ? 1 : n < 3 ? 2 : n < 7 ? 5 : 10) * mag;
  }
  // The one unit of a time axis, the one its steps fit: "0 s, 0.5 s, 1.0 s", never "1800 ms, 2.0 s".
  function timeUnit(step, max) { return step >= 500 || max >= 2000 && step >= 100 ? "s" : "ms"; }
  function tickLabel(v, step, unit) {
    if (unit === "share") { return Math.round(v * 100) + "%"; }
    if (unit === "count") { return String(Math.round(v)); }
    if (unit === "s") { return (v / 1000).toFixed(step >= 1000 ? 0 : step >= 100 ? 1 : 2) + " s"; }
    return v.toFixed(step >= 1 ? 0 : step >= 0.1 ? 1 : 2) + " ms";
  }
  // A horizontal value axis from x0 to x0 + width for values 0..max, with grid lines down to y1.
  function axis(parent, x0, width, max, y, y1, unit, title, top) {
    var g = svg("g", { "class": "axis" }, parent);
    var step = niceStep(max, width / 95);
    if (unit === "ms") { unit = timeUnit(step, max); }
    for (var v = 0; v <= max * 1.0001; v += step) {
      var x = x0 + (max > 0 ? v / max * width : 0);
      svg("line", { "class": "grid", x1: x, x2: x, y1: Math.min(y, y1), y2: Math.max(y, y1) }, g);
      svg("line", { "class": "tick", x1: x, x2: x, y1: y, y2: top ? y - 4 : y + 4 }, g);
      var t = svg("text", { x: x, y: top ? y - 7 : y + 15, "text-anchor": "middle" }, g);
      t.textContent = tickLabel(v, step, unit);
    }
    svg("line", { "class": "base", x1: x0, x2: x0 + width, y1: y, y2: y }, g);
    if (title) {
      var tt = svg("text", { "class": "axis-title", x: x0 + width, y: top ? y - 20 : y + 30, "text-anchor": "end" }, g);
      tt.textContent = title;
    }
    return g;
  }
  // ``text`` in the SVG text element ``el``, as much of it as fits ``px`` pixels in the page's own font:
  // measured, not guessed from a character count, so a box with room shows the whole name. False, with
  // the element emptied, where not even one character and the ellipsis fit.
  function fitText(el, text, px) {
    el.textContent = text;
    if (el.getComputedTextLength() <= px) { return true; }
    var lo = 0, hi = text.length - 1;
    while (lo < hi) {
      var mid = Math.ceil((lo + hi) / 2);
      el.textContent = text.slice(0, mid) + "\u2026";
      if (el.getComputedTextLength() <= px) { lo = mid; } else { hi = mid - 1; }
    }
    el.textContent = lo ? text.slice(0, lo) + "\u2026" : "";
    return lo > 0;
  }
  function cut(text, px) {
    var n = Math.floor(px / 6.3);
    if (n < 2) { return ""; }
    return text.length <= n ? text : text.slice(0, n - 1) + "\u2026";
  }
  function spanTitle(t, s) {
    var lines = [
      s[F.name],
      "category: " + s[F.category] + "   operation: " + s[F.operation],
      "start: +" + fmt(s[F.start_ms]) + "   duration: " + fmt(s[F.duration_ms]),
      "self time: " + fmt(s[F.self_ms]) + "   critical path: " + fmt(s[F.critical_path_ms]),
      s[F.on_critical_path] ? "on the critical path" : "off the critical path"
    ];
    if (s[F.model]) { lines.push("model: " + s[F.model]); }
    if (s[F.tokens]) { lines.push("tokens: " + num(s[F.tokens])); }
    var ph = s[F.llm_phases];
    if (ph) {
      lines.push("queue " + fmt(ph[0]) + " \u00b7 prefill " + fmt(ph[1]) + " \u00b7 decode " + fmt(ph[2]) +
        " \u00b7 other " + fmt(ph[3]) + " (the server's span)");
    }
    var ld = s[F.backend_load];
    if (ld) { lines.push("server load: " + loadWords(ld).join(" \u00b7 ")); }
    if (s[F.status] && s[F.status] !== "unset" && s[F.status] !== "ok") { lines.push("status: " + s[F.status]); }
    lines.push("span id: " + s[F.span_id]);
    return lines.join("\n");
  }
  // [running mean, waiting max, KV-cache max, prefix-cache hit rate, preemptions], nulls left out.
  function loadWords(ld) {
    var words = [];
    if (ld[0] !== null) { words.push(ld[0].toFixed(1) + " running"); }
    if (ld[1] !== null) { words.push("up to " + num(ld[1]) + " waiting"); }
    if (ld[2] !== null) { words.push("KV cache " + pct(ld[2])); }
    if (ld[3] !== null) { words.push("prefix-cache hits " + pct(ld[3])); }
    if (ld[4]) { words.push(plural(ld[4], "preemption")); }
    return words;
  }
  function spanRect(t, s, i, attrs, parent) {
    var cp = s[F.on_critical_path] ? " cp" : " off";
    attrs["class"] = "span" + cp;
    attrs.fill = color(s[F.category]);
    attrs["data-span-id"] = s[F.span_id];
    attrs["data-index"] = i;
    var r = svg("rect", attrs, parent);
    svg("title", null, r).textContent = spanTitle(t, s);
    return r;
  }

  var LABEL_W = 300, ROW = 17, AXIS_H = 34, TOP = 4;

  // The time axis of a chart in a scrolling box: its own SVG, which stays at the top of the box.
  function timeHeader(host, W, x0, plotW, total) {
    var head = svg("svg", { width: W, height: AXIS_H, "class": "sticky-axis" }, host);
    axis(head, x0, plotW, total, AXIS_H - 4, AXIS_H, "ms", "time since trace start", true);
  }
  function timeGrid(parent, x0, width, max, y0, y1) {
    var g = svg("g", { "class": "axis" }, parent), step = niceStep(max, width / 95);
    for (var v = 0; v <= max * 1.0001; v += step) {
      var x = x0 + (max > 0 ? v / max * width : 0);
      svg("line", { "class": "grid", x1: x, x2: x, y1: y0, y2: y1 }, g);
    }
  }

  function drawWaterfall(t) {
    var host = clear(byId("waterfall"));
    var spans = t.spans, n = spans.length;
    var W = Math.max(900, host.clientWidth - 4), plotW = W - LABEL_W - 24;
    var H = TOP + n * ROW + 8, total = t.duration_ms || 1;
    timeHeader(host, W, LABEL_W, plotW, total);
    if (t.load_track) { drawLoadTrack(t, host, W, plotW, total); }
    var root = svg("svg", { width: W, height: H, id: "waterfall-svg", role: "img" }, host);
    svg("title", null, root).textContent = "Waterfall of trace " + t.trace_id;
    var clip = svg("clipPath", { id: "wf-label-clip" }, svg("defs", null, root));
    svg("rect", { x: 0, y: 0, width: LABEL_W - 8, height: H }, clip);
    var stripes = svg("g", null, root);
    for (var k = 1; k < n; k += 2) {
      svg("rect", { "class": "row-stripe", x: 0, y: TOP + k * ROW, width: W, height: ROW }, stripes);
    }
    timeGrid(root, LABEL_W, plotW, total, 0, H);
    var labels = svg("g", { "clip-path": "url(#wf-label-clip)" }, root);
    var bars = svg("g", { id: "waterfall-bars" }, root);
    for (var i = 0; i < n; i++) {
      var s = spans[i], y = TOP + i * ROW;
      var lbl = svg("text", { "class": "label" + (s[F.on_critical_path] ? " cp" : ""),
        x: 6 + Math.min(s[F.depth], 16) * 11, y: y + ROW - 5 }, labels);
      lbl.textContent = s[F.name];
      var x = LABEL_W + s[F.start_ms] / total * plotW;
      var w = Math.max(1.5, s[F.duration_ms] / total * plotW);
      spanRect(t, s, i, { x: x, y: y + 2, width: w, height: ROW - 4, rx: 2 }, bars);
      if (s[F.llm_phases]) { drawPhases(t, s, i, x, y, w, bars); }
      var inside = x + w + 64 > W;
      var v = svg("text", { "class": inside ? "inbar" : "value", x: inside ? x + w - 4 : x + w + 4, y: y + ROW - 5,
        "text-anchor": inside ? "end" : "start" }, bars);
      var ld = s[F.backend_load];
      v.textContent = fmt(s[F.duration_ms]) + (ld && ld[1] >= 1 ? " \u00b7 " + num(ld[1]) + " waiting" : "");
    }
  }

  // Each polled server's running (line) and waiting (filled) requests, on the waterfall's time axis.
  var TRACK_H = 54;
  function drawLoadTrack(t, host, W, plotW, total) {
    t.load_track.forEach(function (track) {
      var pts = track.points, max = 1;
      pts.forEach(function (p) { max = Math.max(max, p[1] || 0, p[2] || 0); });
      var g = svg("svg", { width: W, height: TRACK_H, "class": "load-track", role: "img" }, host);
      svg("title", null, g).textContent = "Server load from " + track.source;
      svg("text", { "class": "label", x: 6, y: 15 }, g).textContent = "server load (0 to " + num(max) + ")";
      svg("text", { "class": "value", x: 6, y: 30 }, g).textContent = cut(track.source, LABEL_W - 14);
      var key = svg("text", { "class": "value", x: 6, y: 46 }, g);
      svg("tspan", { fill: "#7b5cf0" }, key).textContent = "\u2014 running   ";
      svg("tspan", { fill: "#d64545" }, key).textContent = "\u25a0 waiting requests";
      timeGrid(g, LABEL_W, plotW, total, 0, TRACK_H);
      var top = 6, h = TRACK_H - 12, base = top + h, end = LABEL_W + plotW;
      [[2, "waiting"], [1, "running"]].forEach(function (m) {
        var d = "", last = null;
        pts.forEach(function (p) {
          var v = p[m[0]];
          if (v === null || v === undefined) { return; }
          // A step: each sample's value holds until the next one.
          var x = LABEL_W + Math.max(0, Math.min(total, p[0])) / total * plotW, y = base - v / max * h;
          if (last === null) {
            d = m[1] === "waiting" ? "M" + x + "," + base + " L" + x + "," + y : "M" + x + "," + y;
          } else {
            d += " L" + x + "," + last + " L" + x + "," + y;
          }
          last = y;
        });
        if (last === null) { return; }
        d += " L" + end + "," + last + (m[1] === "waiting" ? " L" + end + "," + base + " Z" : "");
        svg("path", { "class": m[1], d: d }, g);
      });
    });
  }

  // An LLM call's queue, prefill, decode and other time, as a band inside its bar, in that order.
  var PHASES = ["queue", "prefill", "decode", "other"];
  function drawPhases(t, s, i, x, y, w, parent) {
    var ph = s[F.llm_phases], sum = ph[0] + ph[1] + ph[2] + ph[3], at = x;
    if (!(sum > 0)) { return; }
    var g = svg("g", { "class": "phases" + (s[F.on_critical_path] ? " cp" : " off"), "data-span-id": s[F.span_id] },
      parent);
    ph.forEach(function (ms, k) {
      var pw = ms / sum * w;
      if (pw <= 0) { return; }
      var r = svg("rect", { "class": "phase " + PHASES[k], x: at, y: y + 5, width: pw, height: ROW - 10,
        fill: DATA.phase_colors[k] }, g);
      svg("title", null, r).textContent = PHASES[k] + " " + fmt(ms) + "\n" + spanTitle(t, s);
      at += pw;
    });
  }

  function drawFlame(t) {
    var host = clear(byId("flame"));
    var spans = t.spans, n = spans.length, rows = t.flame_rows;
    var W = Math.max(900, host.clientWidth - 4), plotW = W - 40, x0 = 16;
    var H = TOP + rows * ROW + 10, total = t.duration_ms || 1;
    timeHeader(host, W, x0, plotW, total);
    var root = svg("svg", { width: W, height: H, id: "flame-svg", role: "img" }, host);
    svg("title", null, root).textContent = "Flame chart of trace " + t.trace_id;
    timeGrid(root, x0, plotW, total, 0, H);
    var g = svg("g", { id: "flame-bars" }, root);
    for (var i = 0; i < n; i++) {
      var s = spans[i];
      var x = x0 + s[F.start_ms] / total * plotW;
      var w = Math.max(1, s[F.duration_ms] / total * plotW);
      var y = TOP + s[F.flame_row] * ROW;
      spanRect(t, s, i, { x: x, y: y + 1, width: w, height: ROW - 2 }, g);
      if (w >= 14) {
        var label = svg("text", { "class": "inbar", x: x + 3, y: y + ROW - 5 }, g);
        if (!fitText(label, s[F.operation] || s[F.name], w - 6)) { g.removeChild(label); }
      }
    }
  }

  function drawCategories(t) {
    var host = clear(byId("category-chart"));
    var cats = DATA.categories.filter(function (c) { return t.categories[c][3] > 0; });
    var max = 0;
    cats.forEach(function (c) { max = Math.max(max, t.categories[c][0], t.categories[c][1]); });
    var LW = 120, W = Math.max(520, Math.min(1100, host.clientWidth - 4)), plotW = W - LW - 230, GROUP = 40;
    var H = 14 + cats.length * GROUP + 40;
    var root = svg("svg", { width: W, height: H, id: "category-svg", role: "img" }, host);
    svg("title", null, root).textContent = "Self time and critical path by category";
    axis(root, LW, plotW, max || 1, H - 36, 6, "ms", "self time (light) and critical-path time (dark)", false);
    cats.forEach(function (c, i) {
      var v = t.categories[c], y = 10 + i * GROUP;
      var lab = svg("text", { "class": "label", x: LW - 8, y: y + 19, "text-anchor": "end" }, root);
      lab.textContent = c + " (" + v[3] + ")";
      var w1 = max ? v[0] / max * plotW : 0, w2 = max ? v[1] / max * plotW : 0;
      var r1 = svg("rect", { "class": "cat-bar self", x: LW, y: y + 3, width: Math.max(w1, 0.5), height: 12,
        fill: color(c), opacity: 0.5, "data-category": c }, root);
      svg("title", null, r1).textContent = c + ": self time " + fmt(v[0]) + " over " + plural(v[3], "span");
      var r2 = svg("rect", { "class": "cat-bar critical", x: LW, y: y + 16, width: Math.max(w2, 0.5), height: 12,
        fill: color(c), "data-category": c }, root);
      svg("title", null, r2).textContent = c + ": critical path " + fmt(v[1]) + " (" + pct(v[2]) + " of it)";
      svg("text", { "class": "value", x: LW + w1 + 6, y: y + 13 }, root).textContent = "self " + fmt(v[0]);
      svg("text", { "class": "value", x: LW + w2 + 6, y: y + 26 }, root).textContent =
        "critical path " + fmt(v[1]) + " \u00b7 " + pct(v[2]);
      if (c === "llm" && t.llm_phases) { drawCriticalPhases(t, root, LW, y + 30, max, plotW); }
    });
  }

  // The llm category's critical-path time split into phases, a thin band under its bar.
  function drawCriticalPhases(t, root, x0, y, max, plotW) {
    var at = x0, words = [];
    t.llm_phases.forEach(function (ms, k) {
      var pw = max ? ms / max * plotW : 0;
      if (pw > 0) {
        var r = svg("rect", { "class": "phase " + PHASES[k], x: at, y: y, width: pw, height: 6,
          fill: DATA.phase_colors[k] }, root);
        svg("title", null, r).textContent = "llm on the critical path: " + PHASES[k] + " " + fmt(ms);
      }
      at += pw;
      words.push(PHASES[k] + " " + fmt(ms));
    });
    svg("text", { "class": "value", x: at + 6, y: y + 6, id: "llm-phases-note" }, root).textContent =
      words.join(" \u00b7 ");
  }

  function drawAnomalies(t, host) {
    if (!t.anomalies || !t.anomalies.length) { return; }
    var list = html("ul", "anomalies", null, host);
    t.anomalies.forEach(function (a) {
      var item = html("li", null, "Data problem: " + a[0].replace(/_/g, " ") + " ", list);
      var link = html("a", "span-link", a[1], item);
      link.href = "#span-" + a[1];
      link.setAttribute("data-span-id", a[1]);
      link.title = "show this span in the waterfall";
      link.addEventListener("click", function (e) { e.preventDefault(); highlight(item, [a[1]], true); });
      item.appendChild(document.createTextNode(": " + a[2]));
    });
    if (t.more_anomalies) { html("li", null, "and " + plural(t.more_anomalies, "more data problem") +
      " (see analyze --format json)", list); }
  }

  function drawFindings(t) {
    var host = clear(byId("findings"));
    if (t.estimated_timing) { html("p", "caveat", t.estimated_timing, host); }
    drawAnomalies(t, host);
    if (!t.findings.length) { html("p", "empty", "No findings for this trace.", host); return; }
    if (t.combined) { html("p", "combined", t.combined, host); }
    var table = html("table", null, null, host);
    var head = html("tr", null, null, html("thead", null, null, table));
    ["kind", "finding", "estimated saving", "share of the trace"].forEach(function (h, i) {
      html("th", i === 2 ? "num" : null, h, head);
    });
    var body = html("tbody", null, null, table);
    var maxSaving = t.duration_ms || 1;
    t.findings.forEach(function (f) {
      var tr = html("tr", "finding", null, body);
      if (f.span_ids.length) {
        tr.title = "click to outline its " + plural(f.span_ids.length, "span") + " in the waterfall and flame chart";
        tr.addEventListener("click", function () { highlight(tr, f.span_ids); });
      }
      html("span", "badge", f.kind.replace(/_/g, " "), html("td", null, null, tr));
      var text = html("td", null, null, tr);
      html("div", "finding-title", f.title, text);
      if (f.where && f.where.length) {
        var at = html("div", "where", "Where: ", text);
        // Six links at most, as the text report lists four: a click on the finding outlines them all.
        var shown = f.where.length > 7 ? f.where.slice(0, 6) : f.where;
        var hidden = f.where.length - shown.length;
        shown.forEach(function (w, i) {
          if (i) { at.appendChild(document.createTextNode(i === shown.length - 1 && !hidden ? " and " : ", ")); }
          var link = html("a", "span-link", w[0], at);
          link.href = "#span-" + w[1];
          link.setAttribute("data-span-id", w[1]);
          link.title = "show this span in the waterfall";
          link.addEventListener("click", function (e) {
            e.preventDefault(); e.stopPropagation(); highlight(tr, [w[1]], true);
          });
        });
        if (hidden) {
          var rest = " and " + plural(hidden, "more span") + " (click the finding to outline all)";
          at.appendChild(document.createTextNode(rest));
        }
      }
      if (f.suggestion) { html("div", "suggestion", "Suggestion: " + f.suggestion, text); }
      if (f.caveat) { html("div", "caveat", f.caveat, text); }
      html("td", "num", f.saving_ms > 0 ? fmt(f.saving_ms) : "-", tr);
      var cell = html("td", "barcell", null, tr);
      if (f.saving_ms > 0) {
        var b = html("span", "bar", null, cell);
        b.style.width = Math.max(2, 160 * f.saving_ms / maxSaving) + "px";
        b.title = pct(f.saving_ms / maxSaving) + " of the trace";
      }
    });
  }

  // Outline the spans of a finding (click again to clear) and scroll the waterfall to the first.
  function highlight(row, spanIds, force) {
    var on = force === true || !row.classList.contains("active");
    var active = document.querySelectorAll("#findings tr.active");
    for (var j = 0; j < active.length; j++) { active[j].classList.remove("active"); }
    var wanted = {};
    spanIds.forEach(function (id) { wanted[id] = true; });
    var rects = document.querySelectorAll("rect.span");
    var first = null;
    for (var i = 0; i < rects.length; i++) {
      var hit = on && wanted[rects[i].getAttribute("data-span-id")] === true;
      rects[i].classList.toggle("hl", hit);
      if (hit && !first && rects[i].parentNode.id === "waterfall-bars") { first = rects[i]; }
    }
    row.classList.toggle("active", on);
    // A span's link shows it: the page scrolls to its waterfall row (a click on a finding only outlines).
    if (first && force === true) { first.scrollIntoView({ block: "center" }); }
  }

  function drawFacts(t) {
    var host = clear(byId("trace-facts"));
    byId("trace-heading").textContent = "Trace " + t.trace_id + (t.root_name ? " \u2014 " + t.root_name : "");
    var facts = [
      [fmt(t.duration_ms), "duration"], [fmt(t.critical_path_ms), "critical path"],
      [num(t.span_count), t.span_count === 1 ? "span" : "spans"],
      [num(t.llm_calls), t.llm_calls === 1 ? "LLM call" : "LLM calls"],
      [num(t.tokens), t.tokens === 1 ? "token" : "tokens"]
    ];
    if (t.cost_usd !== null && t.cost_usd !== undefined) { facts.push([usd(t.cost_usd), "cost"]); }
    var best = t.largest_saving;
    facts.push(best ? [fmt(best.ms), "largest saving, " + best.assumes] : ["-", "largest saving"]);
    facts.forEach(function (f) {
      var d = html("div", "fact", null, host);
      html("b", null, f[0], d);
      html("span", null, f[1], d);
    });
  }

  function select(id) {
    var t = DATA.traces[id];
    if (!t) { return; }
    document.body.setAttribute("data-selected-trace", id);
    var rows = document.querySelectorAll("#trace-table tbody tr");
    for (var i = 0; i < rows.length; i++) {
      rows[i].classList.toggle("selected", rows[i].getAttribute("data-trace-id") === id);
    }
    drawFacts(t);
    drawCategories(t);
    drawFindings(t);
    drawWaterfall(t);
    drawFlame(t);
  }

  // ---- cross-run charts ------------------------------------------------------------------

  function decade(ms) {
    if (ms >= 1000) { return (ms / 1000) + " s"; }
    if (ms >= 1) { return ms + " ms"; }
    return Math.round(ms * 1000) + " \u00b5s";
  }
  // Percentile ranges on a log scale: per row a thin line min..max, a bar p50..p90, a tick at p99
  // and a dot at p50.
  function drawPercentiles(hostId, rows, labelOf, colorOf) {
    var host = clear(byId(hostId));
    if (!rows.length) { html("p", "empty", "No data.", host); return; }
    var LW = 220, W = Math.max(520, host.clientWidth - 4), plotW = W - LW - 130, RH = 24;
    var H = 12 + rows.length * RH + 40, lo = Infinity, hi = 0;
    rows.forEach(function (r) {
      hi = Math.max(hi, r.max);
      [r.min, r.p50].forEach(function (v) { if (v > 0) { lo = Math.min(lo, v); } });
    });
    if (!(hi > 0)) { hi = 1; }
    if (!(lo < Infinity)) { lo = hi / 10; }
    var a = Math.floor(Math.log(lo) / Math.LN10), b = Math.ceil(Math.log(hi) / Math.LN10);
    if (b <= a) { b = a + 1; }
    var sx = function (v) {
      var e = Math.log(Math.max(v, Math.pow(10, a))) / Math.LN10;
      return LW + (e - a) / (b - a) * plotW;
    };
    var root = svg("svg", { width: W, height: H, role: "img", "class": "percentiles" }, host);
    var g = svg("g", { "class": "axis" }, root), ya = H - 36;
    for (var e = a; e <= b; e++) {
      var x = sx(Math.pow(10, e));
      svg("line", { "class": "grid", x1: x, x2: x, y1: 6, y2: ya }, g);
      svg("line", { "class": "tick", x1: x, x2: x, y1: ya, y2: ya + 4 }, g);
      svg("text", { x: x, y: ya + 15, "text-anchor": "middle" }, g).textContent =
        decade(Number(Math.pow(10, e).toPrecision(1)));
    }
    svg("line", { "class": "base", x1: LW, x2: LW + plotW, y1: ya, y2: ya }, g);
    svg("text", { "class": "axis-title", x: LW + plotW, y: ya + 30, "text-anchor": "end" }, g).textContent =
      "span duration (log scale)";
    rows.forEach(function (r, i) {
      var y = 12 + i * RH + RH / 2;
      var row = svg("g", { "class": "pct-row" }, root);
      svg("title", null, row).textContent = labelOf(r) + "\n" + plural(r.count, "span") + "\nmin " + fmt(r.min) +
        " \u00b7 median " + fmt(r.p50) + " \u00b7 p90 " + fmt(r.p90) + " \u00b7 p99 " + fmt(r.p99) +
        " \u00b7 max " + fmt(r.max);
      svg("text", { "class": "label", x: LW - 8, y: y + 4, "text-anchor": "end" }, row).textContent =
        cut(labelOf(r), LW - 10);
      svg("line", { x1: sx(r.min), x2: sx(r.max), y1: y, y2: y, stroke: "#aab2bf" }, row);
      svg("rect", { x: sx(r.p50), y: y - 6, width: Math.max(2, sx(r.p90) - sx(r.p50)), height: 12,
        fill: colorOf(r), rx: 2 }, row);
      svg("line", { x1: sx(r.p99), x2: sx(r.p99), y1: y - 7, y2: y + 7, stroke: "#333", "stroke-width": 1.5 }, row);
      svg("circle", { cx: sx(r.p50), cy: y, r: 3.5, fill: "#fff", stroke: "#333" }, row);
      svg("text", { "class": "value", x: sx(r.max) + 6, y: y + 4 }, row).textContent =
        "median " + fmt(r.p50) + " \u00b7 " + plural(r.count, "span");
    });
  }

  function drawConcurrency(rows) {
    var host = clear(byId("concurrency-chart"));
    if (!rows.length) { html("p", "empty", "No LLM or tool calls.", host); return; }
    var W = Math.max(420, host.clientWidth - 4), H = 260, x0 = 56, plotW = W - x0 - 16, plotH = H - 70;
    var root = svg("svg", { width: W, height: H, role: "img", id: "concurrency-svg" }, host);
    var max = 0;
    rows.forEach(function (r) { max = Math.max(max, r.fraction); });
    max = Math.min(1, max * 1.1) || 1;
    var step = niceStep(max, 5), g = svg("g", { "class": "axis" }, root);
    for (var v = 0; v <= max * 1.0001; v += step) {
      var y = 14 + plotH - v / max * plotH;
      svg("line", { "class": "grid", x1: x0, x2: x0 + plotW, y1: y, y2: y }, g);
      svg("text", { x: x0 - 6, y: y + 4, "text-anchor": "end" }, g).textContent = Math.round(v * 100) + "%";
    }
    svg("line", { "class": "base", x1: x0, x2: x0 + plotW, y1: 14 + plotH, y2: 14 + plotH }, g);
    var bw = plotW / rows.length, labelEvery = Math.max(1, Math.ceil(22 / bw));
    rows.forEach(function (r, i) {
      var h = r.fraction / max * plotH, x = x0 + i * bw;
      var rect = svg("rect", { x: x + bw * 0.15, y: 14 + plotH - h, width: bw * 0.7, height: Math.max(h, 0.5),
        fill: r.level === 0 ? "#c9ced8" : "#3a86ff", rx: 2 }, root);
      svg("title", null, rect).textContent = r.level + " calls at once: " + pct(r.fraction) + " of the time (" +
        fmt(r.time_ms) + ")";
      if (i % labelEvery === 0) {
        svg("text", { "class": "value", x: x + bw / 2, y: 14 + plotH + 15, "text-anchor": "middle" }, root)
          .textContent = String(r.level);
      }
    });
    svg("text", { "class": "axis-title", x: x0 + plotW, y: H - 12, "text-anchor": "end" }, root).textContent =
      "LLM and tool calls running at once (share of the runs' time)";
  }

  function stepChips(text, parent) {
    text.split(" \u2192 ").forEach(function (step, i) {
      if (i) { parent.appendChild(document.createTextNode(" \u2192 ")); }
      var cat = step.split(":")[0];
      var chip = html("span", "step", step, parent);
      chip.style.background = color(cat);
    });
  }

  function drawSequences(hostId, rows, what, none) {
    var host = clear(byId(hostId));
    if (!rows.length) { html("p", "empty", none, host); return; }
    var table = html("table", null, null, host);
    var head = html("tr", null, null, html("thead", null, null, table));
    [what, "runs", "share of runs", "median duration"].forEach(function (h, i) {
      html("th", i ? "num" : null, h, head);
    });
    var body = html("tbody", null, null, table);
    rows.forEach(function (r) {
      var tr = html("tr", null, null, body);
      stepChips(r.sequence, html("td", "seq", null, tr));
      html("td", "num", num(r.count), tr);
      html("td", "num", pct(r.share), tr);
      html("td", "num", fmt(r.p50_duration_ms), tr);
    });
  }

  function drawStatistics(st) {
    drawPercentiles("category-percentiles", st.categories, function (r) { return r.category; },
      function (r) { return color(r.category); });
    drawPercentiles("operation-percentiles", st.operations, function (r) { return r.category + ": " + r.operation; },
      function (r) { return color(r.category); });
    drawConcurrency(st.concurrency);
    drawSequences("sequence-table", st.sequences, "whole-run sequence (repeats collapsed)",
      "No run took the same sequence of calls as another.");
    drawSequences("ngram-table", st.ngrams, "frequent 3-step pattern", "No call sequences.");
  }

  function init() {
    var rows = document.querySelectorAll("#trace-table tbody tr");
    for (var i = 0; i < rows.length; i++) {
      rows[i].addEventListener("click", function (ev) {
        var id = ev.currentTarget.getAttribute("data-trace-id");
        if (DATA.traces[id]) {
          select(id);
          history.replaceState(null, "", "#trace=" + id);
          byId("trace-view").scrollIntoView({ behavior: "smooth" });
        }
      });
    }
    var wanted = /^#trace=([0-9a-f]+)$/.exec(location.hash || "");
    select(wanted && DATA.traces[wanted[1]] ? wanted[1] : DATA.selected);
    if (DATA.statistics) { drawStatistics(DATA.statistics); }
    document.body.setAttribute("data-ready", "true");
  }
  init();
})();
"""
