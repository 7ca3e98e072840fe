import { timeOrderedUuid } from '../../lib/platform/keys';
import { ApiError, notFound, ValidationError } from '../../lib/platform/errors';
import { isoWithOffset } from '../../lib/platform/time';
import { labAccountProblems, type LabAccountDoc, type LabAccountSettings } from '../../lib/labs/lab-accounts';
import type { LabAccountScope, ListedLabAccount } from '../../lib/labs/lab-accounts-store';
import { audited } from '../../lib/tenancy/audit';
import { ErrorDetail } from '../../schemas/common';
import { LabAccount, LabAccountCreateBody, LabAccountList, LabAccountParams, LabAccountPatchBody } from '../../schemas/lab-accounts';
import { OrgEnvRegionParams } from '../../schemas/management';
import type { AppDeps } from '../deps';
import type { ManagementPrincipal } from '../middleware/auth';
import { defineRoute } from '../route';
import { assertThisDeployment, managementErrors as errors, otherDeployment } from '../management-scope';

/**
 * Lab accounts (`/v1/org/{org_id}/lab_account/{environment}/{region}`): an organisation's accounts with laboratories
 * of the catalogue, which its teams' lab tests may name (orders of those tests go to that lab over MLLP). Every key
 * of the organisation may read them (they hold no secret: the TLS key is never shown); changing them needs an org
 * key, since an account serves every team of the organisation. Changes are audited.
 */
const tags = ['Management: lab accounts'];
const path = '/v1/org/{org_id}/lab_account/{environment}/{region}';
const itemPath = `${path}/{lab_account_id}`;

function labAccountView(a: ListedLabAccount) {
  const tls = a.mllp.tls;
  return {
    id: a._id,
    org_id: a.org_id,
    environment: a.environment,
    region: a.region,
    lab_slug: a.lab_slug,
    lab_id: a.lab_id,
    name: a.name,
    account_number: a.account_number,
    mllp: { host: a.mllp.host, port: a.mllp.port, tls: tls && { ca: tls.ca, cert: tls.cert, has_key: a.has_tls_key } },
    msh: { ...a.msh },
    profile: a.profile,
    ack_mode: a.ack_mode,
    charset: a.charset,
    results_from: a.results_from,
    order_codes: Object.fromEntries(Object.entries(a.order_codes).map(([id, c]) => [id, { code: c.code, loinc: c.loinc ?? null }])),
    bill_types: a.bill_types,
    labels: a.labels,
    ack_timeout_ms: a.ack_timeout_ms,
    created_at: isoWithOffset(a.created_at),
    updated_at: isoWithOffset(a.updated_at),
  };
}

const scopeOf = (auth: ManagementPrincipal, params: { environment: string; region: string }): LabAccountScope => ({
  orgId: auth.orgId,
  environment: params.environment,
  region: params.region,
});
const accountNotFound = (id: string) => notFound(`Lab account ${id} not found in this organisation.`);

function checked(deps: AppDeps, settings: LabAccountSettings): LabAccountSettings {
  const problems = labAccountProblems(settings, deps.labCatalogue);
  if (problems.length) throw new ValidationError(problems);
  return settings;
}

export const labAccountRoutes = [
  defineRoute({
    operationId: 'listLabAccounts',
    method: 'get',
    path,
    summary: 'List lab accounts',
    description: "The organisation's accounts with laboratories in this environment and region, oldest first (TLS keys never shown).",
    tags,
    auth: 'management',
    params: OrgEnvRegionParams,
    responses: { 200: { description: 'Lab accounts', schema: LabAccountList }, ...otherDeployment, ...errors },
    async handler({ auth, params, deps }) {
      assertThisDeployment(deps, params.environment, params.region);
      const accounts = await deps.repos.labAccounts.listForOrg(auth.orgId, params.environment, params.region);
      return { body: { data: accounts.map(labAccountView) } };
    },
  }),
  defineRoute({
    operationId: 'createLabAccount',
    method: 'post',
    path,
    summary: 'Create a lab account',
    description:
      "Connects the organisation to a laboratory of the catalogue: where its MLLP endpoint is, the MSH identifiers and profile from the lab's " +
      'interface specification, its order codes for our markers, and who may deliver results. The TLS key is stored encrypted and never ' +
      'shown again. Needs an org management key.',
    tags,
    auth: 'management',
    params: OrgEnvRegionParams,
    body: LabAccountCreateBody,
    responses: { 200: { description: 'The lab account', schema: LabAccount }, ...otherDeployment, ...errors },
    async handler({ auth, params, body, deps, requestId, log }) {
      auth.assertOrgAdmin('Creating lab accounts');
      assertThisDeployment(deps, params.environment, params.region);
      const settings = checked(deps, {
        lab_slug: body.lab_slug,
        name: body.name,
        account_number: body.account_number,
        mllp: { host: body.mllp.host, port: body.mllp.port, tls: body.mllp.tls ? tlsOf(body.mllp.tls) : null },
        msh: { ...body.msh },
        profile: body.profile,
        ack_mode: body.ack_mode ?? 'original',
        charset: body.charset ?? 'UNICODE UTF-8',
        results_from: body.results_from,
        order_codes: body.order_codes,
        bill_types: body.bill_types ?? ['client_bill'],
        labels: body.labels ?? 'separate_sheet',
        ack_timeout_ms: body.ack_timeout_ms ?? 30_000,
      });
      const id = timeOrderedUuid();
      const now = new Date();
      const created = await audited(
        { deps, auth, requestId, log },
        { action: 'lab_account.create', type: 'lab_account', id, teamId: null },
        () =>
          deps.repos.labAccounts.create({
            ...settings,
            _id: id,
            org_id: auth.orgId,
            environment: params.environment,
            region: params.region,
            lab_id: deps.labCatalogue.labBySlug(settings.lab_slug)!.id,
            created_at: now,
            updated_at: now,
          }),
        Object.keys(body),
      );
      return { body: labAccountView(created) };
    },
  }),
  defineRoute({
    operationId: 'getLabAccount',
    method: 'get',
    path: itemPath,
    summary: 'Get a lab account',
    tags,
    auth: 'management',
    params: LabAccountParams,
    responses: { 200: { description: 'The lab account', schema: LabAccount }, ...otherDeployment, ...errors },
    async handler({ auth, params, deps }) {
      assertThisDeployment(deps, params.environment, params.region);
      const account = await deps.repos.labAccounts.findInScope(scopeOf(auth, params), params.lab_account_id);
      if (!account) throw accountNotFound(params.lab_account_id);
      return { body: labAccountView(account) };
    },
  }),
  defineRoute({
    operationId: 'updateLabAccount',
    method: 'patch',
    path: itemPath,
    summary: 'Change a lab account',
    description:
      'Only the fields given change (`mllp`: its fields given; `tls` given without `key` keeps the stored key). The lab cannot change. ' +
      'Needs an org management key.',
    tags,
    auth: 'management',
    params: LabAccountParams,
    body: LabAccountPatchBody,
    responses: { 200: { description: 'The lab account', schema: LabAccount }, ...otherDeployment, ...errors },
    async handler({ auth, params, body, deps, requestId, log }) {
      auth.assertOrgAdmin('Changing lab accounts');
      assertThisDeployment(deps, params.environment, params.region);
      const id = params.lab_account_id;
      const updated = await audited(
        { deps, auth, requestId, log },
        { action: 'lab_account.update', type: 'lab_account', id, teamId: null },
        async () => {
          const account = await deps.repos.labAccounts.update(scopeOf(auth, params), id, (current) => ({
            ...current,
            ...checked(deps, merged(current, body)),
          }));
          if (!account) throw accountNotFound(id);
          return account;
        },
        Object.keys(body),
      );
      return { body: labAccountView(updated) };
    },
  }),
  defineRoute({
    operationId: 'deleteLabAccount',
    method: 'delete',
    path: itemPath,
    summary: 'Delete a lab account',
    description: 'Refused (409) while a lab test names the account: change or deactivate those tests first. Needs an org management key.',
    tags,
    auth: 'management',
    params: LabAccountParams,
    responses: {
      204: { description: 'Deleted' },
      ...otherDeployment,
      409: { description: 'Lab tests name the account', schema: ErrorDetail },
      ...errors,
    },
    async handler({ auth, params, deps, requestId, log }) {
      auth.assertOrgAdmin('Deleting lab accounts');
      assertThisDeployment(deps, params.environment, params.region);
      const id = params.lab_account_id;
      await audited({ deps, auth, requestId, log }, { action: 'lab_account.delete', type: 'lab_account', id, teamId: null }, async () => {
        const scope = scopeOf(auth, params);
        if (!(await deps.repos.labAccounts.findInScope(scope, id))) throw accountNotFound(id);
        // A test created between this check and the delete would name a deleted account: order creation
        // checks the account exists, so such a test is refused when ordered (422), never sent anywhere.
        const naming = await deps.repos.labTests.namingLabAccount(id, 5);
        if (naming.length) {
          throw new ApiError(409, `Lab tests name this account (${naming.map((t) => t._id).join(', ')}); they would have no lab to send orders to.`);
        }
        if (!(await deps.repos.labAccounts.delete(scope, id))) throw accountNotFound(id);
      });
      return { status: 204 };
    },
  }),
];

const settingsOf = (a: LabAccountDoc): LabAccountSettings => ({
  lab_slug: a.lab_slug,
  name: a.name,
  account_number: a.account_number,
  mllp: a.mllp,
  msh: a.msh,
  profile: a.profile,
  ack_mode: a.ack_mode,
  charset: a.charset,
  results_from: a.results_from,
  order_codes: a.order_codes,
  bill_types: a.bill_types,
  labels: a.labels,
  ack_timeout_ms: a.ack_timeout_ms,
});

type TlsBody = NonNullable<LabAccountCreateBody['mllp']['tls']>;
const tlsOf = (tls: TlsBody) => ({ ca: tls.ca ?? null, cert: tls.cert ?? null, key: tls.key ?? null });

/** The account's settings with a PATCH applied (each field given replaces; `mllp` field by field; an omitted TLS key kept). */
function merged(current: LabAccountDoc, body: LabAccountPatchBody): LabAccountSettings {
  if (body.lab_slug !== undefined && body.lab_slug !== current.lab_slug) {
    throw ValidationError.field(
      ['body', 'lab_slug'],
      `The account is with ${current.lab_slug}; its lab cannot change (create another account for another lab).`,
      'value_error.lab_slug',
    );
  }
  const { mllp, ...changes } = body;
  const tls =
    mllp?.tls === undefined
      ? current.mllp.tls
      : mllp.tls && { ...tlsOf(mllp.tls), key: mllp.tls.key === undefined ? (current.mllp.tls?.key ?? null) : mllp.tls.key };
  return {
    ...settingsOf(current),
    ...(changes as Partial<LabAccountSettings>),
    lab_slug: current.lab_slug,
    mllp: { host: mllp?.host ?? current.mllp.host, port: mllp?.port ?? current.mllp.port, tls },
  };
}
