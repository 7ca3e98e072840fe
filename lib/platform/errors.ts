import type { FieldError } from '../../schemas/validator';

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

