import type { FieldError } from '../../schemas/validator';
import { isDatabaseUnavailable } from './database/store-errors';
import { isTemporalUnavailable } from './temporal';

/**
 * Typed errors thrown by handlers and repositories. One middleware (api/middleware/errors.ts) renders them
 * into the spec's bodies; nothing else writes error responses.
 */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly detail: unknown,
    readonly headers: Record<string, string> = {},
  ) {
    super(typeof detail === 'string' ? detail : `HTTP ${status}`);
  }
}

/** 422 with field locations: `{"detail": [{"loc": ["body", "field"], "msg", "type"}]}`. */
export class ValidationError extends ApiError {
  constructor(readonly errors: FieldError[]) {
    super(422, errors);
  }
  static field(loc: (string | number)[], msg: string, type = 'value_error'): ValidationError {
    return new ValidationError([{ loc, msg, type }]);
  }
}

export const badRequest = (detail: unknown) => new ApiError(400, detail);
export const unauthorized = (detail: string) => new ApiError(401, detail);
export const forbidden = (detail: string) => new ApiError(403, detail);
export const notFound = (detail: string) => new ApiError(404, detail);

/** Seconds a client should wait before retrying a request refused because a dependency is down. */
export const DEPENDENCY_RETRY_AFTER_SECONDS = 5;

/**
 * The dependency an error says is unreachable right now (the database: no server selectable, a dropped
 * connection; Temporal: the service unavailable or not answering in time), or null for any other error. Such a
 * request is answered 503 with Retry-After rather than 500: nothing is wrong with it, and it can be sent again.
 */
export function unavailableDependency(err: unknown): 'database' | 'Temporal' | null {
  for (let e = err as { cause?: unknown } | undefined, depth = 0; e && typeof e === 'object' && depth < 4; e = e.cause as typeof e, depth++) {
    if (isDatabaseUnavailable(e)) return 'database';
    if (isTemporalUnavailable(e)) return 'Temporal';
  }
  return null;
}
