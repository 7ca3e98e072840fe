import { Type, type Static } from '@sinclair/typebox';
import { DateString, Nullable, OffsetPageQuery, Timestamp, Uuid } from './common';

const ClientUserId = Type.String({
  minLength: 1,
  maxLength: 255,
  description: 'Your id for this end user. Must not contain personal data such as an e-mail address or phone number.',
});
const TimeZone = Type.String({ minLength: 1, maxLength: 64, description: 'IANA time zone, e.g. Europe/Berlin.' });

export const UserCreateBody = Type.Object(
  {
    client_user_id: ClientUserId,
    fallback_time_zone: Type.Optional(Nullable(TimeZone)),
    fallback_birth_date: Type.Optional(Nullable(DateString('YYYY-mm-dd, not in the future.'))),
    ingestion_start: Type.Optional(Nullable(DateString('First day of data to ingest.'))),
    ingestion_end: Type.Optional(Nullable(DateString('Last day of data to ingest; on or after ingestion_start.'))),
  },
  { additionalProperties: false, $id: 'UserCreateBody' },
);
export type UserCreateBody = Static<typeof UserCreateBody>;

export const UserPatchBody = Type.Object(
  {
    client_user_id: Type.Optional(ClientUserId),
    fallback_time_zone: Type.Optional(Nullable(TimeZone)),
    fallback_birth_date: Type.Optional(Nullable(DateString())),
    ingestion_start: Type.Optional(Nullable(DateString())),
    ingestion_end: Type.Optional(Nullable(DateString())),
  },
  { additionalProperties: false, $id: 'UserPatchBody' },
);
export type UserPatchBody = Static<typeof UserPatchBody>;

export const UserIdParams = Type.Object({ user_id: Uuid('Service user id.') });
export const ClientUserIdParams = Type.Object({ client_user_id: ClientUserId });
export const UserListQuery = Type.Composite(
  [
    OffsetPageQuery,
    Type.Object({
      next_cursor: Type.Optional(
        Type.String({ description: "The previous page's `next_cursor`: the page after it, without counting again (`total` is the first page's)." }),
      ),
    }),
  ],
  { additionalProperties: true },
);
export const UndoDeleteQuery = Type.Object(
  {
    user_id: Type.Optional(Uuid('The deleted user. Give exactly one of user_id and client_user_id.')),
    client_user_id: Type.Optional(ClientUserId),
  },
  { additionalProperties: true },
);

export const SourceSummary = Type.Object({ name: Type.String(), slug: Type.String(), logo: Type.String() });

export const ConnectedSource = Type.Object({
  created_on: Timestamp(),
  source: SourceSummary,
  provider: Type.Optional(SourceSummary),
});

export const User = Type.Object(
  {
    user_id: Uuid(),
    team_id: Uuid(),
    client_user_id: Type.String(),
    created_on: Timestamp('ISO 8601 with offset.'),
    connected_sources: Type.Array(ConnectedSource),
    fallback_time_zone: Nullable(Type.Object({ id: Type.String(), source_slug: Type.String(), updated_at: Timestamp() })),
    fallback_birth_date: Nullable(Type.Object({ value: DateString(), source_slug: Type.String(), updated_at: Timestamp() })),
    ingestion_start: Nullable(DateString()),
    ingestion_end: Nullable(DateString()),
  },
  { $id: 'User' },
);
export type User = Static<typeof User>;

export const PaginatedUsers = Type.Object(
  {
    users: Type.Array(User),
    total: Type.Integer(),
    offset: Type.Integer(),
    limit: Type.Integer(),
    next_cursor: Nullable(
      Type.String({ description: 'Pass as `next_cursor` for the next page (faster than `offset` deep into a list); null on the last page.' }),
    ),
  },
  { $id: 'PaginatedUsersResponse' },
);

export const ClientUserIdConflict = Type.Object(
  {
    detail: Type.Object({
      error_type: Type.String(),
      error_message: Type.String(),
      user_id: Uuid(),
      created_on: Timestamp(),
    }),
  },
  { $id: 'ClientUserIDConflictResponse' },
);
