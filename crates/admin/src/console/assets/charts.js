// The console's charts, drawn as SVG by hand: a line chart of rates over time (the cluster
// page's live send and pull rates) and a bar chart (a consumer group's lag per queue).
"use strict";

const SVG_NS = "http://www.w3.org/2000/svg";

function svgEl(name, attrs, text) {
  const e = document.createElementNS(SVG_NS, name);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
  if (text !== undefined) e.textContent = text;
  return e;
}

// A rounded-up axis maximum: 1, 2 or 5 times a power of ten, at least `min`.
function niceMax(v, min) {
  const x = Math.max(v, min);
  const p = Math.pow(10, Math.floor(Math.log10(x)));
  for (const m of [1, 2, 5, 10]) if (m * p >= x) return m * p;
  return 10 * p;
}

function fmtNum(v) {
  if (v >= 1e6) return (v / 1e6).toFixed(1) + "M";
  if (v >= 1e3) return (v / 1e3).toFixed(1) + "k";
  return Number.isInteger(v) ? String(v) : v.toFixed(1);
}

// Draws `series` ([{name, color, points: [[timeMs, value]]}]) over the last `spanMs` into
// `container`, replacing what was there.
function drawLineChart(container, series, spanMs) {
  const W = 720, H = 220, L = 48, R = 12, T = 12, B = 28;
  const now = Date.now();
  const all = series.flatMap((s) => s.points.map((p) => p[1]));
  const top = niceMax(all.length ? Math.max(...all) : 0, 1);
  const x = (t) => L + ((t - (now - spanMs)) / spanMs) * (W - L - R);
  const y = (v) => H - B - (v / top) * (H - T - B);
  const svg = svgEl("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": "rates" });
  for (let i = 0; i <= 4; i++) {
    const v = (top * i) / 4;
    svg.append(svgEl("line", { class: "grid", x1: L, x2: W - R, y1: y(v), y2: y(v) }));
    svg.append(svgEl("text", { x: L - 6, y: y(v) + 4, "text-anchor": "end" }, fmtNum(v)));
  }
  svg.append(svgEl("line", { class: "axis", x1: L, x2: L, y1: T, y2: H - B }));
  svg.append(svgEl("line", { class: "axis", x1: L, x2: W - R, y1: H - B, y2: H - B }));
  svg.append(svgEl("text", { x: L, y: H - 8 }, `-${Math.round(spanMs / 1000)} s`));
  svg.append(svgEl("text", { x: W - R, y: H - 8, "text-anchor": "end" }, "now"));
  for (const s of series) {
    const pts = s.points.filter((p) => p[0] >= now - spanMs);
    if (pts.length === 0) continue;
    const d = pts.map((p) => `${x(p[0]).toFixed(1)},${y(p[1]).toFixed(1)}`).join(" ");
    svg.append(svgEl("polyline", { points: d, fill: "none", stroke: s.color, "stroke-width": 2 }));
    const last = pts[pts.length - 1];
    svg.append(svgEl("circle", { cx: x(last[0]), cy: y(last[1]), r: 3, fill: s.color }));
  }
  container.replaceChildren(svg);
}

// Draws one bar per item ([{label, value}]) into `container`, replacing what was there.
function drawBarChart(container, items, color) {
  const W = 720, L = 48, R = 12, T = 12, B = 46;
  const H = 220;
  const top = niceMax(items.length ? Math.max(...items.map((i) => i.value)) : 0, 1);
  const y = (v) => H - B - (v / top) * (H - T - B);
  const svg = svgEl("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": "bars" });
  for (let i = 0; i <= 4; i++) {
    const v = (top * i) / 4;
    svg.append(svgEl("line", { class: "grid", x1: L, x2: W - R, y1: y(v), y2: y(v) }));
    svg.append(svgEl("text", { x: L - 6, y: y(v) + 4, "text-anchor": "end" }, fmtNum(v)));
  }
  const slot = (W - L - R) / Math.max(items.length, 1);
  const bw = Math.max(Math.min(slot * 0.7, 48), 2);
  items.forEach((it, i) => {
    const cx = L + slot * i + slot / 2;
    const bar = svgEl("rect", {
      class: "bar", x: cx - bw / 2, y: y(it.value), width: bw,
      height: Math.max(H - B - y(it.value), 0), fill: color,
    });
    bar.append(svgEl("title", {}, `${it.label}: ${it.value}`));
    svg.append(bar);
    if (items.length <= 24) {
      svg.append(svgEl("text", { x: cx, y: H - B + 14, "text-anchor": "middle" }, it.label));
    }
  });
  svg.append(svgEl("line", { class: "axis", x1: L, x2: W - R, y1: H - B, y2: H - B }));
  container.replaceChildren(svg);
}
