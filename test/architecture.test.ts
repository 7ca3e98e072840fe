import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';

const root = path.resolve(__dirname, '..');
const read = (file: string) => readFileSync(path.join(root, file), 'utf8');
const sources = (dir: string) =>
  readdirSync(path.join(root, dir))
    .filter((f) => f.endsWith('.ts'))
    .map((f) => ({ file: `${dir}/${f}`, text: read(`${dir}/${f}`) }));
/** Every .ts file below `dir`, recursively. */
function tree(dir: string): { file: string; text: string }[] {
  return readdirSync(path.join(root, dir)).flatMap((f) => {
    const rel = `${dir}/${f}`;
    if (statSync(path.join(root, rel)).isDirectory()) return tree(rel);
    return f.endsWith('.ts') ? [{ file: rel, text: read(rel) }] : [];
  });
}
/** The product's code: where requests enter, the domains, workflows, activities and the worker. */
const PRODUCT_DIRS = ['api', 'lib', 'workflows', 'activities', 'worker'];
const product = () => PRODUCT_DIRS.flatMap(tree);

/** Every `import ... from '<spec>'` with whether it is type-only and the names it imports. */
function imports(text: string): { spec: string; typeOnly: boolean; names: { name: string; typeOnly: boolean }[] }[] {
  return [...text.matchAll(/^import\s+(type\s+)?([^;]*?)\s+from\s+'([^']+)';/gms)].map((m) => {
    const braces = /\{([^}]*)\}/.exec(m[2]);
    const names = (braces ? braces[1].split(',') : [m[2]])
      .map((n) => n.trim())
      .filter(Boolean)
      .map((n) => ({ name: n.replace(/^type\s+/, '').split(/\s+as\s+/)[0], typeOnly: Boolean(m[1]) || n.startsWith('type ') }));
    return { spec: m[3], typeOnly: Boolean(m[1]) || (names.length > 0 && names.every((n) => n.typeOnly)), names };
  });
}
/** The repository path an import of `spec` from `file` names (relative imports only). */
const target = (file: string, spec: string) => (spec.startsWith('.') ? path.posix.join(path.posix.dirname(file), spec) : null);

/**
 * A domain model workflow code may use at run time (e.g. lib/labs/statuses.ts): a module under lib/ that imports
 * nothing at run time itself, so it is deterministic and bundles into the workflow sandbox as it is.
 */
function isPureDomainModel(fromFile: string, spec: string): boolean {
  const to = target(fromFile, spec);
  if (!to?.startsWith('lib/')) return false;
  return imports(read(`${to}.ts`)).every((i) => i.typeOnly);
}

/** The domain (or `platform`) a file under lib/ belongs to: its first folder. */
const domainOf = (file: string) => (file.startsWith('lib/') && file.split('/').length > 2 ? file.split('/')[1] : null);

/**
 * How long a source file may grow: 600 lines. Cohesion decides where code goes; the cap only stops a file from
 * becoming several (splits made to stay under a lower cap, whose parts called back into each other, were merged).
 */
const MAX_LINES = 600;

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

  it("only a domain's store touches its collections: a store file of lib/<domain>/, and each collection from one domain", () => {
    const offenders: string[] = [];
    const domainsOf = new Map<string, Set<string>>();
    for (const { file, text } of product()) {
      const calls = [...text.matchAll(/\.collection(?:<[^>]*>)?\(\s*([^)]*?)\s*\)/g)].map((m) => m[1]);
      if (!calls.length) continue;
      // Stores, the migration bookkeeping (lib/platform/database/migrations.ts, for the first real migration), and the
      // store toolkit's database handle, which hands each store its own collection (write-conflicts.ts).
      const isStore =
        /^lib\/[\w-]+\/(.+-)?store\.ts$/.test(file) || file === 'lib/platform/database/migrations.ts' || file === 'lib/platform/database/write-conflicts.ts';
      if (!isStore) offenders.push(`${file}: touches a collection outside a store`);
      for (const arg of calls) {
        const name = /^['"`]([\w.-]+)['"`]$/.exec(arg)?.[1];
        if (name) domainsOf.set(name, new Set([...(domainsOf.get(name) ?? []), domainOf(file) ?? file]));
      }
    }
    for (const [name, domains] of domainsOf) if (domains.size > 1) offenders.push(`${name}: touched by ${[...domains].join(' and ')}`);
    expect(domainsOf.size).toBeGreaterThan(15); // the scan sees the stores at all
    expect(offenders).toEqual([]);
  });

  it('lib/ imports from workflows/ only workflow functions, signal and update definitions, and workflow ids (types aside)', () => {
    const offenders: string[] = [];
    for (const { file, text } of tree('lib')) {
      for (const { spec, names } of imports(text)) {
        if (!target(file, spec)?.startsWith('workflows/')) continue;
        for (const { name, typeOnly } of names) {
          if (!typeOnly && !/(Workflow|Signal|Update)$/.test(name) && name !== 'workflowIds') offenders.push(`${file}: ${name} from ${spec}`);
        }
      }
    }
    expect(offenders).toEqual([]);
  });

  it('api/ and schemas/ import nothing from workflows/ (they reach workflows through the domains in lib/)', () => {
    const offenders = [...tree('api'), ...tree('schemas')].flatMap(({ file, text }) =>
      imports(text)
        .filter((i) => target(file, i.spec)?.startsWith('workflows/'))
        .map((i) => `${file}: ${i.spec}`),
    );
    expect(offenders).toEqual([]);
  });

  it("nothing under lib/ imports from api/, not even a type (domain functions take the dependencies they use, not the api's AppDeps)", () => {
    const offenders = tree('lib').flatMap(({ file, text }) =>
      imports(text)
        .filter((i) => target(file, i.spec)?.startsWith('api/'))
        .map((i) => `${file}: ${i.spec}`),
    );
    expect(offenders).toEqual([]);
  });

  it('workflows/ holds only workflows (and their ids), activities/ only activities', () => {
    const offenders: string[] = [];
    for (const { file, text } of sources('workflows')) {
      if (file === 'workflows/ids.ts' || file === 'workflows/index.ts') continue;
      if (!/^export async function \w+Workflow\(/m.test(text)) offenders.push(`${file}: defines no workflow`);
    }
    for (const { file, text } of sources('activities')) {
      if (file === 'activities/index.ts') continue;
      if (!/^export function create\w+Activities\(/m.test(text)) offenders.push(`${file}: defines no activities`);
    }
    expect(offenders).toEqual([]);
  });

  it('route files export only their routes (helpers several routes share live in the domains or api/management-scope.ts)', () => {
    const offenders: string[] = [];
    for (const { file, text } of sources('api/routes')) {
      for (const [, name] of text.matchAll(/^export\s+(?:async\s+)?(?:const|function|class|type|interface)\s+(\w+)/gm)) {
        if (!/Routes$/.test(name) && !(file === 'api/routes/index.ts' && name === 'routeTable')) offenders.push(`${file}: ${name}`);
      }
    }
    expect(offenders).toEqual([]);
  });

  it(`no source file is over ${MAX_LINES} lines (schemas/, the catalogues' data and the tests aside)`, () => {
    const scripts = (dir: string): { file: string; text: string }[] =>
      readdirSync(path.join(root, dir)).flatMap((f) => {
        const rel = `${dir}/${f}`;
        if (statSync(path.join(root, rel)).isDirectory()) return scripts(rel);
        return /\.(ts|mjs|cjs|js)$/.test(f) ? [{ file: rel, text: read(rel) }] : [];
      });
    const long = [...product(), ...scripts('scripts')].map(({ file, text }) => ({ file, lines: text.split('\n').length })).filter((f) => f.lines > MAX_LINES);
    expect(long).toEqual([]);
  });

  it('workflow ids are built only in workflows/ids.ts', () => {
    const offenders: string[] = [];
    for (const { file, text } of product()) {
      if (file === 'workflows/ids.ts') continue;
      if (/workflowId:\s*[`'"]/.test(text)) offenders.push(file);
    }
    expect(offenders).toEqual([]);
  });
});
