import type { Context, Next } from 'koa';
import { ApiError, DEPENDENCY_RETRY_AFTER_SECONDS, unavailableDependency, ValidationError } from '../../lib/platform/errors';

/**
 * The one exit for errors: typed errors become the spec's bodies (`{"detail": ...}`), a dependency that is down
 * a 503 with Retry-After, anything else a 500 that names the request id and nothing internal.
 */
export function errorRenderer() {
  return async (ctx: Context, next: Next) => {
    try {
      await next();
      if (ctx.status === 404 && ctx.body === undefined) {
        throw new ApiError(404, `No route matches ${ctx.method} ${ctx.path}. See /openapi.json for the available routes.`);
      }
      if (ctx.status === 405 && ctx.body === undefined) {
        // Set by allowedMethods (api/app.ts), with the Allow header: TRACE, PROPFIND... included.
        ctx.status = 405;
        ctx.body = { detail: `Method ${ctx.method} is not allowed on ${ctx.path}. Allowed: ${ctx.response.get('Allow')}.` };
      }
    } catch (err) {
      if (err instanceof ValidationError) {
        ctx.status = 422;
        ctx.body = { detail: err.errors };
      } else if (err instanceof ApiError) {
        ctx.status = err.status;
        ctx.body = { detail: err.detail };
        for (const [name, value] of Object.entries(err.headers)) ctx.set(name, value);
      } else if (isHttpError(err) && err.status < 500) {
        // Errors raised by koa/@koa/router themselves (405 Method Not Allowed, 501).
        ctx.status = err.status;
        ctx.body = { detail: err.message };
        for (const [name, value] of Object.entries(err.headers ?? {})) ctx.set(name, String(value));
      } else if (unavailableDependency(err)) {
        const dependency = unavailableDependency(err);
        ctx.state.log.warn({ err: errorSummary(err), dependency }, 'dependency unavailable');
        ctx.status = 503;
        ctx.set('Retry-After', String(DEPENDENCY_RETRY_AFTER_SECONDS));
        ctx.body = {
          detail: `The ${dependency === 'database' ? 'database' : 'workflow service (Temporal)'} is unavailable right now; retry after ${DEPENDENCY_RETRY_AFTER_SECONDS} s.`,
        };
      } else {
        ctx.state.log.error({ err: errorSummary(err) }, 'unhandled error');
        ctx.status = 500;
        ctx.body = { detail: `Internal server error. Quote request id ${ctx.state.requestId} when reporting it.` };
      }
    }
  };
}

/**
 * What a 500's log line may say about its error: class, name, code and the stack frames (where), never the
 * message or the error's own fields. Driver and server errors embed request values in both (a duplicate
 * key names the key's value, a validation failure quotes the document), so neither is logged; the
 * request id (on every line of the request) ties the line to the response the caller quotes.
 */
export function errorSummary(err: unknown, depth = 0): Record<string, unknown> {
  if (typeof err !== 'object' || err === null) return { type: typeof err };
  const e = err as { name?: unknown; code?: unknown; codeName?: unknown; stack?: unknown; cause?: unknown };
  const frames =
    typeof e.stack === 'string'
      ? e.stack
          .split('\n')
          .filter((l) => /^\s+at /.test(l))
          .map((l) => l.trim())
      : [];
  return {
    type: err.constructor?.name ?? 'Object',
    ...(typeof e.name === 'string' ? { name: e.name } : {}),
    ...(typeof e.code === 'string' || typeof e.code === 'number' ? { code: e.code } : {}),
    ...(typeof e.codeName === 'string' ? { codeName: e.codeName } : {}),
    stack: frames.join('\n'),
    ...(e.cause !== undefined && depth < 3 ? { cause: errorSummary(e.cause, depth + 1) } : {}),
  };
}

function isHttpError(err: unknown): err is { status: number; message: string; headers?: Record<string, unknown> } {
  return typeof err === 'object' && err !== null && typeof (err as { status?: unknown }).status === 'number' && (err as { expose?: boolean }).expose === true;
}
