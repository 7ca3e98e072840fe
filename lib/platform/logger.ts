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

export function createLogger(level: string, name: string, destination?: pino.DestinationStream): Logger {
  const options: pino.LoggerOptions = {
    name,
    level,
    formatters: { log: redactSensitive, bindings: redactSensitive },
    base: { service: name },
  };
  return destination ? pino(options, destination) : pino(options);
}

export type { Logger };
