import type { Context, Next } from 'koa';
import { ApiError, ValidationError } from '../../lib/errors';

/**
 * The one exit for errors: typed errors become the spec's bodies (`{"detail": ...}`), anything else is a
 * 500 that names the request id and nothing internal.
 */
export function errorRenderer() {
  return async (ctx: Context, next: Next) => {
    try {
      await next();
      if (ctx.status === 404 && ctx.body === undefined) {
        throw new ApiError(404, `No route matches ${ctx.method} ${ctx.path}. See /openapi.json for the available routes.`);
      }
      if (ctx.status === 405 && ctx.body === undefined) {
        // Set by the router's allowedMethods (which also sets the Allow header).
        ctx.status = 405;
        ctx.body = { detail: `Method ${ctx.method} is not allowed on ${ctx.path}. Allowed: ${ctx.response.get('Allow')}.` };
      }
      if (ctx.status === 501 && ctx.body === undefined) {
        ctx.status = 501;
        ctx.body = { detail: `Method ${ctx.method} is not supported by this API.` };
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
      } else {
        ctx.state.log.error({ err }, 'unhandled error');
        ctx.status = 500;
        ctx.body = { detail: `Internal server error. Quote request id ${ctx.state.requestId} when reporting it.` };
      }
    }
  };
}

function isHttpError(err: unknown): err is { status: number; message: string; headers?: Record<string, unknown> } {
  return typeof err === 'object' && err !== null && typeof (err as { status?: unknown }).status === 'number' && (err as { expose?: boolean }).expose === true;
}
