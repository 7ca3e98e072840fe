// Output of `npm run bench`: the figures table, ratio lines against their targets, machine info, and
// the JSON results file.
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

const fmt = (x, digits) => (x === null || x === undefined ? '-' : x.toFixed(digits));

function table(headers, rows, alignRight) {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (cells) => cells.map((c, i) => (alignRight[i] ? c.padStart(widths[i]) : c.padEnd(widths[i]))).join(' | ');
  return [line(headers), widths.map((w) => '-'.repeat(w)).join('-|-'), ...rows.map(line)].join('\n');
}

/**
 * { name, value, target, mark } for each ratio of rps (null value when a side has no successful request), or its own
 * `ratio` when the two were measured in turns (load.mjs measureInRounds: the median of the rounds' ratios).
 * A spec may instead carry its own `value` (an absolute figure against its target, e.g. events/s or a p99
 * in ms; `atMost: true` when lower is better, `unit` for display, `kind: 'target'` or `'info'`).
 */
export function computeRatios(ratios) {
  return ratios.map(({ name, of, to, target, note, atMost, unit, kind, ...rest }) => {
    const own = 'value' in rest;
    // `ratio`: the two measured in turns (measureInRounds), the median of their rounds' ratios.
    const value = own ? rest.value : 'ratio' in rest ? rest.ratio : of.rps > 0 && to.rps > 0 ? Math.round((of.rps / to.rps) * 1000) / 1000 : null;
    const met = value !== null && (atMost ? value <= target : value >= target);
    const mark = target === null ? 'info' : value === null ? 'n/a' : met ? 'PASS' : 'BELOW';
    return {
      name,
      value,
      target,
      mark,
      ...(own ? { kind: kind ?? 'target', ...(atMost ? { atMost: true } : {}), ...(unit ? { unit } : {}) } : {}),
      ...(note ? { note } : {}),
    };
  });
}

function webhookTable(results) {
  const rows = results.map((r) => [
    r.name + (r.complete ? '' : ' (INCOMPLETE)'),
    `${r.delivered}/${r.expectedDeliveries}`,
    fmt(r.seconds, 1),
    fmt(r.eventsPerSec, 0),
    fmt(r.deliveriesPerSec, 0),
    fmt(r.p50Ms, 0),
    fmt(r.p99Ms, 0),
    fmt(r.maxMs, 0),
    String(r.duplicates),
    String(r.errors),
  ]);
  return table(['webhook scenario', 'delivered', 's', 'events/s', 'deliv/s', 'p50 ms', 'p99 ms', 'max ms', 'dups', 'errors'], rows, [
    false,
    true,
    true,
    true,
    true,
    true,
    true,
    true,
    true,
    true,
  ]);
}

function ratioLine(r, nameWidth) {
  if (r.kind) {
    // Ratios (no unit) to two places: 0.46 against a target of 0.5 must not print as 0.5.
    const value = r.value === null ? '  n/a' : `${Number.isInteger(r.value) ? r.value : r.value.toFixed(r.unit ? 1 : 2)}${r.unit ?? ''}`.padStart(9);
    if (r.target === null) return `info  ${r.name.padEnd(nameWidth)}  ${value}  (${r.note ?? 'secondary'})`;
    return `target ${r.name.padEnd(nameWidth - 1)}  ${value}  (target ${r.atMost ? '<=' : '>='} ${r.target}${r.unit ?? ''})  ${r.mark}`;
  }
  const value = r.value === null ? '  n/a' : r.value.toFixed(2).padStart(5);
  const target = r.target === null ? `(secondary${r.note ? `: ${r.note}` : ''})` : `(target >= ${r.target})`;
  return `ratio ${r.name.padEnd(nameWidth)}  ${value}  ${target}${r.target === null ? '' : `  ${r.mark}`}`;
}

export function formatReport({ results, ratios, machine, dbKind, config, notes = [] }) {
  const plain = results.filter((r) => r.kind !== 'webhook');
  const webhook = results.filter((r) => r.kind === 'webhook');
  const out = [''];
  if (plain.length) {
    const rows = plain.map((r) => [r.name, fmt(r.rps, 1), fmt(r.p50Ms, 2), fmt(r.p99Ms, 2), String(r.errors)]);
    out.push(table(['scenario', 'req/s', 'p50 ms', 'p99 ms', 'errors'], rows, [false, true, true, true, true]), '');
  }
  if (webhook.length) out.push(webhookTable(webhook), '');
  const nameWidth = Math.max(0, ...ratios.map((r) => r.name.length));
  for (const r of ratios) out.push(ratioLine(r, nameWidth));
  out.push(
    '',
    `machine: ${machine.cpus} cpus (${machine.cpuModel}), ${machine.memoryGb} GB, ${machine.platform}` +
      (machine.plainPostsPerSecond ? `; plain POSTs to a constant Koa route: ${Math.round(machine.plainPostsPerSecond)}/s` : ''),
    `node ${machine.node}; database ${dbKind}`,
    ...(plain.length ? [`load: ${config.concurrency} concurrent, ${config.warmupSeconds} s warm-up + ${config.seconds} s per scenario`] : []),
    `load average ${machine.loadAverage.join(' ')} before, ${machine.loadAverageAfter.join(' ')} after`,
    ...notes,
  );
  return out.join('\n');
}

/** How far two runs' figures may differ and still agree (issue 40: two runs in a row within 10 % on every ratio). */
export const STEADY_WITHIN = 0.1;

/**
 * A ratio is named `<figure> / <baseline>` (every suite names its ratios so, targets and secondary ones alike); the
 * absolute figures (events/s, ms, %, counts) have no " / " in their names.
 */
export const isRatio = (r) => r.name.includes(' / ');

/** `value` relative to `before` (0.05: 5 % higher), or null when either is missing or zero. */
const changeOf = (value, before) =>
  typeof value === 'number' && typeof before === 'number' && before !== 0 ? Math.round(((value - before) / before) * 1000) / 1000 : null;

/**
 * Every target of the run (ratios and absolute targets; not the secondary figures) with its value and PASS/BELOW:
 * what `npm run bench` prints last and bench-results.json keeps as `summary`. With `previous` (the results file of
 * the run before), each figure also carries the previous run's value and the change, and `steady` counts how many
 * ratios of both runs (targets and secondary ones) agree within STEADY_WITHIN.
 */
export function targetSummary(ratios, previous = null) {
  const before = new Map((previous?.ratios ?? []).map((r) => [r.name, r.value]));
  const compared = (r) => (before.has(r.name) ? { previous: before.get(r.name), change: changeOf(r.value, before.get(r.name)) } : {});
  const targets = ratios
    .filter((r) => r.target !== null)
    .map((r) => ({
      name: r.name,
      value: r.value,
      target: `${r.atMost ? '<=' : '>='} ${r.target}${r.unit ?? ''}`,
      result: r.mark,
      ...compared(r),
    }));
  const summary = { met: targets.filter((t) => t.result === 'PASS').length, total: targets.length, targets };
  if (!previous) return summary;
  // The ratios (a figure over its baseline of the same run), not the absolute figures, which move with the machine.
  const changes = ratios
    .filter((r) => isRatio(r) && before.has(r.name))
    .map((r) => ({ name: r.name, change: changeOf(r.value, before.get(r.name)), same: r.value === before.get(r.name) }));
  const apart = changes.filter((c) => !c.same && (c.change === null || Math.abs(c.change) > STEADY_WITHIN));
  return {
    ...summary,
    steady: {
      previousRunId: previous.runId,
      previousFinishedAt: previous.finishedAt,
      previousSuites: previous.suites ?? [],
      within: STEADY_WITHIN,
      compared: changes.length,
      agree: changes.length - apart.length,
      apart: apart.map(({ name, change }) => ({ name, change })),
    },
  };
}

export function formatSummary(summary) {
  const pct = (c) => (c === null || c === undefined ? '' : `${c > 0 ? '+' : ''}${Math.round(c * 1000) / 10}%`);
  const withPrevious = Boolean(summary.steady);
  const rows = summary.targets.map((t) => [
    t.name,
    t.value === null ? 'n/a' : String(t.value),
    t.target,
    t.result,
    ...(withPrevious ? [t.previous === undefined ? '-' : String(t.previous), pct(t.change)] : []),
  ]);
  const headers = ['target', 'value', 'target', 'result', ...(withPrevious ? ['previous run', 'change'] : [])];
  // A failed suite's targets are not in the table: said in the same line, so "N of M" is not read as the whole run.
  const failed = summary.failedSuites?.length ? `; suites that failed, their targets not counted: ${summary.failedSuites.map((f) => f.suite).join(', ')}` : '';
  const lines = ['', `summary: ${summary.met} of ${summary.total} targets met${failed}`, table(headers, rows, [false, true, true, false, true, true])];
  if (withPrevious && !summary.steady.compared) {
    lines.push(`steadiness: no ratio in common with the previous run (${summary.steady.previousRunId}: ${summary.steady.previousSuites.join(', ')})`);
  } else if (withPrevious) {
    const s = summary.steady;
    lines.push(
      `steadiness: ${s.agree} of ${s.compared} ratios (targets and secondary ones) agree within ${s.within * 100}% of the previous run (${s.previousRunId}: ${s.previousSuites.join(', ')}, finished ${s.previousFinishedAt})` +
        (s.apart.length ? `; apart: ${s.apart.map((a) => `${a.name} ${pct(a.change) || 'n/a'}`).join('; ')}` : ''),
    );
  }
  return lines.join('\n');
}

/** The results file of the run before, if there is one and it reads (null otherwise: nothing to compare with). */
export function previousResults(file) {
  try {
    return JSON.parse(readFileSync(file, 'utf8'));
  } catch {
    return null;
  }
}

export function writeResults(file, data) {
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, `${JSON.stringify(data, null, 2)}\n`);
}

/** A .cpuprofile's samples: self time per node id, and the total and busy (not idle) time, µs. */
function profileTimes(file) {
  const profile = JSON.parse(readFileSync(file, 'utf8'));
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const selfUs = new Map();
  profile.samples.forEach((id, i) => selfUs.set(id, (selfUs.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0)));
  const total = [...selfUs.values()].reduce((a, b) => a + b, 0);
  const idle = [...selfUs].filter(([id]) => byId.get(id).callFrame.functionName === '(idle)').reduce((a, [, us]) => a + us, 0);
  return { file, byId, selfUs, total, busy: total - idle };
}

/**
 * Self time of a V8 .cpuprofile (from --cpu-prof) by function and by package, the `top` of each, as
 * shares of the busy (non-idle) time. A process writes one profile per thread (the worker's workflows run in a
 * thread of their own): the busiest is summarized, the others' busy time is listed (`otherThreads`).
 * Cheap enough to run after every profiled bench.
 */
export function summarizeCpuProfile(dir, top = 15) {
  const files = readdirSync(dir).filter((f) => f.endsWith('.cpuprofile'));
  if (!files.length) return null;
  const threads = files.map((f) => profileTimes(path.join(dir, f))).sort((a, b) => b.busy - a.busy);
  const { file, byId, selfUs, total, busy } = threads[0];
  const byFunction = new Map();
  const byPackage = new Map();
  const add = (map, key, us) => map.set(key, (map.get(key) ?? 0) + us);
  for (const [id, us] of selfUs) {
    const { functionName, url, lineNumber } = byId.get(id).callFrame;
    if (functionName === '(idle)') continue;
    const where = url.replace(/^file:\/\//, '');
    const short = where.includes('/node_modules/')
      ? where.slice(where.lastIndexOf('/node_modules/') + 14)
      : where.includes('/dist/')
        ? `dist/${where.split('/dist/').at(-1)}`
        : where || '(native)';
    add(byFunction, `${functionName || '(anonymous)'} ${short}${url ? `:${lineNumber + 1}` : ''}`, us);
    const inModules = where.includes('/node_modules/') ? where.slice(where.lastIndexOf('/node_modules/') + 14) : null;
    const pkg = inModules
      ? inModules
          .split('/')
          .slice(0, inModules.startsWith('@') ? 2 : 1)
          .join('/')
      : where.includes('/dist/')
        ? `dist/${where.split('/dist/').at(-1).split('/').slice(0, 2).join('/')}`
        : where.startsWith('node:')
          ? 'node internals'
          : functionName.startsWith('(')
            ? functionName
            : '(native / gc / other)';
    add(byPackage, pkg, us);
  }
  const topOf = (map) =>
    [...map.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([name, us]) => ({ name, ms: Math.round(us / 1000), pctOfBusy: Math.round((us / busy) * 1000) / 10 }));
  return {
    file,
    totalMs: Math.round(total / 1000),
    busyMs: Math.round(busy / 1000),
    functions: topOf(byFunction),
    packages: topOf(byPackage),
    otherThreads: threads.slice(1).map((t) => ({ file: t.file, busyMs: Math.round(t.busy / 1000) })),
  };
}
