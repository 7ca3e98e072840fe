import type { Context } from 'koa';
import getRawBody from 'raw-body';
import { ApiError, ValidationError } from '../../lib/platform/errors';

/** Reads a body as text up to `limit` bytes: too large is 413. */
export async function readTextBody(ctx: Context, limit: number): Promise<string> {
  try {
    return await getRawBody(ctx.req, { limit, encoding: 'utf8', length: ctx.get('content-length') || undefined });
  } catch (err) {
    const e = err as { type?: string; status?: number };
    if (e.type === 'entity.too.large') {
      throw new ApiError(413, `Request body is larger than the limit of ${limit} bytes.`);
    }
    throw new ApiError(e.status && e.status < 500 ? e.status : 400, `Could not read the request body: ${(err as Error).message}`);
  }
}

/** Reads a JSON body up to `limit` bytes: too large is 413, malformed JSON is a 422 of type json_invalid. */
export async function readJsonBody(ctx: Context, limit: number): Promise<unknown> {
  const text = await readTextBody(ctx, limit);
  if (text.trim() === '') return {};
  // Parsed as JSON whatever the Content-Type says: clients often omit it, and the API speaks only JSON.
  try {
    return JSON.parse(text);
  } catch (err) {
    throw ValidationError.field(['body', 0], `JSON decode error: ${(err as Error).message}`, 'json_invalid');
  }
}
