import { forbidden, notFound, ValidationError } from '../../lib/platform/errors';
import { timeOrderedUuid } from '../../lib/platform/keys';
import type { InsuranceDoc } from '../../lib/insurance/store';
import type { PayorEntry } from '../../schemas/insurance';
import { ErrorDetail, HTTPValidationError } from '../../schemas/common';
import {
  CreateInsuranceBody,
  InsuranceRecord,
  LatestInsuranceQuery,
  PayorSearchBody,
  PayorSearchQuery,
  PayorSearchResults,
  PayorSearchResultsDeprecated,
} from '../../schemas/insurance';
import { UserIdParams } from '../../schemas/user';
import type { AppDeps } from '../deps';
import { defineRoute } from '../route';
import { activeUser } from '../../lib/users/views';

const tags = ['Insurance (closed beta)'];
const CLOSED_BETA = 'closed_beta_feature_not_enabled';

const errors = {
  403: { description: 'The team is not enabled for the insurance closed beta', schema: ErrorDetail },
  404: { description: 'Unknown user, or no record', schema: ErrorDetail },
  422: { description: 'Validation error', schema: HTTPValidationError },
};

/**
 * The closed-beta gate: a 403 with a JSON body naming the feature (the original answered plain text, later
 * JSON). An org admin enables it per team (`feature_flags.insurance`, management API).
 */
async function assertInsuranceBeta(deps: AppDeps, teamId: string): Promise<void> {
  const team = await deps.repos.tenancy.findTeamById(teamId);
  if (!team?.feature_flags.insurance) {
    throw forbidden(
      `Insurance records are a closed beta feature (${CLOSED_BETA}: insurance) and this team is not enabled for it. ` +
        'An organisation admin can enable it with PATCH /v1/org/{org_id}/team/{team_id} {"feature_flags": {"insurance": true}}.',
    );
  }
}

type Address = InsuranceRecord['insured']['address'];
/** Optional fields spelled out (second_line "" by default, the others null), so stored records are complete. */
const fullAddress = (a: Address): Address => ({ ...a, second_line: a.second_line ?? '', access_notes: a.access_notes ?? null });
const fullGuarantor = (g: NonNullable<InsuranceRecord['guarantor']>) => ({
  ...g,
  address: fullAddress(g.address),
  household_income: g.household_income ?? null,
  household_size: g.household_size ?? null,
  email: g.email ?? null,
});

const recordView = (doc: InsuranceDoc): InsuranceRecord => ({
  member_id: doc.member_id,
  payor_code: doc.payor_code,
  relationship: doc.relationship,
  insured: doc.insured,
  company: doc.company,
  group_id: doc.group_id,
  guarantor: doc.guarantor,
  is_primary: doc.is_primary,
});

const payorView = (entry: PayorEntry) => ({ name: entry.name, aliases: entry.aliases, org_address: entry.org_address, source: 'platform' });

export const insuranceRoutes = [
  defineRoute({
    operationId: 'createInsurance',
    method: 'post',
    path: '/v2/user/{user_id}/insurance',
    summary: 'Create insurance record (closed beta)',
    description:
      'Always creates a new record; ordering and `GET .../insurance/latest` use the most recent one. `company` (the payor) ' +
      "comes from the payor catalogue by `payor_code` (GET /v3/insurance/search/payor), or from the body's `company` " +
      'for a payor the catalogue does not hold. A guarantor is required unless relationship is Self. ' +
      'Member, group, insured and guarantor details are stored encrypted.',
    tags,
    auth: 'team',
    params: UserIdParams,
    body: CreateInsuranceBody,
    responses: { 200: { description: 'The record', schema: InsuranceRecord }, ...errors },
    async handler({ params, body, auth, deps }) {
      await assertInsuranceBeta(deps, auth.teamId);
      const user = await activeUser(deps, auth.teamId, params.user_id);
      const payor = deps.payors.byCode(body.payor_code);
      const company = body.company ?? (payor && { name: payor.name, address: payor.org_address });
      if (!company) {
        throw new ValidationError(
          ['payor_code', 'company'].map((field) => ({
            loc: ['body', field],
            msg: `Unknown payor_code '${body.payor_code}': use a code from GET /v3/insurance/search/payor (e.g. MEDFED, MAIDFED), or send the payor's company {name, address}.`,
            type: 'value_error.unknown_payor',
          })),
        );
      }
      // Time-ordered id: two records created in the same millisecond still sort by creation (`latest`).
      const now = new Date();
      const doc: InsuranceDoc = {
        _id: timeOrderedUuid(now.getTime()),
        team_id: auth.teamId,
        user_id: user._id,
        member_id: body.member_id,
        payor_code: payor?.payor_code ?? body.payor_code,
        relationship: body.relationship,
        insured: { ...body.insured, address: fullAddress(body.insured.address) },
        company: { ...company, address: fullAddress(company.address) },
        group_id: body.group_id ?? null,
        guarantor: body.guarantor ? fullGuarantor(body.guarantor) : null,
        is_primary: body.is_primary,
        created_at: now,
      };
      await deps.repos.insurance.create(doc);
      return { body: recordView(doc) };
    },
  }),
  defineRoute({
    operationId: 'getLatestInsurance',
    method: 'get',
    path: '/v2/user/{user_id}/insurance/latest',
    summary: 'Get latest insurance (closed beta)',
    description: 'The most recently created record with this primacy (`is_primary`, default true).',
    tags,
    auth: 'team',
    params: UserIdParams,
    query: LatestInsuranceQuery,
    responses: { 200: { description: 'The record', schema: InsuranceRecord }, ...errors },
    async handler({ params, query, auth, deps }) {
      await assertInsuranceBeta(deps, auth.teamId);
      const user = await activeUser(deps, auth.teamId, params.user_id);
      const doc = await deps.repos.insurance.latest(auth.teamId, user._id, query.is_primary);
      if (!doc) throw notFound(`User ${user._id} has no ${query.is_primary ? 'primary' : 'secondary'} insurance record.`);
      return { body: recordView(doc) };
    },
  }),
  defineRoute({
    operationId: 'searchPayors',
    method: 'get',
    path: '/v3/insurance/search/payor',
    summary: 'Search payors',
    description: 'Payors whose name or alias contains `insurance_name` (any case), or whose id at a clearing house (`provider`) is `provider_payor_id`.',
    tags,
    auth: 'team',
    query: PayorSearchQuery,
    responses: { 200: { description: 'Matching payors', schema: PayorSearchResults }, 422: errors[422] },
    handler({ query, deps }) {
      const found = deps.payors.search({ name: query.insurance_name, provider: query.provider, providerPayorId: query.provider_payor_id });
      return { body: found.map((e) => ({ payor_code: e.payor_code, ...payorView(e) })) };
    },
  }),
  defineRoute({
    operationId: 'searchPayorsDeprecated',
    method: 'post',
    path: '/v3/insurance/search/payor',
    summary: 'Search payors (deprecated: use GET)',
    description: 'The older form: criteria in the body, `code` instead of `payor_code` in the results.',
    tags,
    auth: 'team',
    body: PayorSearchBody,
    deprecated: true,
    responses: { 200: { description: 'Matching payors', schema: PayorSearchResultsDeprecated }, 422: errors[422] },
    handler({ body, deps }) {
      const found = deps.payors.search({ name: body.insurance_name, provider: body.provider, providerPayorId: body.provider_id });
      return { body: found.map((e) => ({ code: e.payor_code, ...payorView(e) })) };
    },
  }),
];
