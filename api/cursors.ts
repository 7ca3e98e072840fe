import { ValidationError } from '../lib/platform/errors';
import type { Page } from '../lib/platform/database/pages';

/**
 * Opaque page cursors: base64url of a small JSON object holding what the next page needs (the last id seen,
 * and for lists that report a total, the total and page number of the first page's count). Clients pass them
 * back unchanged; a cursor that does not decode to the expected shape is a 422 on the query field.
 */
export function encodeCursor(state: Record<string, string | number>): string {
  return Buffer.from(JSON.stringify(state)).toString('base64url');
}

export function decodeCursor<T extends Record<string, string | number>>(
  cursor: string | undefined,
  shape: { [K in keyof T]: T[K] extends number ? 'number' : 'string' },
  field = 'next_cursor',
): T | null {
  if (!cursor) return null;
  let state: unknown;
  try {
    state = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    state = null;
  }
  const valid =
    typeof state === 'object' && state !== null && Object.entries(shape).every(([key, type]) => typeof (state as Record<string, unknown>)[key] === type);
  if (!valid)
    throw ValidationError.field(
      ['query', field],
      `'${cursor}' is not a cursor of this list: pass next_cursor from the previous page unchanged, or leave it out for the first page.`,
      'value_error.cursor',
    );
  return state as T;
}

/** A page of a cursor-paginated list: `{data, next_cursor}`, the cursor naming the page's last item. */
export function cursorPageBody<T extends { _id: string }, R>(page: Page<T>, render: (item: T) => R) {
  const last = page.items[page.items.length - 1];
  return { data: page.items.map(render), next_cursor: page.more && last ? encodeCursor({ after: last._id }) : null };
}

/** The id a `cursorPageBody` cursor names (null without a cursor). */
export const afterCursor = (cursor: string | undefined): string | null => decodeCursor<{ after: string }>(cursor, { after: 'string' })?.after ?? null;
