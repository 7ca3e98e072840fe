import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { loadProviderCatalogue } from '../lib/wearables/provider-catalogue';
import { EVENT_CATALOGUE, NOT_DATA, findEventType } from '../schemas/event-catalogue';
import { expectSchema } from './support/harness';

const root = path.resolve(__dirname, '..');
const sourceFiles = (dir: string): string[] =>
  readdirSync(path.join(root, dir), { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sourceFiles(path.join(dir, e.name)) : e.name.endsWith('.ts') ? [path.join(dir, e.name)] : [],
  );

describe('event catalogue', () => {
  it.each(EVENT_CATALOGUE.filter((e) => e.name !== 'webhook.test' && e.name !== 'pipeline.test').map((e) => [e.name, e]))(
    '%s: the sample data matches its schema',
    (_name, entry) => {
      expectSchema((entry as (typeof EVENT_CATALOGUE)[number]).schema, (entry as (typeof EVENT_CATALOGUE)[number]).sample);
    },
  );

  it('lists every data event a provider can cause: daily.data.<resource>.created/updated and historical.data.<resource>.created', () => {
    const missing: string[] = [];
    for (const provider of loadProviderCatalogue().entries) {
      for (const resource of provider.supported_resources.filter((r) => !NOT_DATA.has(r))) {
        for (const type of [`daily.data.${resource}.created`, `daily.data.${resource}.updated`, `historical.data.${resource}.created`]) {
          if (!findEventType(type)) missing.push(`${type} (${provider.slug})`);
        }
      }
    }
    expect([...new Set(missing)]).toEqual([]);
  });

  it('lists every event type the code publishes by name', () => {
    // Each string literal an `eventType:` of the product code can take (both arms of a conditional included);
    // the templated types (daily.data.*, historical.data.*, <kind>.disabled) are checked above and below.
    const named = new Set<string>();
    for (const file of [...sourceFiles('lib'), ...sourceFiles('activities'), ...sourceFiles('api')]) {
      for (const line of readFileSync(path.join(root, file), 'utf8').split('\n')) {
        const expr = /eventType:\s*([^,}]+)/.exec(line)?.[1] ?? '';
        for (const m of expr.matchAll(/'([a-z_]+(?:\.[a-z_]+)+)'/g)) named.add(m[1]);
      }
    }
    expect(named.size).toBeGreaterThanOrEqual(5);
    for (const kind of ['webhook', 'pipeline']) named.add(`${kind}.disabled`);
    expect([...named].filter((type) => !findEventType(type))).toEqual([]);
  });
});
