// Hand-written SVG charts. Each chart is drawn at the pixel width of its
// container (redrawn when that changes), so text stays readable at phone
// width instead of being scaled down with a viewBox. Every chart is an
// image with a text alternative, and time series also offer their data as a
// table.
import { h, s, clear, fmtNum, fmtPct } from './ui.js';

function responsive(container, draw) {
  let last = 0;
  const paint = () => {
    const w = Math.max(260, Math.floor(container.clientWidth || 640));
    if (w === last) return;
    last = w;
    clear(container).append(draw(w));
  };
  new ResizeObserver(paint).observe(container);
  paint();
}

/** niceMax rounds a maximum up to 1, 2, 2.5 or 5 times a power of ten. */
export function niceMax(v, integer = true) {
  if (!(v > 0)) return integer ? 4 : 1;
  const e = 10 ** Math.floor(Math.log10(v));
  const f = v / e;
  const n = f <= 1 ? 1 : f <= 2 ? 2 : f <= 2.5 ? 2.5 : f <= 5 ? 5 : 10;
  const m = n * e;
  return integer && m < 4 ? 4 : m;
}

function shortNum(v) {
  if (Math.abs(v) >= 1e6) return `${+(v / 1e6).toFixed(1)}M`;
  if (Math.abs(v) >= 1e4) return `${+(v / 1e3).toFixed(1)}k`;
  return fmtNum(v);
}

/** bucketLabel formats a bucket start for an axis, by interval. */
export function bucketLabel(iso, interval, long = false) {
  const d = new Date(iso);
  switch (interval) {
    case 'minute':
    case 'hour':
      return long
        ? d.toLocaleString(undefined, { month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit' })
        : d.toLocaleTimeString(undefined, { hour: '2-digit', minute: '2-digit' });
    case 'month':
      return d.toLocaleDateString(undefined, { month: 'short', year: 'numeric', timeZone: 'UTC' });
    default:
      return d.toLocaleDateString(undefined, { month: 'short', day: 'numeric', timeZone: 'UTC' });
  }
}

/**
 * timeChart draws a timeseries answer ({data:[{timestamp, value}], interval})
 * as an area chart. label names the measure ("events", "visitors").
 */
export function timeChart(series, { label = 'events', title = 'Events over time' } = {}) {
  const pts = series.data || [];
  const wrap = h('figure.chart', { 'data-chart': 'timeseries', 'data-total': String(series.total ?? '') });
  const plot = h('div');
  wrap.append(plot);
  const max = Math.max(0, ...pts.map((p) => p.value));
  const peak = pts.find((p) => p.value === max);
  const summary = pts.length
    ? `${title}: ${fmtNum(series.total)} ${label} in ${pts.length} buckets of one ${series.interval}; highest ${fmtNum(max)}${peak ? ` at ${bucketLabel(peak.timestamp, series.interval, true)}` : ''}.`
    : `${title}: no data.`;
  responsive(plot, (w) => {
    const H = w < 480 ? 180 : 230;
    const m = { l: 44, r: 12, t: 10, b: 28 };
    const iw = w - m.l - m.r;
    const ih = H - m.t - m.b;
    const ymax = niceMax(max);
    const x = (i) => m.l + (pts.length <= 1 ? iw / 2 : (i * iw) / (pts.length - 1));
    const y = (v) => m.t + ih - (v / ymax) * ih;
    const svg = s('svg', { width: w, height: H, role: 'img', 'aria-label': summary });
    svg.append(s('title', {}, summary));
    for (let i = 0; i <= 4; i++) {
      const v = (ymax * i) / 4;
      svg.append(s('line', { class: 'grid-line', x1: m.l, x2: w - m.r, y1: y(v), y2: y(v) }));
      svg.append(s('text', { x: m.l - 6, y: y(v) + 4, 'text-anchor': 'end' }, shortNum(v)));
    }
    svg.append(s('line', { class: 'axis', x1: m.l, x2: w - m.r, y1: m.t + ih, y2: m.t + ih }));
    if (pts.length) {
      const line = pts.map((p, i) => `${i ? 'L' : 'M'}${x(i).toFixed(1)},${y(p.value).toFixed(1)}`).join('');
      svg.append(s('path', { class: 'series-area', d: `${line}L${x(pts.length - 1).toFixed(1)},${m.t + ih}L${x(0).toFixed(1)},${m.t + ih}Z` }));
      svg.append(s('path', { class: 'series-line', d: line }));
      // Evenly spaced labels, the first and the last bucket always among them.
      const ticks = Math.max(2, Math.min(pts.length, Math.floor(iw / 80)));
      const shown = new Set();
      for (let k = 0; k < ticks; k++) shown.add(Math.round((k * (pts.length - 1)) / Math.max(1, ticks - 1)));
      for (const i of shown) {
        const anchor = pts.length === 1 ? 'middle' : i === 0 ? 'start' : i === pts.length - 1 ? 'end' : 'middle';
        svg.append(s('text', { x: x(i), y: H - 8, 'text-anchor': anchor }, bucketLabel(pts[i].timestamp, series.interval)));
      }
      // A hover target per bucket, each with its own tooltip.
      const colW = pts.length > 1 ? iw / (pts.length - 1) : iw;
      pts.forEach((p, i) => {
        if (pts.length <= 48) svg.append(s('circle', { class: 'series-dot', cx: x(i), cy: y(p.value), r: 2.5 }));
        svg.append(s('rect', { x: x(i) - colW / 2, y: m.t, width: colW, height: ih, fill: 'transparent' },
          s('title', {}, `${bucketLabel(p.timestamp, series.interval, true)}: ${fmtNum(p.value)} ${label}`)));
      });
    }
    return svg;
  });
  const rows = pts.filter((p) => p.value !== 0);
  wrap.append(h('details',
    h('summary', 'Data table'),
    rows.length
      ? h('div.table-wrap', h('table', h('caption', `${title} (buckets with data)`),
        h('thead', h('tr', h('th', { scope: 'col' }, 'Bucket'), h('th.num', { scope: 'col' }, label))),
        h('tbody', rows.map((p) => h('tr', h('td', bucketLabel(p.timestamp, series.interval, true)), h('td.num', fmtNum(p.value)))))))
      : h('p.empty', 'No data in this range.')));
  return wrap;
}

/** barChart draws rows [{label, value, title?}] as horizontal bars, largest first as given. */
export function barChart(rows, { label = 'Values', format = fmtNum, empty = 'No data in this range.' } = {}) {
  const wrap = h('figure.chart', { 'data-chart': 'bars' });
  if (!rows.length) {
    wrap.append(h('p.empty', empty));
    return wrap;
  }
  const summary = `${label}: ${rows.map((r) => `${r.label} ${format(r.value)}`).join(', ')}.`;
  const plot = h('div');
  wrap.append(plot);
  responsive(plot, (w) => {
    const rowH = 28;
    const labelW = Math.min(Math.max(90, w * 0.35), 220);
    const valueW = 64;
    const H = rows.length * rowH + 4;
    const max = Math.max(...rows.map((r) => r.value), 0) || 1;
    const bw = w - labelW - valueW - 8;
    const svg = s('svg', { width: w, height: H, role: 'img', 'aria-label': summary });
    svg.append(s('title', {}, summary));
    rows.forEach((r, i) => {
      const y0 = i * rowH + 2;
      const text = String(r.label);
      const shown = text.length * 7 > labelW - 8 ? `${text.slice(0, Math.max(3, Math.floor((labelW - 8) / 7) - 1))}…` : text;
      svg.append(s('text', { class: 'bar-label', x: 0, y: y0 + 17 }, shown, s('title', {}, text)));
      svg.append(s('rect', { class: 'bar-bg', x: labelW, y: y0 + 4, width: bw, height: rowH - 10, rx: 3 }));
      svg.append(s('rect', { class: 'bar', x: labelW, y: y0 + 4, width: Math.max(1, (r.value / max) * bw), height: rowH - 10, rx: 3 },
        s('title', {}, r.title || `${text}: ${format(r.value)}`)));
      svg.append(s('text', { class: 'value-label', x: w - 2, y: y0 + 17, 'text-anchor': 'end' }, format(r.value)));
    });
    return svg;
  });
  return wrap;
}

/** funnelChart draws funnel steps [{event, visitors, conversion_rate}]. */
export function funnelChart(steps) {
  const wrap = h('figure.chart', { 'data-chart': 'funnel' });
  if (!steps.length) {
    wrap.append(h('p.empty', 'No steps.'));
    return wrap;
  }
  const summary = `Funnel: ${steps.map((st) => `${st.event} ${fmtNum(st.visitors)} visitors (${fmtPct(st.conversion_rate)})`).join(', then ')}.`;
  const plot = h('div');
  wrap.append(plot);
  responsive(plot, (w) => {
    const rowH = 46;
    const H = steps.length * rowH;
    const first = steps[0].visitors || 1;
    const svg = s('svg', { width: w, height: H, role: 'img', 'aria-label': summary });
    svg.append(s('title', {}, summary));
    steps.forEach((st, i) => {
      const y0 = i * rowH;
      const frac = st.visitors / first;
      const bw = Math.max(2, frac * w);
      svg.append(s('text', { class: 'bar-label', x: 0, y: y0 + 14 },
        `${i + 1}. ${st.event}: ${fmtNum(st.visitors)} visitors, ${fmtPct(st.conversion_rate)}`));
      svg.append(s('rect', { class: 'bar-bg', x: 0, y: y0 + 20, width: w, height: 18, rx: 3 }));
      svg.append(s('rect', { class: 'funnel-bar', x: 0, y: y0 + 20, width: bw, height: 18, rx: 3 }));
      if (i > 0 && steps[i - 1].visitors > 0) {
        const kept = st.visitors / steps[i - 1].visitors;
        svg.append(s('text', { class: 'value-label', x: w - 2, y: y0 + 14, 'text-anchor': 'end' }, `${fmtPct(kept)} of step ${i}`));
      }
    });
    return svg;
  });
  return wrap;
}

/**
 * meterChart draws usage against limits: rows [{label, used, limit,
 * thresholds:[percent]}]; bars turn amber at 80% and red at 100%, and
 * alert thresholds are marked.
 */
export function meterChart(rows, { label = 'Usage' } = {}) {
  const wrap = h('figure.chart', { 'data-chart': 'meters' });
  const summary = `${label}: ${rows.map((r) => `${r.label} ${fmtNum(r.used)} of ${fmtNum(r.limit)}`).join(', ')}.`;
  const plot = h('div');
  wrap.append(plot);
  responsive(plot, (w) => {
    const rowH = 40;
    const H = rows.length * rowH;
    const svg = s('svg', { width: w, height: H, role: 'img', 'aria-label': summary });
    svg.append(s('title', {}, summary));
    rows.forEach((r, i) => {
      const y0 = i * rowH;
      const frac = r.limit > 0 ? r.used / r.limit : 0;
      const cls = frac >= 1 ? 'bar over' : frac >= 0.8 ? 'bar warn' : 'bar';
      svg.append(s('text', { class: 'bar-label', x: 0, y: y0 + 13 }, r.label));
      svg.append(s('text', { class: 'value-label', x: w - 2, y: y0 + 13, 'text-anchor': 'end' },
        `${fmtNum(r.used)} / ${fmtNum(r.limit)} (${fmtPct(frac)})`));
      svg.append(s('rect', { class: 'bar-bg', x: 0, y: y0 + 19, width: w, height: 12, rx: 3 }));
      svg.append(s('rect', { class: cls, x: 0, y: y0 + 19, width: Math.max(frac > 0 ? 2 : 0, Math.min(1, frac) * w), height: 12, rx: 3 },
        s('title', {}, `${r.label}: ${fmtNum(r.used)} of ${fmtNum(r.limit)}`)));
      for (const t of r.thresholds || []) {
        const tx = Math.min(w - 1, (t / 100) * w);
        svg.append(s('line', { class: 'threshold', x1: tx, x2: tx, y1: y0 + 16, y2: y0 + 34 }, s('title', {}, `Alert at ${t}%`)));
      }
    });
    return svg;
  });
  return wrap;
}
