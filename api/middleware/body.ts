import type { Context } from 'koa';
import getRawBody from 'raw-body';
import { ApiError, ValidationError } from '../../lib/platform/errors';
import { walkInput } from '../../schemas/validator';

/** Reads a body's bytes up to `limit`: too large is 413. */
export async function readBodyBytes(ctx: Context, limit: number): Promise<Buffer> {
  try {
    return await getRawBody(ctx.req, { limit, length: ctx.get('content-length') || undefined });
  } catch (err) {
    const e = err as { type?: string; status?: number };
    if (e.type === 'entity.too.large') {
      throw new ApiError(413, `Request body is larger than the limit of ${limit} bytes.`);
    }
    throw new ApiError(e.status && e.status < 500 ? e.status : 400, `Could not read the request body: ${(err as Error).message}`);
  }
}

/** Reads a body as text up to `limit` bytes: too large is 413. */
export async function readTextBody(ctx: Context, limit: number): Promise<string> {
  return (await readBodyBytes(ctx, limit)).toString('utf8');
}

const strictUtf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * Reads a JSON body up to `limit` bytes: too large is 413, malformed JSON is a 422 of type json_invalid, and bytes
 * that are not UTF-8 a 422 of type string_unicode (decoded leniently they would be stored as U+FFFD, silently).
 */
export async function readJsonBody(ctx: Context, limit: number): Promise<unknown> {
  return jsonOfBytes(await readBodyBytes(ctx, limit));
}

/** A JSON body's bytes as readJsonBody reads them (strict UTF-8, empty is {}), for a body read otherwise (gunzipped). */
export function jsonOfBytes(bytes: Buffer): unknown {
  let text: string;
  try {
    text = strictUtf8.decode(bytes);
  } catch {
    throw ValidationError.field(
      notUtf8Location(bytes.toString('utf8')),
      'Input should be valid UTF-8: the request body holds bytes that are not',
      'string_unicode',
    );
  }
  if (text.trim() === '') return {};
  // Parsed as JSON whatever the Content-Type says: clients often omit it, and the API speaks only JSON.
  try {
    return JSON.parse(text);
  } catch (err) {
    throw ValidationError.field(['body', 0], `JSON decode error: ${(err as Error).message}`, 'json_invalid');
  }
}

/** The first field whose value or name the invalid bytes are in (where lenient decoding put U+FFFD), else the body. */
function notUtf8Location(lenient: string): (string | number)[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(lenient);
  } catch {
    return ['body'];
  }
  for (const { value, path, field } of walkInput(parsed)) {
    const name = path.at(-1);
    if ((typeof value === 'string' && value.includes('\ufffd')) || (typeof name === 'string' && name === field && name.includes('\ufffd')))
      return ['body', ...path];
  }
  return ['body'];
}
