#!/usr/bin/env node
// A preview of the Grafana dashboard (scripts/monitoring/grafana/dashboards/healthbridge.json) drawn from a real
// Prometheus: asks it for every panel's queries over the dashboard's time range, lays the panels out as Grafana
// would (dashboard-page.mjs) and screenshots the page with Debian's Chromium. Grafana itself is not used: it has no
// package this machine can install. test/metrics.test.ts runs it against the Prometheus it starts.
//
//   node scripts/monitoring/render-dashboard.mjs [PROMETHEUS_URL] OUT.png [--minutes N] [--dashboard FILE] [--width PX]
//
// The Prometheus URL defaults to $PROMETHEUS_URL; the range to the dashboard's own (`time.from`, e.g. now-1h).
// Writes OUT.png and OUT.html (the page, self-contained) and prints one line of JSON: the files and, per panel,
// how many series it drew or the error Prometheus gave; exits 1 if a query failed or Prometheus is not there.

import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { chromium } from 'playwright-core';
import { CHROMIUM_LAUNCH, ensureChromium } from '../stack/chromium.mjs';
import { dashboardPage } from './dashboard-page.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
export const DASHBOARD_FILE = path.join(here, 'grafana', 'dashboards', 'healthbridge.json');
/** Grafana's default scrape interval of a Prometheus data source, for $__rate_interval. */
const SCRAPE_SECONDS = 15;

/** Seconds in a Grafana relative time such as `now-1h` (s, m, h, d). */
function relativeSeconds(from) {
  const m = /^now-(\d+)([smhd])$/.exec(from ?? '');
  return m ? Number(m[1]) * { s: 1, m: 60, h: 3600, d: 86400 }[m[2]] : 3600;
}

/** `expr` with the Grafana variables it may use replaced as Grafana would for this range and step. */
export function substituteVariables(expr, { from, to, step }, templating = []) {
  const values = {
    __interval: `${step}s`,
    __rate_interval: `${Math.max(step + SCRAPE_SECONDS, 4 * SCRAPE_SECONDS)}s`,
    __range: `${to - from}s`,
    __range_s: String(to - from),
    ...Object.fromEntries(templating.filter((v) => v.type !== 'datasource').map((v) => [v.name, [v.current?.value ?? v.options?.[0]?.value ?? v.query ?? ''].flat().join('|')])),
  };
  return expr.replace(/\$\{(\w+)(?::\w+)?\}|\[\[(\w+)\]\]|\$(\w+)/g, (all, a, b, c) => values[a ?? b ?? c] ?? all);
}

/** A series' legend name: the target's legendFormat with {{label}} filled in, else the series' labels. */
function legendName(metric, legendFormat) {
  if (legendFormat && legendFormat !== '__auto') return legendFormat.replace(/\{\{\s*(\w+)\s*\}\}/g, (_, label) => metric[label] ?? '');
  const { __name__: name = '', ...labels } = metric;
  const pairs = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  return pairs.length ? `${name}{${pairs.join(', ')}}` : name || '{}';
}

/** Each panel's series (finite points only) from Prometheus' query_range, keyed by panel id; or { error }. */
export async function queryPanels(prometheusUrl, dashboard, range) {
  const panels = dashboard.panels.filter((p) => p.type !== 'row');
  const results = new Map();
  await Promise.all(
    panels.map(async (panel) => {
      const series = [];
      for (const target of (panel.targets ?? []).filter((t) => t.expr && !t.hide)) {
        const params = new URLSearchParams({ query: substituteVariables(target.expr, range, dashboard.templating?.list), start: String(range.from), end: String(range.to), step: String(range.step) });
        const res = await fetch(`${prometheusUrl}/api/v1/query_range?${params}`).catch((err) => ({ ok: false, json: async () => ({ error: err.message }) }));
        const body = await res.json().catch(() => ({ error: `HTTP ${res.status}` }));
        if (body.status !== 'success') return results.set(panel.id, { error: body.error ?? `HTTP ${res.status}` });
        for (const { metric, values } of body.data.result) {
          const points = values.map(([t, v]) => [t, Number(v)]).filter(([, v]) => Number.isFinite(v));
          series.push({ name: legendName(metric, target.legendFormat), points });
        }
      }
      results.set(panel.id, { series });
    }),
  );
  return results;
}

/**
 * Draws `dashboardFile` from the Prometheus at `prometheusUrl` over the last `minutes` (default: the dashboard's
 * range) into `out` (PNG) and the page beside it (.html). Returns { png, html, panels: [{ title, series, error? }] }.
 */
export async function renderDashboard({ prometheusUrl, out, minutes, dashboardFile = DASHBOARD_FILE, width = 1600, log = console.error }) {
  const dashboard = JSON.parse(fs.readFileSync(dashboardFile, 'utf8'));
  prometheusUrl = prometheusUrl.replace(/\/$/, '');
  const ready = await fetch(`${prometheusUrl}/-/ready`, { signal: AbortSignal.timeout(5000) }).then((r) => r.ok, () => false);
  if (!ready) throw new Error(`render-dashboard: no ready Prometheus at ${prometheusUrl} (GET /-/ready)`);
  const to = Math.floor(Date.now() / 1000);
  const seconds = minutes ? Math.round(minutes * 60) : relativeSeconds(dashboard.time?.from);
  // About one point per 4 px of a half-width panel, as Grafana's interval would give, never under a second.
  const range = { from: to - seconds, to, step: Math.max(1, Math.ceil(seconds / 200)) };
  const results = await queryPanels(prometheusUrl, dashboard, range);
  const html = dashboardPage({ dashboard, results, range, width, source: prometheusUrl });
  const htmlFile = out.replace(/\.png$/, '') + '.html';
  fs.mkdirSync(path.dirname(path.resolve(out)), { recursive: true });
  fs.writeFileSync(htmlFile, html);
  const { bin } = await ensureChromium({ log });
  const browser = await chromium.launch({ executablePath: bin, args: CHROMIUM_LAUNCH.args });
  try {
    const page = await browser.newPage({ viewport: { width: width + 32, height: 900 } });
    await page.setContent(html);
    await page.screenshot({ path: out, fullPage: true });
  } finally {
    await browser.close();
  }
  const panels = dashboard.panels
    .filter((p) => p.type !== 'row')
    .map((p) => {
      const r = results.get(p.id);
      return { title: p.title, series: r.series?.filter((s) => s.points.length).length ?? 0, ...(r.error ? { error: r.error } : {}) };
    });
  return { png: out, html: htmlFile, panels };
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const { values, positionals } = parseArgs({ allowPositionals: true, options: { minutes: { type: 'string' }, dashboard: { type: 'string' }, width: { type: 'string' } } });
  const [prometheusUrl, out] = positionals.length >= 2 ? positionals : [process.env.PROMETHEUS_URL, positionals[0]];
  if (!prometheusUrl || !out?.endsWith('.png')) {
    console.error('usage: node scripts/monitoring/render-dashboard.mjs [PROMETHEUS_URL] OUT.png [--minutes N] [--dashboard FILE] [--width PX]\n(the Prometheus URL defaults to $PROMETHEUS_URL)');
    process.exit(2);
  }
  const summary = await renderDashboard({
    prometheusUrl,
    out,
    minutes: values.minutes ? Number(values.minutes) : undefined,
    dashboardFile: values.dashboard ?? DASHBOARD_FILE,
    width: values.width ? Number(values.width) : undefined,
  }).catch((err) => {
    console.error(err.message);
    process.exit(1);
  });
  console.log(JSON.stringify(summary));
  // The page shows a failed query in its panel; the exit status says so too.
  const failed = summary.panels.filter((p) => p.error);
  for (const p of failed) console.error(`render-dashboard: ${p.title}: ${p.error}`);
  process.exitCode = failed.length ? 1 : 0;
}
