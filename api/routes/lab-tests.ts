import { randomUUID } from 'node:crypto';
import { Type, type Static } from '@sinclair/typebox';
import { badRequest, notFound, ValidationError } from '../../lib/platform/errors';
import { findLabTest, labTestView, labView, listLabTests, markerView, type AnyLabTest } from '../../lib/labs/catalogue-view';
import { CatalogueId, ErrorDetail, HTTPValidationError, MAX_PAGE, Nullable, StringEnum, Uuid } from '../../schemas/common';
import { uncoveredMarkers } from '../../lib/labs/lab-accounts';
import { labAccountScope } from '../../lib/labs/lab-accounts-store';
import { COLLECTION_METHODS } from '../../lib/labs/statuses';
import type { AppDeps } from '../deps';
import { defineRoute } from '../route';
import { decodeCursor, encodeCursor } from '../cursors';

const tags = ['Lab tests'];
const errors = {
  404: { description: 'Unknown lab test', schema: ErrorDetail },
  422: { description: 'Validation error', schema: HTTPValidationError },
};
const open = { additionalProperties: true };

const LabTestFilters = {
  lab_slug: Type.Optional(Type.String()),
  collection_method: Type.Optional(StringEnum(COLLECTION_METHODS)),
  status: Type.Optional(StringEnum(['active', 'pending_approval', 'inactive'] as const)),
  marker_ids: Type.Optional(Type.Array(CatalogueId(), { maxItems: 100, description: 'Tests containing all of these markers.' })),
  name: Type.Optional(Type.String({ description: 'Case-insensitive part of the name.' })),
  generation_method: StringEnum(['auto', 'manual', 'all'] as const, { default: 'all', description: 'manual: your own tests; auto: the catalogue; all: both.' }),
  order_key: StringEnum(['price', 'created_at', 'updated_at', 'name'] as const, { default: 'created_at' }),
  order_direction: StringEnum(['asc', 'desc'] as const, { default: 'asc' }),
};
const LabTestListQuery = Type.Object(LabTestFilters, open);
const LabTestPageQuery = Type.Object(
  {
    ...LabTestFilters,
    lab_test_limit: Type.Integer({ minimum: 1, maximum: 100, default: 50 }),
    next_cursor: Type.Optional(Type.String({ description: 'From the previous page.' })),
  },
  open,
);
const LabTestParams = Type.Object({ lab_test_id: Type.String({ minLength: 1, maxLength: 64 }) });
const MarkerQuery = Type.Object(
  {
    lab_id: Type.Optional(Type.Array(CatalogueId(), { maxItems: 100 })),
    lab_slug: Type.Optional(Type.String()),
    name: Type.Optional(Type.String()),
    a_la_carte_enabled: Type.Optional(Type.Boolean()),
    page: Type.Integer({ minimum: 1, maximum: MAX_PAGE, default: 1 }),
    size: Type.Integer({ minimum: 1, maximum: 100, default: 50 }),
  },
  open,
);
const CreateLabTestBody = Type.Object(
  {
    name: Type.String({ minLength: 3, maxLength: 100 }),
    method: StringEnum(COLLECTION_METHODS),
    description: Type.String({ minLength: 1, maxLength: 1000 }),
    marker_ids: Type.Array(CatalogueId(), { minItems: 1, maxItems: 50, uniqueItems: true }),
    lab_slug: Type.Optional(Type.String()),
    lab_account_id: Type.Optional(
      Nullable(
        Uuid(
          "Your organisation's lab account (management API) that orders of this test go through: its lab is the test's, and it must have an " +
            'order code for every marker. Absent: orders go to the sandbox lab (unless an order names an account).',
        ),
      ),
    ),
    fasting: Type.Optional(Type.Boolean({ default: false })),
  },
  { additionalProperties: false },
);
const PatchLabTestBody = Type.Object(
  { name: Type.Optional(Type.String({ minLength: 3, maxLength: 100 })), active: Type.Optional(Type.Boolean()) },
  { additionalProperties: false, minProperties: 1 },
);
const LabTest = Type.Object(
  { id: Type.String(), slug: Type.String(), name: Type.String(), method: Type.String(), status: Type.String(), markers: Type.Array(Type.Object({}, open)) },
  { ...open, $id: 'ClientFacingLabTest' },
);

const LabWithConnection = Type.Object(
  {
    id: Type.Integer(),
    slug: Type.String(),
    name: Type.String(),
    connection: StringEnum(['lab_account', 'sandbox'] as const, {
      description: 'lab_account: orders can go to this lab through an account of your organisation; sandbox: simulated only.',
    }),
    lab_account_ids: Type.Array(Uuid(), { description: "Your organisation's accounts with this lab (oldest first)." }),
  },
  { ...open, $id: 'ClientFacingLab' },
);

const slugOf = (name: string) =>
  name
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-|-$/g, '');

type Filters = Static<typeof LabTestListQuery>;

/** The team's tests, filtered and sorted as asked (catalogue and own tests are one list). */
async function filteredTests(deps: AppDeps, teamId: string, q: Filters): Promise<AnyLabTest[]> {
  const all = await listLabTests(deps.labCatalogue, deps.repos, teamId);
  const lab = q.lab_slug ? deps.labCatalogue.labBySlug(q.lab_slug) : undefined;
  if (q.lab_slug && !lab) return [];
  const name = q.name?.toLowerCase();
  const tests = all.filter(
    (t) =>
      (q.generation_method === 'all' || (q.generation_method === 'manual') === t.team_owned) &&
      (!lab || t.lab_id === lab.id) &&
      (!q.collection_method || t.method === q.collection_method) &&
      (!q.status || t.status === q.status) &&
      (!q.marker_ids?.length || q.marker_ids.every((id: number) => t.marker_ids.includes(id))) &&
      (!name || t.name.toLowerCase().includes(name)),
  );
  const key = q.order_key as 'price' | 'created_at' | 'updated_at' | 'name';
  const dir = q.order_direction === 'desc' ? -1 : 1;
  return tests.sort((a, b) => (sortValue(a, key) < sortValue(b, key) ? -dir : sortValue(a, key) > sortValue(b, key) ? dir : a.id < b.id ? -dir : dir));
}

const sortValue = (t: AnyLabTest, key: 'price' | 'created_at' | 'updated_at' | 'name') =>
  key === 'price' ? t.price : key === 'name' ? t.name.toLowerCase() : t[key].getTime();

/** Keyset cursor (api/cursors.ts): the order key, sort value and id of the last item of a page (stable while tests are added). */
type LabTestCursor = { key: string; value: number | string; after: string };
const encodeLabTestCursor = (t: AnyLabTest, key: string) => encodeCursor({ key, value: sortValue(t, key as never), after: t.id } satisfies LabTestCursor);
function afterCursor(tests: AnyLabTest[], cursor: string, key: string, dir: 1 | -1): AnyLabTest[] {
  const position = decodeCursor<{ key: string; after: string }>(cursor, { key: 'string', after: 'string' }) as LabTestCursor;
  if (position.key !== key || !['number', 'string'].includes(typeof position.value)) {
    throw ValidationError.field(
      ['query', 'next_cursor'],
      'next_cursor is not a cursor of this listing (was order_key changed?). Start again without it.',
      'value_error.cursor',
    );
  }
  const { value, after: id } = position;
  return tests.filter((t) => {
    const v = sortValue(t, key as never);
    return dir === 1 ? v > value || (v === value && t.id > id) : v < value || (v === value && t.id < id);
  });
}

async function ownTest(deps: AppDeps, teamId: string, id: string) {
  const test = await findLabTest(deps.labCatalogue, deps.repos, teamId, id);
  if (!test) throw notFound(`Lab test ${id} not found.`);
  return test;
}

export const labTestRoutes = [
  defineRoute({
    operationId: 'listLabTestsPaginated',
    method: 'get',
    path: '/v3/lab_test',
    summary: 'List lab tests (paginated)',
    description: "The catalogue's tests and your own. Page with `lab_test_limit` and the `next_cursor` of the previous page (null on the last).",
    tags,
    auth: 'team',
    query: LabTestPageQuery,
    responses: { 200: { description: 'A page of lab tests' }, 422: errors[422] },
    async handler({ query, auth, deps }) {
      let tests = await filteredTests(deps, auth.teamId, query);
      if (query.next_cursor) tests = afterCursor(tests, query.next_cursor, query.order_key, query.order_direction === 'desc' ? -1 : 1);
      const page = tests.slice(0, query.lab_test_limit);
      const more = tests.length > page.length;
      return {
        body: {
          data: page.map((t) => labTestView(t, deps.labCatalogue)),
          next_cursor: more ? encodeLabTestCursor(page[page.length - 1], query.order_key) : null,
        },
      };
    },
  }),
  defineRoute({
    operationId: 'listLabTests',
    method: 'get',
    path: '/v3/lab_tests',
    summary: 'List lab tests (deprecated)',
    description: 'Deprecated in favour of the paginated GET /v3/lab_test: the whole list at once.',
    tags,
    auth: 'team',
    deprecated: true,
    query: LabTestListQuery,
    responses: { 200: { description: 'Every lab test', schema: Type.Array(LabTest) }, 422: errors[422] },
    async handler({ query, auth, deps }) {
      const tests = await filteredTests(deps, auth.teamId, query);
      return {
        body: tests.map((t) => labTestView(t, deps.labCatalogue)),
        headers: { Deprecation: 'true', Link: '</v3/lab_test>; rel="successor-version"' },
      };
    },
  }),
  defineRoute({
    operationId: 'listMarkers',
    method: 'get',
    path: '/v3/lab_tests/markers',
    summary: 'List markers',
    description: 'Biomarkers and panels that lab tests are composed of (`page`, `size` ≤ 100).',
    tags,
    auth: 'team',
    query: MarkerQuery,
    responses: { 200: { description: 'A page of markers' }, 422: errors[422] },
    handler({ query, deps }) {
      const cat = deps.labCatalogue;
      const lab = query.lab_slug ? cat.labBySlug(query.lab_slug) : undefined;
      const name = query.name?.toLowerCase();
      const markers = cat.markers.filter(
        (m) =>
          (!query.lab_id?.length || query.lab_id.includes(m.lab_id)) &&
          (!query.lab_slug || m.lab_id === lab?.id) &&
          (query.a_la_carte_enabled === undefined || m.a_la_carte_enabled === query.a_la_carte_enabled) &&
          (!name || m.name.toLowerCase().includes(name)),
      );
      const start = (query.page - 1) * query.size;
      return {
        body: {
          markers: markers.slice(start, start + query.size).map((m) => markerView(m, cat)),
          total: markers.length,
          page: query.page,
          size: query.size,
          pages: Math.ceil(markers.length / query.size),
        },
      };
    },
  }),
  defineRoute({
    operationId: 'listLabs',
    method: 'get',
    path: '/v3/lab_tests/labs',
    summary: 'List labs',
    description:
      "The catalogue's labs. `connection` says whether this deployment sends a lab orders (`lab_account`: your organisation has an account " +
      'with it, `lab_account_ids`; orders of tests naming one go to the lab) or only simulates them (`sandbox`).',
    tags,
    auth: 'team',
    responses: { 200: { description: 'Labs', schema: Type.Array(LabWithConnection) } },
    async handler({ auth, deps }) {
      const accounts = await deps.repos.labAccounts.listForOrg(auth.orgId, deps.config.DEPLOYMENT_ENVIRONMENT, deps.config.DEPLOYMENT_REGION);
      return {
        body: deps.labCatalogue.labs.map((lab) => {
          const ids = accounts.filter((a) => a.lab_slug === lab.slug).map((a) => a._id);
          return { ...labView(lab), connection: ids.length ? 'lab_account' : 'sandbox', lab_account_ids: ids };
        }),
      };
    },
  }),
  defineRoute({
    operationId: 'getLabTest',
    method: 'get',
    path: '/v3/lab_tests/{lab_test_id}',
    summary: 'Get a lab test',
    tags,
    auth: 'team',
    params: LabTestParams,
    responses: { 200: { description: 'The lab test', schema: LabTest }, 404: errors[404] },
    async handler({ params, auth, deps }) {
      return { body: labTestView(await ownTest(deps, auth.teamId, params.lab_test_id), deps.labCatalogue) };
    },
  }),
  defineRoute({
    operationId: 'getLabTestMarkers',
    method: 'get',
    path: '/v3/lab_tests/{lab_test_id}/markers',
    summary: 'Markers of a lab test',
    tags,
    auth: 'team',
    params: LabTestParams,
    responses: { 200: { description: 'The markers' }, 404: errors[404] },
    async handler({ params, auth, deps }) {
      const test = await ownTest(deps, auth.teamId, params.lab_test_id);
      const markers = labTestView(test, deps.labCatalogue).markers;
      return { body: { markers, total: markers.length, page: 1, size: markers.length, pages: 1 } };
    },
  }),
  defineRoute({
    operationId: 'createLabTest',
    method: 'post',
    path: '/v3/lab_tests',
    summary: 'Create a lab test',
    description: 'Composes your own test from markers of one lab that offers the collection method.',
    tags,
    auth: 'team',
    body: CreateLabTestBody,
    responses: { 200: { description: 'The new lab test', schema: LabTest }, 400: { description: 'Name taken', schema: ErrorDetail }, 422: errors[422] },
    async handler({ body, auth, deps }) {
      const cat = deps.labCatalogue;
      const markers = body.marker_ids.map((id) => cat.markerById(id));
      const unknown = body.marker_ids.filter((_, i) => !markers[i]);
      if (unknown.length)
        throw ValidationError.field(
          ['body', 'marker_ids'],
          `Unknown marker id(s): ${unknown.join(', ')}. List markers with GET /v3/lab_tests/markers.`,
          'value_error.marker',
        );
      const account = body.lab_account_id ? await deps.repos.labAccounts.findInScope(labAccountScope(auth.orgId, deps.config), body.lab_account_id) : null;
      if (body.lab_account_id && !account) {
        throw ValidationError.field(
          ['body', 'lab_account_id'],
          `Lab account ${body.lab_account_id} not found in your organisation (list them with the management API).`,
          'value_error.lab_account',
        );
      }
      const lab = body.lab_slug ? cat.labBySlug(body.lab_slug) : account ? cat.labById(account.lab_id) : cat.labById(markers[0]!.lab_id);
      if (!lab) throw ValidationError.field(['body', 'lab_slug'], `Unknown lab '${body.lab_slug}'. List labs with GET /v3/lab_tests/labs.`, 'value_error.lab');
      if (account && account.lab_id !== lab.id) {
        throw ValidationError.field(
          ['body', 'lab_account_id'],
          `Lab account ${account._id} is with ${account.lab_slug}, not ${lab.slug}.`,
          'value_error.lab_account_lab',
        );
      }
      if (markers.some((m) => m!.lab_id !== lab.id))
        throw ValidationError.field(['body', 'marker_ids'], `All markers must belong to ${lab.name} (lab ${lab.id}).`, 'value_error.marker_lab');
      if (!lab.collection_methods.includes(body.method)) {
        throw ValidationError.field(
          ['body', 'method'],
          `${lab.name} does not offer ${body.method}; it offers ${lab.collection_methods.join(', ')}.`,
          'value_error.method',
        );
      }
      if (account) {
        // The lab must know each marker's order code, or no order of the test could be sent: refused now, naming the markers.
        const uncovered = uncoveredMarkers(account, body.marker_ids);
        if (uncovered.length) {
          throw new ValidationError(
            uncovered.map((id) => ({
              loc: ['body', 'marker_ids', body.marker_ids.indexOf(id)],
              msg: `Marker ${id} (${cat.markerById(id)!.slug}) has no order code in lab account ${account._id} (${account.name}); add it to the account's order_codes.`,
              type: 'value_error.marker_not_covered',
            })),
          );
        }
      }
      const now = new Date();
      const priced = markers.reduce((sum, m) => sum + Number(m!.price), 0);
      const created = await deps.repos.labTests.create({
        _id: randomUUID(),
        team_id: auth.teamId,
        slug: slugOf(body.name),
        name: body.name,
        description: body.description,
        method: body.method,
        sample_type: lab.sample_types[0],
        lab_id: lab.id,
        marker_ids: body.marker_ids,
        lab_account_id: account?._id ?? null,
        fasting: body.fasting ?? false,
        status: 'active',
        price: Math.round(priced * 100) / 100,
        common_tat_days: Math.max(...markers.map((m) => m!.common_tat_days)),
        worst_case_tat_days: Math.max(...markers.map((m) => m!.worst_case_tat_days)),
        created_at: now,
        updated_at: now,
      });
      if ('slug_taken' in created) throw badRequest(`You already have a lab test named like '${body.name}'; choose another name.`);
      return { body: labTestView((await findLabTest(cat, deps.repos, auth.teamId, created.created._id))!, cat) };
    },
  }),
  defineRoute({
    operationId: 'updateLabTest',
    method: 'patch',
    path: '/v3/lab_tests/{lab_test_id}',
    summary: 'Rename or (de)activate your lab test',
    tags,
    auth: 'team',
    params: LabTestParams,
    body: PatchLabTestBody,
    responses: {
      200: { description: 'Updated', schema: LabTest },
      400: { description: 'Catalogue tests cannot be changed', schema: ErrorDetail },
      404: errors[404],
      422: errors[422],
    },
    async handler({ params, body, auth, deps }) {
      const test = await ownTest(deps, auth.teamId, params.lab_test_id);
      if (!test.team_owned) throw badRequest(`Lab test ${test.id} is part of the shared catalogue; only your own tests can be changed.`);
      const changes = {
        ...(body.name !== undefined ? { name: body.name, slug: slugOf(body.name) } : {}),
        ...(body.active !== undefined ? { status: body.active ? ('active' as const) : ('inactive' as const) } : {}),
      };
      const updated = await deps.repos.labTests.update(auth.teamId, test.id, changes);
      if (updated === 'slug_taken') throw badRequest(`You already have a lab test named like '${body.name}'; choose another name.`);
      if (!updated) throw notFound(`Lab test ${test.id} not found.`);
      return { body: labTestView((await findLabTest(deps.labCatalogue, deps.repos, auth.teamId, test.id))!, deps.labCatalogue) };
    },
  }),
];
