// The HTML page of scripts/monitoring/render-dashboard.mjs: a Grafana dashboard's panels, laid out by their gridPos,
// drawn as static inline SVG from the series Prometheus returned (no script, no CDN), for a screenshot.
// It imitates the look of Grafana's timeseries and stat panels; it is not Grafana's renderer.

/** Grafana's grid: 24 columns, 30 px rows with 8 px between panels. */
const ROW_PX = 30;
const GAP_PX = 8;
const HEADER_PX = 30;
const LEGEND_ROW_PX = 18;
const MAX_LEGEND_ROWS = 3;
/** Width of one character of the 12 px legend and axis text, to pack legends without measuring text in a browser. */
const CHAR_PX = 6.8;
/** Grafana's classic palette, in its order. */
const PALETTE = ['#7EB26D', '#EAB839', '#6ED0E0', '#EF843C', '#E24D42', '#1F78C1', '#BA43A9', '#705DA0', '#508642', '#CCA300', '#447EBC', '#C15C17'];

const escape = (s) => String(s).replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]);

/** A value with the panel's unit, as Grafana writes it (the units this dashboard uses; others print as numbers). */
export function formatValue(value, unit, decimals) {
  const fixed = (v, d = decimals) => {
    const digits = d ?? (Math.abs(v) >= 100 || Number.isInteger(v) ? 0 : Math.abs(v) >= 10 ? 1 : 2);
    return Number(v.toFixed(digits)).toString();
  };
  const scaled = (v, base, suffixes) => {
    let i = 0;
    while (Math.abs(v) >= base && i < suffixes.length - 1) (v /= base), i++;
    return `${fixed(v)}${suffixes[i]}`;
  };
  if (!Number.isFinite(value)) return String(value);
  switch (unit) {
    case 's':
      if (value === 0) return '0 s';
      if (Math.abs(value) < 1e-3) return `${fixed(value * 1e6)} µs`;
      if (Math.abs(value) < 1) return `${fixed(value * 1e3)} ms`;
      if (Math.abs(value) < 60) return `${fixed(value)} s`;
      return `${fixed(value / 60)} min`;
    case 'bytes':
      return scaled(value, 1024, [' B', ' KiB', ' MiB', ' GiB', ' TiB']);
    case 'reqps':
      return `${scaled(value, 1000, ['', ' K', ' M'])} req/s`;
    case 'ops':
      return `${scaled(value, 1000, ['', ' K', ' M'])} ops/s`;
    case 'percentunit':
      return `${fixed(value * 100)}%`;
    default:
      return scaled(value, 1000, ['', ' K', ' Mil', ' Bil']);
  }
}

/** Round steps (1, 2, 5 × 10^n) from `min` to `max`, about `count` of them; an empty range becomes [min, min + 1]. */
export function niceTicks(min, max, count = 4) {
  if (!(max > min)) max = min + (Math.abs(min) || 1);
  const raw = (max - min) / count;
  const magnitude = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * magnitude).find((s) => s >= raw);
  const low = Math.floor(min / step) * step;
  const high = Math.ceil(max / step) * step;
  const ticks = [];
  for (let v = low; v <= high + step / 2; v += step) ticks.push(Number(v.toPrecision(12)));
  return { ticks, low, high, decimals: Math.max(0, -Math.floor(Math.log10(step))) };
}

/** Time ticks at a round interval, about six across [from, to] (seconds). */
function timeTicks(from, to) {
  const intervals = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400];
  const step = intervals.find((i) => (to - from) / i <= 7) ?? 86400;
  const ticks = [];
  for (let t = Math.ceil(from / step) * step; t <= to; t += step) ticks.push(t);
  const clock = (t) => new Date(t * 1000).toLocaleTimeString('en-GB', { hour12: false, ...(step < 60 ? {} : { second: undefined, hour: '2-digit', minute: '2-digit' }) });
  return ticks.map((t) => ({ t, label: clock(t) }));
}

/** The legend's lines: names packed into rows of `width` px, at most MAX_LEGEND_ROWS, the rest counted. */
function packLegend(series, width) {
  const rows = [[]];
  let used = 0;
  let shown = 0;
  for (const s of series) {
    const w = 26 + s.name.length * CHAR_PX;
    if (used + w > width && rows.at(-1).length) {
      if (rows.length === MAX_LEGEND_ROWS) break;
      rows.push([]);
      used = 0;
    }
    rows.at(-1).push(s);
    used += w;
    shown++;
  }
  return { rows, hidden: series.length - shown };
}

/** One timeseries panel's chart: axes, grid and a line per series (split where the series has no points). */
function timeseriesSvg(series, { width, height, from, to, unit }) {
  const values = series.flatMap((s) => s.points.map(([, v]) => v));
  // Bytes step by round numbers of their binary unit (100 MiB, not 95.4 MiB).
  const scale = unit === 'bytes' ? 1024 ** Math.max(0, Math.floor(Math.log(Math.max(...values.map(Math.abs), 1)) / Math.log(1024))) : 1;
  const nice = niceTicks(Math.min(0, ...values) / scale, Math.max(...values) / scale);
  const [ticks, low, high, { decimals }] = [nice.ticks.map((v) => v * scale), nice.low * scale, nice.high * scale, nice];
  const labels = ticks.map((v) => formatValue(v, unit, unit === 's' || unit === 'bytes' ? undefined : decimals));
  const left = 10 + Math.max(...labels.map((l) => l.length)) * CHAR_PX;
  const plot = { x: left, y: 8, w: width - left - 12, h: height - 8 - 22 };
  const x = (t) => plot.x + ((t - from) / (to - from)) * plot.w;
  const y = (v) => plot.y + plot.h - ((v - low) / (high - low)) * plot.h;
  const parts = [];
  ticks.forEach((v, i) => {
    parts.push(`<line x1="${plot.x}" x2="${plot.x + plot.w}" y1="${y(v)}" y2="${y(v)}" class="grid"/>`);
    parts.push(`<text x="${plot.x - 6}" y="${y(v) + 4}" text-anchor="end">${escape(labels[i])}</text>`);
  });
  // Not under the y axis' labels.
  for (const { t, label } of timeTicks(from, to).filter(({ t }) => x(t) - plot.x > 24)) {
    parts.push(`<line x1="${x(t)}" x2="${x(t)}" y1="${plot.y}" y2="${plot.y + plot.h}" class="grid"/>`);
    parts.push(`<text x="${x(t)}" y="${plot.y + plot.h + 16}" text-anchor="middle">${escape(label)}</text>`);
  }
  for (const s of series) {
    for (const segment of s.segments) {
      if (segment.length === 1) {
        const [[t, v]] = segment;
        parts.push(`<circle cx="${x(t)}" cy="${y(v)}" r="2" fill="${s.color}"/>`);
      } else {
        const d = segment.map(([t, v]) => `${x(t).toFixed(1)},${y(v).toFixed(1)}`).join(' ');
        parts.push(`<polyline points="${d}" fill="none" stroke="${s.color}" stroke-width="1.5"/>`);
      }
    }
  }
  return `<svg width="${width}" height="${height}" viewBox="0 0 ${width} ${height}">${parts.join('')}</svg>`;
}

/** Points split where a step or more is missing (a rate before two scrapes, a NaN quantile), as Grafana leaves gaps. */
function segmentsOf(points, step) {
  const segments = [];
  let last = -Infinity;
  for (const [t, v] of points) {
    if (t - last > step * 1.5) segments.push([]);
    segments.at(-1).push([t, v]);
    last = t;
  }
  return segments;
}

function panelBody(panel, result, box, range) {
  if (result.error) return `<div class="message error">Query error: ${escape(result.error)}</div>`;
  const series = result.series.filter((s) => s.points.length).map((s, i) => ({ ...s, color: PALETTE[i % PALETTE.length], segments: segmentsOf(s.points, range.step) }));
  if (!series.length) return '<div class="message">No data</div>';
  const unit = panel.fieldConfig?.defaults?.unit;
  if (panel.type === 'stat' || panel.type === 'gauge') {
    const cells = series.map((s) => `<div class="stat" style="color:${s.color}"><b>${escape(formatValue(s.points.at(-1)[1], unit))}</b><span>${escape(s.name)}</span></div>`);
    return `<div class="stats">${cells.join('')}</div>`;
  }
  const legend = packLegend(series, box.width - 16);
  const chart = timeseriesSvg(series, { width: box.width - 8, height: box.height - HEADER_PX - legend.rows.length * LEGEND_ROW_PX - 6, ...range, unit });
  const item = (s) => `<span class="key"><i style="background:${s.color}"></i>${escape(s.name)}</span>`;
  const rows = legend.rows.map((row, i) => {
    const more = i === legend.rows.length - 1 && legend.hidden ? `<span class="key more">+${legend.hidden} more</span>` : '';
    return `<div class="legend-row">${row.map(item).join('')}${more}</div>`;
  });
  return `${chart}<div class="legend">${rows.join('')}</div>`;
}

/**
 * The page: `dashboard` (Grafana's JSON) with `results` (per panel id: { series: [{ name, points: [[t, v]] }] } or
 * { error }) over `range` ({ from, to, step } in seconds), `width` px wide; `source` says where the data came from.
 */
export function dashboardPage({ dashboard, results, range, width, source }) {
  const column = width / 24;
  // The panels of a collapsed row stay hidden, as in Grafana (they sit in the row's own `panels`).
  const { panels } = dashboard;
  const boxes = panels.map((p) => {
    const { x, y, w, h } = p.gridPos;
    const box = { left: x * column + GAP_PX / 2, top: y * (ROW_PX + GAP_PX), width: w * column - GAP_PX, height: h * ROW_PX + (h - 1) * GAP_PX };
    if (p.type === 'row') return `<div class="row" style="left:${box.left}px;top:${box.top}px;width:${box.width}px">${escape(p.title)}</div>`;
    const unit = p.fieldConfig?.defaults?.unit;
    const title = `${escape(p.title)}${unit && unit !== 'none' ? ` <small>${escape(unit)}</small>` : ''}`;
    return `<div class="panel" style="left:${box.left}px;top:${box.top}px;width:${box.width}px;height:${box.height}px"><h2>${title}</h2>${panelBody(p, results.get(p.id) ?? { series: [] }, box, range)}</div>`;
  });
  const bottom = Math.max(...panels.map((p) => (p.gridPos.y + p.gridPos.h) * (ROW_PX + GAP_PX)));
  const when = (t) => new Date(t * 1000).toLocaleString('en-GB', { hour12: false, timeZoneName: 'short' });
  const note = `Preview of the Grafana dashboard's panels, drawn by scripts/monitoring/render-dashboard.mjs from a real Prometheus (${escape(source)}), not by Grafana's renderer.`;
  return `<!doctype html>
<html><head><meta charset="utf-8"><title>${escape(dashboard.title)}: dashboard preview (not Grafana)</title>
<style>
  body { margin: 0; padding: 12px 16px 16px; background: #111217; color: #ccccdc; font: 12px/1.3 "DejaVu Sans", Arial, sans-serif; width: ${width}px; }
  header h1 { font-size: 18px; font-weight: 500; margin: 0 0 4px; color: #d8d9da; }
  header p, footer { margin: 0 0 12px; color: #8e8e9e; }
  .grid-area { position: relative; height: ${bottom}px; }
  .row { position: absolute; height: ${ROW_PX}px; line-height: ${ROW_PX}px; font-size: 15px; font-weight: 500; color: #d8d9da; border-bottom: 1px solid #2c3235; }
  .panel { position: absolute; box-sizing: border-box; background: #181b1f; border: 1px solid #2c3235; border-radius: 2px; overflow: hidden; }
  .panel h2 { margin: 0; height: ${HEADER_PX}px; line-height: ${HEADER_PX}px; padding: 0 8px; font-size: 13px; font-weight: 500; color: #d8d9da; white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }
  .panel h2 small { color: #8e8e9e; font-weight: 400; margin-left: 4px; }
  .panel svg { display: block; margin-left: 4px; font-size: 11px; }
  .panel svg text { fill: #9fa7b3; }
  .panel svg .grid { stroke: #2c3235; stroke-width: 1; }
  .legend { padding: 0 8px; }
  .legend-row { height: ${LEGEND_ROW_PX}px; white-space: nowrap; overflow: hidden; }
  .key { display: inline-block; margin-right: 14px; color: #ccccdc; }
  .key i { display: inline-block; width: 14px; height: 4px; border-radius: 2px; margin-right: 5px; vertical-align: middle; }
  .key.more { color: #8e8e9e; }
  .message { position: absolute; top: ${HEADER_PX}px; bottom: 0; left: 0; right: 0; display: flex; align-items: center; justify-content: center; color: #8e8e9e; font-size: 14px; }
  .message.error { color: #f2495c; padding: 0 12px; text-align: center; }
  .stats { display: flex; gap: 16px; justify-content: center; align-items: center; height: calc(100% - ${HEADER_PX}px); }
  .stat { text-align: center; } .stat b { display: block; font-size: 32px; font-weight: 500; } .stat span { color: #9fa7b3; }
</style></head>
<body>
<header><h1>${escape(dashboard.title)}</h1><p>${note} ${escape(when(range.from))} to ${escape(when(range.to))}, one point every ${range.step} s.</p></header>
<div class="grid-area">
${boxes.join('\n')}
</div>
<footer>${note}</footer>
</body></html>
`;
}
