import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

const root = path.resolve(__dirname, '..');
const sources = (dir: string) =>
  readdirSync(path.join(root, dir))
    .filter((f) => f.endsWith('.ts'))
    .map((f) => ({ file: `${dir}/${f}`, text: readFileSync(path.join(root, dir, f), 'utf8') }));

/** Every `import ... from '<spec>'` with whether it is type-only. */
function imports(text: string): { spec: string; typeOnly: boolean }[] {
  return [...text.matchAll(/^import\s+(type\s+)?[^;]*?from\s+'([^']+)';/gms)].map((m) => ({ spec: m[2], typeOnly: Boolean(m[1]) }));
}

/**
 * A domain model workflow code may use at run time (e.g. lib/labs/statuses.ts): a module under lib/ that imports
 * nothing at run time itself, so it is deterministic and bundles into the workflow sandbox as it is.
 */
function isPureDomainModel(fromFile: string, spec: string): boolean {
  const target = path.posix.join(path.posix.dirname(fromFile), spec);
  if (!target.startsWith('lib/')) return false;
  const text = readFileSync(path.join(root, `${target}.ts`), 'utf8');
  return imports(text).every((i) => i.typeOnly);
}

describe('house rules the type checker cannot see', () => {
  it('workflow code imports only @temporalio/workflow, other workflow files, pure domain models of lib/, and types', () => {
    const offenders: string[] = [];
    for (const { file, text } of sources('workflows')) {
      for (const { spec, typeOnly } of imports(text)) {
        const allowed = typeOnly || spec === '@temporalio/workflow' || (spec.startsWith('./') && !spec.includes('..')) || isPureDomainModel(file, spec);
        if (!allowed) offenders.push(`${file}: ${spec}`);
      }
      if (/\b(Date\.now|Math\.random|setTimeout|setInterval|process\.)/.test(text.replace(/\/\/.*$|\/\*[\s\S]*?\*\//gm, ''))) {
        offenders.push(`${file}: non-deterministic API (use Temporal's sleep/condition and workflow time)`);
      }
    }
    expect(offenders).toEqual([]);
  });

  it('only repositories touch MongoDB collections', () => {
    const offenders: string[] = [];
    for (const dir of ['api', 'api/routes', 'api/middleware', 'activities', 'workflows', 'worker']) {
      for (const { file, text } of sources(dir)) {
        if (/\.collection(<[^>]*>)?\(/.test(text)) offenders.push(file);
      }
    }
    expect(offenders).toEqual([]);
  });

  it('workflow ids are built only in workflows/ids.ts', () => {
    const offenders: string[] = [];
    for (const dir of ['api', 'api/routes', 'activities', 'workflows', 'lib']) {
      for (const { file, text } of sources(dir)) {
        if (file === 'workflows/ids.ts') continue;
        if (/workflowId:\s*[`'"]/.test(text)) offenders.push(file);
      }
    }
    expect(offenders).toEqual([]);
  });
});
