import { Type } from '@sinclair/typebox';
import { ApiError, badRequest, notFound, ValidationError } from '../../lib/platform/errors';
import { timeOrderedUuid } from '../../lib/platform/keys';
import type { UserChanges, UserDoc } from '../../lib/users/store';
import { canonicalTimeZone, isoWithOffset, todayUtc } from '../../lib/platform/time';
import { ErrorDetail, HTTPValidationError, SuccessResponse } from '../../schemas/common';
import {
  ClientUserIdConflict,
  ClientUserIdParams,
  PaginatedUsers,
  UndoDeleteQuery,
  User,
  UserCreateBody,
  UserIdParams,
  UserListQuery,
  UserPatchBody,
} from '../../schemas/user';
import type { FieldError } from '../../schemas/validator';
import { defineRoute } from '../route';
import { decodeCursor, encodeCursor } from '../cursors';
import { readableUser, toUser } from '../../lib/users/views';
import { scheduleUserDeletion, SCHEDULED_FOR_DELETION, undoUserDeletion } from '../../lib/users/deletion-client';

const tags = ['User'];
const MANUAL_SOURCE = 'manual';
const SCHEDULED_ON_READ = 'You have scheduled this user for deletion.';

const conflict = (existing: UserDoc) =>
  badRequest({
    error_type: 'INVALID_REQUEST',
    error_message: 'Client user id already exists.',
    user_id: existing._id,
    created_on: isoWithOffset(existing.created_on),
  });

const EMAIL = /[^\s@]+@[^\s@]+\.[A-Za-z]{2,}/;
const INTERNATIONAL_PHONE = /^\+[\d\s().-]{7,}$/;
const NANP_PHONE = /^(\(\d{3}\)\s?|\d{3}[\s.-])\d{3}[\s.-]\d{4}$/;

/** Personal data is refused in client_user_id: e-mail addresses and phone numbers (not plain numeric ids). */
function personalDataIn(clientUserId: string): string | null {
  if (EMAIL.test(clientUserId)) return 'an e-mail address';
  const digits = clientUserId.replace(/\D/g, '').length;
  if ((INTERNATIONAL_PHONE.test(clientUserId) && digits >= 7 && digits <= 15) || NANP_PHONE.test(clientUserId)) {
    return 'a phone number';
  }
  return null;
}

type UserFields = Omit<UserChanges, 'fallback_time_zone' | 'fallback_birth_date'> & {
  fallback_time_zone?: string | null;
  fallback_birth_date?: string | null;
};

/** Rules JSON Schema cannot express; run at the edge right after schema validation. */
function checkUserFields(fields: UserFields, current?: UserDoc): { timeZone?: string | null } {
  const errors: FieldError[] = [];
  let timeZone: string | null | undefined = fields.fallback_time_zone;
  if (fields.client_user_id !== undefined) {
    const kind = personalDataIn(fields.client_user_id);
    if (kind) {
      errors.push({
        loc: ['body', 'client_user_id'],
        msg: `client_user_id looks like ${kind}. Personal data is not allowed here: use an opaque id from your own system.`,
        type: 'value_error.personal_data',
      });
    }
  }
  if (typeof fields.fallback_time_zone === 'string') {
    timeZone = canonicalTimeZone(fields.fallback_time_zone);
    if (!timeZone) {
      errors.push({
        loc: ['body', 'fallback_time_zone'],
        msg: `'${fields.fallback_time_zone}' is not an IANA time zone identifier (e.g. Europe/Berlin, America/New_York).`,
        type: 'value_error.time_zone',
      });
    }
  }
  if (typeof fields.fallback_birth_date === 'string' && fields.fallback_birth_date > todayUtc()) {
    errors.push({ loc: ['body', 'fallback_birth_date'], msg: 'fallback_birth_date must not be in the future.', type: 'value_error.date_in_future' });
  }
  const start = fields.ingestion_start !== undefined ? fields.ingestion_start : current?.ingestion_start;
  const end = fields.ingestion_end !== undefined ? fields.ingestion_end : current?.ingestion_end;
  if (start && end && start > end) {
    errors.push({
      loc: ['body', fields.ingestion_end !== undefined ? 'ingestion_end' : 'ingestion_start'],
      msg: `ingestion_start (${start}) must be on or before ingestion_end (${end}).`,
      type: 'value_error.ingestion_bounds',
    });
  }
  if (errors.length) throw new ValidationError(errors);
  return { timeZone };
}

const errors = {
  404: { description: 'Unknown user, or scheduled for deletion', schema: ErrorDetail },
  422: { description: 'Validation error', schema: HTTPValidationError },
};
const busy = { description: 'A concurrent change or the undo did not finish in time: retry', schema: ErrorDetail };

/** Where the next page of `GET /v2/user/` starts, and the count the first page made. */
type UserListCursor = { after: string; total: number; offset: number };

export const userRoutes = [
  defineRoute({
    operationId: 'createUser',
    method: 'post',
    path: '/v2/user/',
    summary: 'Create user',
    description: 'Creates an end user. Safely repeatable: if the client_user_id exists, the 400 body names the existing user_id and created_on.',
    tags,
    auth: 'team',
    body: UserCreateBody,
    responses: {
      200: { description: 'The new user', schema: User },
      400: { description: 'client_user_id already exists', schema: ClientUserIdConflict },
      422: errors[422],
    },
    async handler({ body, auth, deps }) {
      const { timeZone } = checkUserFields(body);
      const now = new Date();
      const doc: UserDoc = {
        _id: timeOrderedUuid(),
        team_id: auth.teamId,
        client_user_id: body.client_user_id,
        client_user_key: body.client_user_id,
        status: 'active',
        created_on: now,
        updated_at: now,
        fallback_time_zone: timeZone ? { id: timeZone, source_slug: MANUAL_SOURCE, updated_at: now } : null,
        fallback_birth_date: body.fallback_birth_date ? { value: body.fallback_birth_date, source_slug: MANUAL_SOURCE, updated_at: now } : null,
        ingestion_start: body.ingestion_start ?? null,
        ingestion_end: body.ingestion_end ?? null,
        connected_sources: [],
      };
      const result = await deps.repos.users.create(doc);
      if ('conflict' in result) throw conflict(result.conflict);
      // A DELETE of the team may have begun after this request was authenticated: see beginTeamDeletion.
      if (!(await deps.repos.tenancy.teamAcceptsNewData(auth.teamId))) {
        await deps.repos.users.withdrawCreated(result.created);
        throw new ApiError(409, 'Your team is being deleted; the user was not created.');
      }
      return { body: toUser(result.created) };
    },
  }),
  defineRoute({
    operationId: 'listUsers',
    method: 'get',
    path: '/v2/user/',
    summary: 'List users',
    description:
      "The team's users, oldest first (by id: ids are time-ordered UUIDs, v7; users that earlier versions stored with random v4 ids sort " +
      'among the others by id). Users scheduled for deletion are not listed. Pages by `offset`/`limit`, or follow `next_cursor`.',
    tags,
    auth: 'team',
    query: UserListQuery,
    responses: { 200: { description: 'A page of users', schema: PaginatedUsers }, 422: errors[422] },
    async handler({ query, auth, deps }) {
      const cursor = decodeCursor<UserListCursor>(query.next_cursor, { after: 'string', total: 'number', offset: 'number' });
      const {
        users,
        more,
        total: counted,
      } = await deps.repos.users.listActive(
        auth.teamId,
        cursor
          ? { after: cursor.after, offset: 0, limit: query.limit, countTotal: false, knownTotal: cursor.total }
          : { offset: query.offset, limit: query.limit, countTotal: true },
      );
      const total = counted ?? cursor!.total;
      const offset = cursor?.offset ?? query.offset;
      const next_cursor = more ? encodeCursor({ after: users[users.length - 1]._id, total, offset: offset + users.length } satisfies UserListCursor) : null;
      return { body: { users: users.map(toUser), total, offset, limit: query.limit, next_cursor } };
    },
  }),
  defineRoute({
    operationId: 'resolveUser',
    method: 'get',
    path: '/v2/user/resolve/{client_user_id}',
    summary: 'Get user by client_user_id',
    tags,
    auth: 'team',
    params: ClientUserIdParams,
    responses: { 200: { description: 'The user', schema: User }, ...errors },
    async handler({ params, auth, deps }) {
      const user = await deps.repos.users.findActiveByClientUserId(auth.teamId, params.client_user_id);
      if (!user) {
        const pending = await deps.repos.users.findPendingByClientUserId(auth.teamId, params.client_user_id);
        throw notFound(pending ? SCHEDULED_ON_READ : `No user with client_user_id '${params.client_user_id}'.`);
      }
      return { body: toUser(user) };
    },
  }),
  defineRoute({
    operationId: 'undoDeleteUser',
    method: 'post',
    path: '/v2/user/undo_delete',
    summary: 'Undo user deletion',
    description:
      'Restores a deleted user within its 7-day grace period. Give exactly one of user_id and client_user_id as a query parameter. ' +
      'Connections are not restored. Impossible once a new user holds the same client_user_id.',
    tags,
    auth: 'team',
    query: UndoDeleteQuery,
    responses: {
      200: { description: 'Restored', schema: SuccessResponse },
      400: { description: 'Not restorable (not deleted, grace period over, client_user_id taken)', schema: ErrorDetail },
      ...errors,
      503: busy,
    },
    async handler({ query, auth, deps, requestId }) {
      if ((query.user_id === undefined) === (query.client_user_id === undefined)) {
        throw ValidationError.field(['query'], 'Give exactly one of user_id and client_user_id.', 'value_error.exactly_one');
      }
      await undoUserDeletion(deps, auth.teamId, query, requestId);
      return { body: { success: true } };
    },
  }),
  defineRoute({
    operationId: 'getUser',
    method: 'get',
    path: '/v2/user/{user_id}',
    summary: 'Get user',
    tags,
    auth: 'team',
    params: UserIdParams,
    responses: { 200: { description: 'The user', schema: User }, ...errors },
    async handler({ params, auth, deps }) {
      const user = readableUser(await deps.repos.users.find(auth.teamId, params.user_id), SCHEDULED_ON_READ);
      return { body: toUser(user) };
    },
  }),
  defineRoute({
    operationId: 'patchUser',
    method: 'patch',
    path: '/v2/user/{user_id}',
    summary: 'Update user',
    description: 'Changes the given fields (null clears an optional one). An empty patch is a 400.',
    tags,
    auth: 'team',
    params: UserIdParams,
    body: UserPatchBody,
    responses: {
      204: { description: 'Updated' },
      400: {
        description: '"Nothing to patch" (string detail), or client_user_id taken (conflict body)',
        schema: Type.Union([ErrorDetail, ClientUserIdConflict]),
      },
      ...errors,
      503: busy,
    },
    async handler({ params, body, auth, deps }) {
      if (Object.keys(body).length === 0) throw badRequest('Nothing to patch');
      const current = readableUser(await deps.repos.users.find(auth.teamId, params.user_id), SCHEDULED_FOR_DELETION);
      const { timeZone } = checkUserFields(body, current);
      const now = new Date();
      const changes: UserChanges = {};
      if (body.client_user_id !== undefined) changes.client_user_id = body.client_user_id;
      if (body.fallback_time_zone !== undefined) {
        changes.fallback_time_zone = timeZone ? { id: timeZone, source_slug: MANUAL_SOURCE, updated_at: now } : null;
      }
      if (body.fallback_birth_date !== undefined) {
        changes.fallback_birth_date = body.fallback_birth_date ? { value: body.fallback_birth_date, source_slug: MANUAL_SOURCE, updated_at: now } : null;
      }
      if (body.ingestion_start !== undefined) changes.ingestion_start = body.ingestion_start;
      if (body.ingestion_end !== undefined) changes.ingestion_end = body.ingestion_end;
      const result = await deps.repos.users.patchActive(auth.teamId, params.user_id, changes);
      if (!result) throw notFound(SCHEDULED_FOR_DELETION);
      if ('conflict' in result && result.conflict._id !== params.user_id) throw conflict(result.conflict);
      return { status: 204 };
    },
  }),
  defineRoute({
    operationId: 'deleteUser',
    method: 'delete',
    path: '/v2/user/{user_id}',
    summary: 'Delete user',
    description:
      'Hides the user at once and deregisters its connections; all its data is erased after a 7-day grace period, during which POST /v2/user/undo_delete restores it.',
    tags,
    auth: 'team',
    params: UserIdParams,
    responses: { 200: { description: 'Scheduled for deletion', schema: SuccessResponse }, ...errors, 503: busy },
    async handler({ params, auth, deps, requestId }) {
      await scheduleUserDeletion(deps, auth.teamId, params.user_id, requestId);
      return { body: { success: true } };
    },
  }),
];
