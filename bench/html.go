package bench

import (
	"encoding/json"
	"html"
	"io"
	"strings"
)

// WriteHTML writes bench-report.html: one self-contained file (no external
// requests: no fonts, scripts or styles from elsewhere) with the results
// embedded as JSON and drawn as inline SVG by an inline script, so it can be
// mailed around or attached to an issue.
func WriteHTML(w io.Writer, rep *Report) error {
	// json.Marshal escapes <, > and & (as \u003c...), so the data cannot end
	// the script element early.
	data, err := json.Marshal(rep)
	if err != nil {
		return err
	}
	title := "eventd bench " + rep.StartedAt.Format("2006-01-02 15:04 UTC")
	var b strings.Builder
	b.WriteString("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n")
	b.WriteString("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n")
	b.WriteString("<title>" + html.EscapeString(title) + "</title>\n<style>" + reportCSS + "</style></head>\n<body>\n")
	b.WriteString("<h1>" + html.EscapeString(title) + "</h1>\n<div id=\"app\"><p>This report draws its charts with JavaScript.</p></div>\n")
	b.WriteString("<script id=\"data\" type=\"application/json\">")
	b.Write(data)
	b.WriteString("</script>\n<script>" + reportJS + "</script>\n</body></html>\n")
	_, err = io.WriteString(w, b.String())
	return err
}

const reportCSS = `
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px auto;max-width:1180px;color:#1d2330;padding:0 16px}
h1{font-size:22px;margin:0 0 4px} h2{font-size:18px;margin:32px 0 4px;border-top:1px solid #dde;padding-top:16px}
h3{font-size:14px;margin:12px 0 4px;color:#445}
table{border-collapse:collapse;margin:8px 0;font-variant-numeric:tabular-nums}
td,th{padding:3px 10px;border-bottom:1px solid #eef;text-align:right;white-space:nowrap} th{background:#f4f5fa}
td:first-child,th:first-child{text-align:left}
td.wrap{white-space:normal;max-width:190px;text-align:left}
.met{color:#176f2c;font-weight:600} .missed{color:#b3261e;font-weight:600}
.muted{color:#667} .charts{display:flex;flex-wrap:wrap;gap:16px}
.chart{border:1px solid #e3e5ee;border-radius:6px;padding:6px;background:#fff}
.legend span{display:inline-block;margin-right:12px} .legend i{display:inline-block;width:12px;height:3px;margin-right:4px;vertical-align:middle}
ul{margin:4px 0 4px 18px;padding:0} code{background:#f3f3f7;padding:0 3px;border-radius:3px}
svg text{font:11px system-ui,sans-serif;fill:#445}
`

const reportJS = `
"use strict";
const D = JSON.parse(document.getElementById("data").textContent);
const COLORS = ["#2457d6","#d2691e","#2e8b57","#8a2be2","#c71585","#008b8b","#b8860b","#555"];
const el = (tag, attrs, ...kids) => {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  for (const k of kids) e.append(k instanceof Node ? k : document.createTextNode(String(k)));
  return e;
};
const NS = "http://www.w3.org/2000/svg";
const sv = (tag, attrs) => { const e = document.createElementNS(NS, tag); for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v); return e; };
const fmtInt = v => Math.round(v).toLocaleString("en-US");
const fmtRate = (v, unit) => fmtInt(v) + " " + (unit || "");
const fmtUs = us => us <= 0 ? "0" : us < 1000 ? us.toPrecision(3) + "µs" : us < 1e6 ? (us / 1000).toPrecision(3) + "ms" : (us / 1e6).toPrecision(3) + "s";
const fmtBytes = b => { const u = ["B","KiB","MiB","GiB"]; let i = 0; while (b >= 1024 && i < 3) { b /= 1024; i++; } return b.toFixed(i ? 1 : 0) + " " + u[i]; };

// ticks gives about n round values (1, 2 or 5 × 10^k apart) within [a, b].
function ticks(a, b, n) {
  const raw = (b - a) / n, mag = Math.pow(10, Math.floor(Math.log10(raw)));
  const step = [1, 2, 5, 10].map(m => m * mag).find(st => st >= raw) || raw;
  const out = [];
  for (let v = Math.ceil(a / step) * step; v <= b + 1e-9 * step; v += step) out.push(Math.abs(v) < 1e-9 * step ? 0 : v);
  return out;
}
// chart draws lines (and dots) on linear or log-x axes into an SVG element.
function chart(opt) {
  const W = opt.width || 540, H = opt.height || 260, L = 64, R = 12, T = 10, B = 38;
  const s = sv("svg", {width: W, height: H, viewBox: "0 0 " + W + " " + H, role: "img"});
  const pts = opt.series.flatMap(x => x.points);
  if (!pts.length) { const t = sv("text", {x: W / 2, y: H / 2, "text-anchor": "middle"}); t.textContent = "no data"; s.append(t); return s; }
  const fx = opt.xlog ? Math.log10 : (v => v);
  let x0 = Math.min(...pts.map(p => fx(p[0]))), x1 = Math.max(...pts.map(p => fx(p[0])));
  if (opt.xlog) { x0 = Math.floor(x0); x1 = Math.ceil(x1); }
  if (x1 === x0) x1 = x0 + 1;
  let y1 = Math.max(...pts.map(p => p[1])) * 1.08 || 1, y0 = opt.yzero === false ? Math.min(...pts.map(p => p[1])) * 0.95 : 0;
  if (y1 === y0) y1 = y0 + 1;
  const X = v => L + (fx(v) - x0) / (x1 - x0) * (W - L - R), Y = v => H - B - (v - y0) / (y1 - y0) * (H - T - B);
  s.append(sv("rect", {x: L, y: T, width: W - L - R, height: H - T - B, fill: "#fafbfe", stroke: "#dde"}));
  const label = (x, y, txt, anchor) => { const t = sv("text", {x, y, "text-anchor": anchor || "middle"}); t.textContent = txt; s.append(t); };
  const M = opt.ybytes ? 1048576 : 1;
  for (const v of ticks(y0 / M, y1 / M, 5).map(t => t * M)) {
    const y = Y(v);
    s.append(sv("line", {x1: L, x2: W - R, y1: y, y2: y, stroke: "#e6e8f0"}));
    label(L - 4, y + 4, opt.yfmt(v), "end");
  }
  if (opt.xlog) {
    for (let d = x0; d <= x1; d++) { const x = X(Math.pow(10, d)); s.append(sv("line", {x1: x, x2: x, y1: T, y2: H - B, stroke: "#e6e8f0"})); label(x, H - B + 14, opt.xfmt(Math.pow(10, d))); }
  } else {
    for (const v of ticks(x0, x1, 6)) { const x = X(v); s.append(sv("line", {x1: x, x2: x, y1: T, y2: H - B, stroke: "#e6e8f0"})); label(x, H - B + 14, opt.xfmt(v)); }
  }
  label(L + (W - L - R) / 2, H - 6, opt.xlabel || "");
  const yl = sv("text", {x: 12, y: T + (H - T - B) / 2, "text-anchor": "middle", transform: "rotate(-90 12 " + (T + (H - T - B) / 2) + ")"}); yl.textContent = opt.ylabel || ""; s.append(yl);
  opt.series.forEach((ser, i) => {
    const c = ser.color || COLORS[i % COLORS.length];
    for (const seg of (ser.segments || [ser.points])) {
      if (!seg.length) continue;
      const d = seg.map((p, j) => (j ? "L" : "M") + X(p[0]).toFixed(1) + " " + Y(p[1]).toFixed(1)).join(" ");
      s.append(sv("path", {d, fill: "none", stroke: c, "stroke-width": 1.8, "stroke-dasharray": ser.dash || ""}));
      if (opt.dots) for (const p of seg) s.append(sv("circle", {cx: X(p[0]), cy: Y(p[1]), r: 2, fill: c}));
    }
  });
  return s;
}
function legend(series) {
  return el("div", {class: "legend"}, ...series.map((s, i) => { const sp = el("span", {}); const sw = el("i", {}); sw.style.background = s.color || COLORS[i % COLORS.length]; sp.append(sw, s.name); return sp; }));
}
function box(title, series, opt) { const d = el("div", {class: "chart"}, el("h3", {}, title), legend(series)); d.append(chart(Object.assign({series}, opt))); return d; }

// histogram re-bins log-linear buckets into 10 bins a decade, as % of samples.
function histPoints(buckets) {
  const total = buckets.reduce((a, b) => a + b.count, 0);
  if (!total) return [];
  const bins = new Map();
  for (const b of buckets) {
    const mid = Math.max((b.low_ns + b.high_ns) / 2, 1) / 1000; // µs
    const k = Math.floor(Math.log10(Math.max(mid, 0.1)) * 10);
    bins.set(k, (bins.get(k) || 0) + b.count);
  }
  const keys = [...bins.keys()].sort((a, b) => a - b);
  const out = [];
  for (let k = keys[0] - 1; k <= keys[keys.length - 1] + 1; k++) out.push([Math.pow(10, (k + 0.5) / 10), 100 * (bins.get(k) || 0) / total]);
  return out;
}
function throughputSegments(series, unit) {
  const segs = [];
  for (const r of series.rounds || []) {
    const full = Math.floor(r.elapsed_s + 1e-9);
    const seg = [];
    for (const p of r.per_second || []) {
      if (p.second >= full) continue;
      seg.push([r.start_s + p.second + 0.5, unit === "events/s" ? p.events : p.ok]);
    }
    segs.push(seg);
  }
  return segs;
}
function allSeries(sc) {
  const out = [];
  if (sc.eventd) out.push(sc.eventd);
  for (const c of sc.ceilings || []) out.push(c);
  for (const o of sc.others || []) out.push(o);
  return out;
}
function summaryTable() {
  const t = el("table", {}, el("tr", {}, ...["scenario","eventd","ceiling","","ratio","p50","p99","p99.9","targets"].map(h => el("th", {}, h))));
  for (const sc of D.scenarios) {
    const e = sc.eventd, rows = Math.max(1, (sc.ceilings || []).length);
    const met = (sc.targets || []).filter(x => x.met).length, all = (sc.targets || []).length;
    for (let i = 0; i < rows; i++) {
      const c = (sc.ceilings || [])[i], first = i === 0 && e;
      const vals = [i ? "" : sc.name, first ? fmtRate(e.rate, sc.unit) : "", c ? fmtRate(c.rate, c.unit || sc.unit) : "", c ? "(" + c.name + ")" : "",
        c ? c.ratio.toFixed(2) : "", first ? fmtUs(e.latency.p50_us) : "", first ? fmtUs(e.latency.p99_us) : "", first ? fmtUs(e.latency.p99_9_us) : "", ""];
      const tr = el("tr", {}, ...vals.map(v => el("td", {}, v)));
      if (i === 0 && all) { const td = tr.lastChild; td.textContent = met + "/" + all + " met"; td.className = met === all ? "met" : "missed"; }
      t.append(tr);
    }
    for (const o of sc.others || []) t.append(el("tr", {}, ...["  " + o.name, fmtRate(o.rate, sc.unit), "", "", "", fmtUs(o.latency.p50_us), fmtUs(o.latency.p99_us), fmtUs(o.latency.p99_9_us), ""].map(v => el("td", {}, v))));
  }
  return t;
}
function scenarioSection(sc) {
  const sec = el("section", {}, el("h2", {}, sc.name), el("div", {class: "muted"}, sc.description + " — load average " + sc.load_avg_1m[0].toFixed(2) + " → " + sc.load_avg_1m[1].toFixed(2)));
  if ((sc.targets || []).length) sec.append(el("ul", {}, ...sc.targets.map(t => el("li", {}, el("span", {class: t.met ? "met" : "missed"}, t.met ? "met" : "MISSED"), " " + t.name + ": " + t.got + " (goal " + t.goal + ")"))));
  if ((sc.notes || []).length) sec.append(el("ul", {}, ...sc.notes.map(n => el("li", {}, n))));
  const ser = allSeries(sc);
  const t = el("table", {}, el("tr", {}, ...["series","mode","conns","rate","min–max","p50","p90","p99","p99.9","max","ok / requests","server CPU","generator CPU"].map(h => el("th", {}, h))));
  for (const s of ser) t.append(el("tr", {}, ...[s.name, s.mode, s.conns, fmtRate(s.rate, sc.unit), fmtInt(s.rate_min) + "–" + fmtInt(s.rate_max), fmtUs(s.latency.p50_us), fmtUs(s.latency.p90_us), fmtUs(s.latency.p99_us), fmtUs(s.latency.p99_9_us), fmtUs(s.latency.max_us), fmtInt(s.ok) + " / " + fmtInt(s.requests),
    s.server_cpu_cores ? s.server_cpu_cores.toFixed(2) + " cores, " + fmtUs(s.server_cpu_us_per_ok) + "/ok" + (s.server_runqueue_wait_s_per_s ? ", waited " + s.server_runqueue_wait_s_per_s.toFixed(2) + " s/s for a CPU" : "") : "",
    s.client_cpu_cores ? s.client_cpu_cores.toFixed(2) + " cores" : ""].map((v, i) => el("td", i >= 11 ? {class: "wrap"} : {}, v))));
  for (const s of ser) for (const c of s.classes || []) t.append(el("tr", {}, ...["  " + s.name + " · " + c.name, "", "", "", "", fmtUs(c.latency.p50_us), fmtUs(c.latency.p90_us), fmtUs(c.latency.p99_us), fmtUs(c.latency.p99_9_us), fmtUs(c.latency.max_us), fmtInt(c.ok) + " / " + fmtInt(c.requests)].map(v => el("td", {}, v))));
  sec.append(t);
  const charts = el("div", {class: "charts"});
  const hs = ser.map(s => ({name: s.name, points: histPoints(s.latency_histogram || [])}));
  for (const s of ser) if (s.stream && (s.stream.delivery_histogram || []).length) hs.push({name: s.name + " · delivery", dash: "5 3", points: histPoints(s.stream.delivery_histogram)});
  charts.append(box("Latency histogram (from intended send time)", hs, {xlog: true, xfmt: fmtUs, yfmt: v => v.toFixed(1) + "%", xlabel: "latency", ylabel: "% of requests"}));
  const ts = ser.map(s => ({name: s.name, segments: throughputSegments(s, sc.unit), points: throughputSegments(s, sc.unit).flat()}));
  charts.append(box("Throughput over time (" + sc.unit + ", rounds alternate)", ts, {dots: true, xfmt: v => (Math.round(v * 10) / 10) + "s", yfmt: v => fmtInt(v), xlabel: "seconds since the bench started", ylabel: sc.unit}));
  const mem = (D.server_memory || []).filter(m => m.t_s >= sc.start_s && m.t_s <= sc.end_s);
  if (mem.length > 1) charts.append(box("Server RSS during the scenario", [{name: "RSS", points: mem.map(m => [m.t_s, m.rss_bytes])}], {dots: true, yzero: false, xfmt: v => (Math.round(v * 10) / 10) + "s", yfmt: fmtBytes, ybytes: true, xlabel: "seconds since the bench started", ylabel: "bytes"}));
  sec.append(charts);
  if ((sc.profiles || []).length) sec.append(el("div", {class: "muted"}, "profiles: " + sc.profiles.join(", ")));
  return sec;
}
function soakSection(sk) {
  const sec = el("section", {}, el("h2", {}, "soak: memory over " + (sk.duration_s / 60).toFixed(1) + " min"),
    el("div", {class: "muted"}, sk.workload), el("p", {}, el("span", {class: sk.trend.flat ? "met" : "missed"}, sk.trend.flat ? "flat" : "NOT FLAT"), " — " + sk.trend.verdict +
      "; RSS " + fmtBytes(sk.trend.start_rss_bytes) + " → " + fmtBytes(sk.trend.end_rss_bytes) + " (peak " + fmtBytes(sk.trend.peak_rss_bytes) + "), slope " + fmtBytes(sk.trend.rss_slope_bytes_per_min) + "/min; load " + fmtRate(sk.load.rate, "req/s")));
  const ms = [{name: "RSS", points: sk.samples.map(m => [m.t_s, m.rss_bytes])}];
  if (sk.samples.some(m => m.heap_inuse_bytes)) ms.push({name: "Go heap in use", points: sk.samples.filter(m => m.heap_inuse_bytes).map(m => [m.t_s, m.heap_inuse_bytes])});
  const charts = el("div", {class: "charts"});
  charts.append(box("Server memory", ms, {dots: true, xfmt: v => (Math.round(v * 10) / 10) + "s", yfmt: fmtBytes, ybytes: true, xlabel: "seconds", ylabel: "bytes"}));
  charts.append(box("Throughput", [{name: "eventd", segments: throughputSegments(sk.load, "req/s"), points: throughputSegments(sk.load, "req/s").flat()}], {xfmt: v => (Math.round(v * 10) / 10) + "s", yfmt: fmtInt, xlabel: "seconds since the bench started", ylabel: "req/s"}));
  sec.append(charts);
  return sec;
}
function main() {
  const app = document.getElementById("app"); app.textContent = "";
  const m = D.machine;
  app.append(el("p", {class: "muted"}, m.cpus + " CPUs (" + (m.cpu_model || m.arch) + "), " + m.os + "/" + m.arch + ", " + m.go_version + ", host " + m.hostname +
    "; load average " + D.load_avg_start.map(v => v.toFixed(2)).join(" ") + " at the start, " + D.load_avg_end.map(v => v.toFixed(2)).join(" ") + " at the end; " + (D.elapsed_s / 60).toFixed(1) + " min in all."));
  app.append(el("p", {class: "muted"}, "config: " + Object.entries(D.config || {}).map(([k, v]) => k + "=" + JSON.stringify(v)).join(", ")));
  if (D.scenarios && D.scenarios.length) app.append(summaryTable());
  if ((D.not_done || []).length) app.append(el("p", {}, "Not measured: " + D.not_done.join("; ")));
  for (const sc of D.scenarios || []) app.append(scenarioSection(sc));
  if (D.soak) app.append(soakSection(D.soak));
}
main();
`
