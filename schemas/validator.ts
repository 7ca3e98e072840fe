import Ajv, { type ErrorObject, type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import { fullFormats } from 'ajv-formats/dist/formats';
import type { Static, TSchema } from '@sinclair/typebox';
import { usualInstantMs } from '../lib/platform/time';

/**
 * The one ajv instance. Body schemas declare `additionalProperties: false` and `removeAdditional`
 * strips unknown fields (they are ignored, not rejected). Query, path, header and env values arrive as
 * strings; `coerceFlat` converts them by schema type before validation, so no instance-wide coercion
 * can silently accept a string where a JSON body must carry a number. `strictNumbers` refuses NaN and
 * Infinity (`JSON.parse('1e400')` is Infinity), and every integer parameter declares a maximum. `verbose`
 * gives each error its schema, so a schema can word its own messages (`'x-messages': {keyword: msg}`).
 */
export const ajv = new Ajv({ allErrors: true, removeAdditional: true, useDefaults: true, strict: false, strictNumbers: true, verbose: true });
addFormats(ajv);
ajv.addFormat('uuid', /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i);

const rfc3339DateTime = fullFormats['date-time'] as { validate: (s: string) => boolean; compare: (a: string, b: string) => number | undefined };
/**
 * ajv-formats' date-time, with the shape every client sends (usualInstantMs: `2026-01-02T03:04:05(.sss)(Z|±hh:mm)`)
 * accepted by reading characters: a phone's chunk has 20,000 of them, and the regex-and-split check cost a tenth of its
 * upload's time. Anything else takes the full check, so what is accepted is exactly what ajv-formats accepts.
 */
const dateTime = (s: string): boolean => usualInstantMs(s) !== null || rfc3339DateTime.validate(s);
ajv.addFormat('date-time', { type: 'string', validate: dateTime, compare: rfc3339DateTime.compare });

const compiled = new WeakMap<object, ValidateFunction>();

export function validatorFor<T extends TSchema>(schema: T): ValidateFunction<Static<T>> {
  let fn = compiled.get(schema);
  if (!fn) {
    fn = ajv.compile(schema);
    compiled.set(schema, fn);
  }
  return fn as ValidateFunction<Static<T>>;
}

/** A shipped data file (e.g. a catalogue) checked against its schema; throws naming every bad field, to stop start-up. */
export function checkedDataFile<T extends TSchema>(schema: T, raw: unknown, file: string, what: string): Static<T> {
  const copy = structuredClone(raw);
  const validate = validatorFor(schema);
  if (!validate(copy)) {
    const where = toFieldErrors(file, validate.errors).map((e) => `${e.loc.join('.')}: ${e.msg}`);
    throw new Error(`${what} is invalid: ${where.join('; ')}`);
  }
  return copy;
}

export interface FieldError {
  loc: (string | number)[];
  msg: string;
  type: string;
}

/** Renders ajv errors in the FastAPI/pydantic shape the reference API uses: `{loc, msg, type}`. */
export function toFieldErrors(location: string, errors: ErrorObject[] | null | undefined): FieldError[] {
  const out: FieldError[] = [];
  const seen = new Set<string>();
  for (const e of errors ?? []) {
    // `if` reports that its `then`/`else` failed; the failing keyword inside is reported on its own.
    // `propertyNames` likewise repeats the error of the name's own schema (which names the property).
    if (e.keyword === 'if' || e.keyword === 'propertyNames') continue;
    const path: (string | number)[] = e.instancePath
      .split('/')
      .slice(1)
      .map((p) => (/^\d+$/.test(p) ? Number(p) : p.replace(/~1/g, '/').replace(/~0/g, '~')));
    if (e.keyword === 'required') path.push((e.params as { missingProperty: string }).missingProperty);
    if (typeof e.propertyName === 'string') path.push(e.propertyName);
    const described = describe(e);
    const own = (e.parentSchema as { 'x-messages'?: Record<string, string> } | undefined)?.['x-messages']?.[e.keyword];
    const { msg, type } = own ? { ...described, msg: own } : described;
    const key = JSON.stringify(path);
    // anyOf/nullable schemas produce one error per branch; the first is the useful one.
    if (seen.has(key)) continue;
    seen.add(key);
    out.push({ loc: [location, ...path], msg, type });
  }
  return out;
}

/** Fields that name or identify something: `id`, `user_id`, `lab_test_ids`, `name`, `first_name`, … */
const ID_OR_NAME_FIELD = /(^|_)(ids?|names?)$/i;
// eslint-disable-next-line no-control-regex
const CONTROL_CHARACTER = /[\u0000-\u001f\u007f]/;
/** A UTF-16 surrogate without its pair (JSON can spell one, `"\ud800"`; no UTF-8 text can hold one). */
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
/** Deepest nesting of objects and arrays a request may send (the deepest schema needs a handful of levels). */
export const MAX_INPUT_DEPTH = 32;

/** A value met walking an input: where it is, the field it belongs to (an array item: its array's), whether it is too deep. */
export interface InputNode {
  value: unknown;
  path: (string | number)[];
  field: string;
  /** An object or array below MAX_INPUT_DEPTH levels: not walked into. */
  tooDeep: boolean;
}

/** Every value and key of an input, depth first in document order, without recursion (any depth is safe to walk). */
export function* walkInput(value: unknown): Generator<InputNode> {
  const pending: Omit<InputNode, 'tooDeep'>[] = [{ value, path: [], field: '' }];
  for (let node = pending.pop(); node; node = pending.pop()) {
    const { value: v, path, field } = node;
    const container = !!v && typeof v === 'object';
    const tooDeep = container && path.length >= MAX_INPUT_DEPTH;
    yield { ...node, tooDeep };
    if (!container || tooDeep) continue;
    const children: [string | number, unknown][] = Array.isArray(v) ? v.map((child, i) => [i, child]) : Object.entries(v);
    for (const [key, child] of children.reverse()) pending.push({ value: child, path: [...path, key], field: typeof key === 'string' ? key : field });
  }
}

/**
 * The 422s for what a schema does not say about an input's strings and nesting (at any depth, in arrays too):
 * - an id or name field holding a control character (U+0000–U+001F, U+007F): a NUL or line break in an id is never
 *   meant, breaks logs, CSV exports and downstream systems, and would otherwise be stored and returned as sent;
 * - any string or field name holding a lone surrogate: not text, and stored it would come back as U+FFFD;
 * - objects and arrays nested deeper than MAX_INPUT_DEPTH, named at the value that goes too deep.
 */
export function contentErrors(location: string, input: unknown): FieldError[] {
  const errors: FieldError[] = [];
  for (const { value, path, field, tooDeep } of walkInput(input)) {
    const loc = [location, ...path];
    const name = path.at(-1);
    if (typeof name === 'string' && field === name && LONE_SURROGATE.test(name)) {
      errors.push({ loc, msg: 'Field names should be valid text: this one holds an unpaired UTF-16 surrogate', type: 'string_unicode' });
    } else if (tooDeep) {
      errors.push({ loc, msg: `Input should be nested at most ${MAX_INPUT_DEPTH} levels deep`, type: 'too_deep' });
    } else if (typeof value === 'string' && LONE_SURROGATE.test(value)) {
      errors.push({ loc, msg: 'Input should be valid text: it holds an unpaired UTF-16 surrogate', type: 'string_unicode' });
    } else if (typeof value === 'string' && ID_OR_NAME_FIELD.test(field) && CONTROL_CHARACTER.test(value)) {
      errors.push({ loc, msg: 'Control characters (U+0000 to U+001F, U+007F) are not allowed in ids and names', type: 'string_pattern_mismatch' });
    }
  }
  return errors;
}

const formatTypes: Record<string, string> = {
  uuid: 'uuid_parsing',
  date: 'date_parsing',
  'date-time': 'datetime_parsing',
  uri: 'url_parsing',
  email: 'value_error',
};

function describe(e: ErrorObject): { msg: string; type: string } {
  const p = e.params as Record<string, unknown>;
  switch (e.keyword) {
    case 'required':
      return { msg: 'Field required', type: 'missing' };
    case 'type': {
      const t = String(p.type).split(',')[0];
      const names: Record<string, string> = {
        string: 'string',
        integer: 'int',
        number: 'float',
        boolean: 'bool',
        object: 'dict',
        array: 'list',
        null: 'none',
      };
      return { msg: `Input should be a valid ${t === 'object' ? 'object' : t}`, type: `${names[t] ?? t}_type` };
    }
    case 'enum':
      return {
        msg: `Input should be ${(p.allowedValues as unknown[]).map((v) => JSON.stringify(v)).join(', ')}`,
        type: 'enum',
      };
    case 'const':
      return { msg: `Input should be ${JSON.stringify(p.allowedValue)}`, type: 'literal_error' };
    case 'format': {
      const f = String(p.format);
      const hint = f === 'date' ? ' in the format YYYY-mm-dd' : f === 'uuid' ? ' (UUID)' : '';
      return { msg: `Input should be a valid ${f}${hint}`, type: formatTypes[f] ?? 'value_error' };
    }
    case 'minLength':
      return { msg: `String should have at least ${p.limit} character(s)`, type: 'string_too_short' };
    case 'maxLength':
      return { msg: `String should have at most ${p.limit} character(s)`, type: 'string_too_long' };
    case 'minimum':
      return { msg: `Input should be greater than or equal to ${p.limit}`, type: 'greater_than_equal' };
    case 'maximum':
      return { msg: `Input should be less than or equal to ${p.limit}`, type: 'less_than_equal' };
    case 'pattern':
      return { msg: `String should match pattern '${p.pattern}'`, type: 'string_pattern_mismatch' };
    case 'minItems':
      return { msg: `List should have at least ${p.limit} item(s)`, type: 'too_short' };
    case 'maxItems':
      return { msg: `List should have at most ${p.limit} item(s)`, type: 'too_long' };
    case 'maxProperties':
      return { msg: `Object should have at most ${p.limit} field(s)`, type: 'too_long' };
    case 'minProperties':
      return { msg: `Object should have at least ${p.limit} field(s)`, type: 'too_short' };
    case 'not':
      return { msg: 'Input is not allowed here', type: 'value_error' };
    case 'additionalProperties':
      return { msg: `Extra field '${p.additionalProperty}' is not permitted`, type: 'extra_forbidden' };
    default:
      return { msg: e.message ?? 'Invalid value', type: 'value_error' };
  }
}

/**
 * A 422 for each parameter of the schema sent in the bracket form of PHP and Rails (`limit[]=1`, `offset[a]=1`):
 * read as unknown names they would be ignored and the request answered as if they were absent.
 */
export function bracketedNameErrors(location: string, schema: TSchema, input: Record<string, unknown>): FieldError[] {
  const props = (schema as { properties?: Record<string, unknown> }).properties ?? {};
  return Object.keys(input).flatMap((key) => {
    const name = /^([^[\]]+)\[[^\]]*\]/.exec(key)?.[1];
    if (name === undefined || !Object.hasOwn(props, name)) return [];
    return [{ loc: [location, name], msg: `Send ${name} as \`${name}=value\` (repeated for several values), not as \`${key}=\``, type: 'value_error' }];
  });
}

/**
 * Converts string inputs (query, path, headers, environment) to the primitive type the schema expects.
 * Values that do not convert are left as strings so validation reports them.
 */
export function coerceFlat(schema: TSchema, input: Record<string, unknown>): Record<string, unknown> {
  type Prop = { type?: string | string[]; anyOf?: { type?: string }[]; items?: Prop };
  const props = (schema as { properties?: Record<string, Prop> }).properties;
  const typesOf = (prop: Prop | undefined) => (prop ? [prop.type, ...(prop.anyOf ?? []).map((s) => s.type)].flat().filter(Boolean) : []);
  const out: Record<string, unknown> = {};
  for (const [key, raw] of Object.entries(input)) {
    const prop = props?.[key];
    const types = typesOf(prop);
    if (types.includes('array')) {
      // Repeated parameters (`?status=a&status=b`) arrive as an array; each item converts like a scalar.
      const itemTypes = typesOf(prop?.items);
      out[key] = (Array.isArray(raw) ? raw : [raw]).map((item) => coerceScalar(item, itemTypes));
      continue;
    }
    // A repeated scalar parameter: the last one wins, as in most web frameworks.
    const value = Array.isArray(raw) ? raw[raw.length - 1] : raw;
    out[key] = prop ? coerceScalar(value, types) : value;
  }
  return out;
}

const DECIMAL = /^-?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$/;

/** A string converted to the number or boolean the schema expects; anything else is left for validation to report. */
function coerceScalar(value: unknown, types: unknown[]): unknown {
  if (typeof value !== 'string') return value;
  // Only decimal numbers convert: `0x10`, `0b1`, ` 5`, `Infinity` and `1e400` stay strings and are reported as not a number.
  if (types.includes('integer') && /^-?\d+$/.test(value)) return Number(value);
  if (types.includes('number') && DECIMAL.test(value) && Number.isFinite(Number(value))) return Number(value);
  if (types.includes('boolean') && (value === 'true' || value === 'false')) return value === 'true';
  return value;
}
