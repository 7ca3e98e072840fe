import pino, { type Logger } from 'pino';

/**
 * pino JSON logs. Keys, secrets and patient data are redacted wherever they appear in a logged object,
 * so a careless `log.info({ body })` cannot leak them.
 */
const SENSITIVE = [
  'x-service-api-key',
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

export const redactPaths = [
  ...SENSITIVE.map((k) => `["${k}"]`),
  ...SENSITIVE.map((k) => `*["${k}"]`),
  ...SENSITIVE.map((k) => `*.*["${k}"]`),
];

export function createLogger(level: string, name: string, destination?: pino.DestinationStream): Logger {
  const options = { name, level, redact: { paths: redactPaths, censor: '[redacted]' }, base: { service: name } };
  return destination ? pino(options, destination) : pino(options);
}

export type { Logger };
