import pino, { type Logger } from 'pino';

/**
 * pino JSON logs. Keys, secrets and patient data are redacted wherever they appear in a logged object,
 * so a careless `log.info({ body })` cannot leak them.
 */
const SENSITIVE = [
  'x-service-api-key',
  'x-vital-api-key',
  'x-management-key',
  'x-service-org-key',
  'authorization',
  'api_key',
  'management_key',
  'team_api_key',
  'key',
  'value',
  'secret',
  'password',
  'first_name',
  'last_name',
  'dob',
  'email',
  'phone_number',
  'patient_details',
  'patient_address',
  'address',
  'insured',
  'guarantor',
  'member_id',
  'group_id',
  'client_secret',
  'fallback_birth_date',
  // Provider OAuth (lib/wearables/providers/): never logged, even inside a token response or a request.
  'access_token',
  'refresh_token',
  'code_verifier',
  'signature_secret_key',
  'webhook_secret',
  'verify_token',
];

const SENSITIVE_KEYS = new Set(SENSITIVE);
const CENSOR = '[redacted]';
/** Deeper than any object the code logs; past it a value is dropped rather than walked (no cycles, no cost). */
const MAX_DEPTH = 12;

/**
 * A copy of `value` with every sensitive key's value replaced, at any depth (pino's path-based redaction
 * needs one wildcard path per level, so a body nested one level deeper than foreseen would leak). Plain
 * objects and arrays are walked; anything else (Errors, Dates, buffers) is kept for pino's serializers.
 * Unchanged subtrees are returned as they are, so a log line without sensitive keys costs one walk.
 */
export function redactSensitive<T>(value: T, depth = 0): T {
  if (value === null || typeof value !== 'object') return value;
  if (depth >= MAX_DEPTH) return CENSOR as T;
  if (Array.isArray(value)) {
    let copy: unknown[] | undefined;
    value.forEach((item, i) => {
      const redacted = redactSensitive(item, depth + 1);
      if (redacted !== item) (copy ??= [...value])[i] = redacted;
    });
    return (copy ?? value) as T;
  }
  const proto = Object.getPrototypeOf(value);
  if (proto !== Object.prototype && proto !== null) return value;
  let copy: Record<string, unknown> | undefined;
  for (const [key, item] of Object.entries(value as Record<string, unknown>)) {
    const redacted = SENSITIVE_KEYS.has(key.toLowerCase()) && item !== undefined && item !== null ? CENSOR : redactSensitive(item, depth + 1);
    if (redacted !== item) (copy ??= { ...(value as Record<string, unknown>) })[key] = redacted;
  }
  return (copy ?? value) as T;
}

/** Longest string field of a logged error; longer ones are cut (a bulk write error lists every id it touched). */
const MAX_ERROR_FIELD_CHARS = 1_000;
const cut = (text: string, max = MAX_ERROR_FIELD_CHARS) => (text.length > max ? `${text.slice(0, max)}…(+${text.length - max} chars)` : text);

/**
 * An error as one bounded log field: type, message, code and stack as pino's serializer gives them, cut to a size a
 * log line can carry; of its other properties, scalars are kept (cut) and big objects or arrays are summarised
 * (`MongoBulkWriteError.insertedIds` of 10,000 documents made 63 KB lines).
 */
export function serializeError(err: unknown): unknown {
  if (!(err instanceof Error)) return err;
  const serialized = pino.stdSerializers.err(err) as unknown as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(serialized)) {
    if (typeof value === 'string') out[key] = cut(value, key === 'stack' ? 4 * MAX_ERROR_FIELD_CHARS : MAX_ERROR_FIELD_CHARS);
    else if (value === null || typeof value !== 'object') out[key] = value;
    else if (Array.isArray(value)) out[key] = value.length > 10 ? `[${value.length} items]` : value;
    else {
      const json = JSON.stringify(value) ?? '';
      out[key] = json.length > MAX_ERROR_FIELD_CHARS ? `[object of ${json.length} chars, omitted]` : value;
    }
  }
  return out;
}

export function createLogger(level: string, name: string, destination?: pino.DestinationStream): Logger {
  const options: pino.LoggerOptions = {
    name,
    level,
    formatters: { log: redactSensitive, bindings: redactSensitive },
    // `error` too: the Temporal SDK logs an activity's failure under that key.
    serializers: { err: serializeError, error: serializeError },
    base: { service: name },
  };
  return destination ? pino(options, destination) : pino(options);
}

export type { Logger };
