import { Type, type TSchema, type TUnsafe } from '@sinclair/typebox';

/** A closed string enumeration (`enum` in JSON Schema, so errors list the allowed values). */
export const StringEnum = <const T extends readonly string[]>(values: T, options: Record<string, unknown> = {}): TUnsafe<T[number]> =>
  Type.Unsafe<T[number]>({ type: 'string', enum: [...values], ...options });

export const Uuid = (description?: string) => Type.String({ format: 'uuid', description });
export const DateString = (description?: string) => Type.String({ format: 'date', description });
export const Timestamp = (description?: string) => Type.String({ format: 'date-time', description });
export const Nullable = <T extends TSchema>(schema: T) => Type.Union([schema, Type.Null()]);

export const ErrorDetail = Type.Object({ detail: Type.String() }, { $id: 'ErrorDetail', description: 'Generic error body.' });

export const ValidationErrorItem = Type.Object({
  loc: Type.Array(Type.Union([Type.String(), Type.Integer()])),
  msg: Type.String(),
  type: Type.String(),
});

export const HTTPValidationError = Type.Object(
  { detail: Type.Array(ValidationErrorItem) },
  { $id: 'HTTPValidationError', description: '422: what was wrong and where (body, query, path or header).' },
);

export const SuccessResponse = Type.Object({ success: Type.Boolean() }, { $id: 'UserSuccessResponse' });

/** Bounds of paging parameters: every integer a client sends has a maximum (a page past them is empty anyway). */
export const MAX_OFFSET = 1_000_000_000;
export const MAX_PAGE = 1_000_000;
/** Catalogue ids (markers, labs) are positive 32-bit integers. */
export const CatalogueId = (options: Record<string, unknown> = {}) => Type.Integer({ minimum: 1, maximum: 2147483647, ...options });

export const OffsetPageQuery = Type.Object(
  {
    offset: Type.Integer({ minimum: 0, maximum: MAX_OFFSET, default: 0 }),
    limit: Type.Integer({ minimum: 1, maximum: 500, default: 100 }),
  },
  { additionalProperties: true },
);

export const CursorPageQuery = Type.Object(
  {
    next_cursor: Type.Optional(Type.String({ description: 'Cursor from the previous page.' })),
    limit: Type.Integer({ minimum: 1, maximum: 100, default: 50 }),
  },
  { additionalProperties: true },
);
