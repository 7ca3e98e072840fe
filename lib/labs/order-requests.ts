import { randomUUID } from 'node:crypto';
import { badRequest, ValidationError } from '../platform/errors';
import { findLabTest, type AnyLabTest } from './catalogue-view';
import { countryName } from './order-view';
import type { AddressDoc, AoeAnswerDoc, LabOrderDoc, OrderEventDoc } from './model';
import { uncoveredMarkers } from './lab-accounts';
import { labAccountScope } from './lab-accounts-store';
import { placerNumberOf } from './placer-number';
import { todayUtc } from '../platform/time';
import type { CreateOrderBody, RegisterTestkitBody, UnregisteredTestkitBody } from '../../schemas/lab-order';
import type { FieldError } from '../../schemas/validator';
import { dottedStatus, highLevelOf, type CollectionMethod } from './statuses';
import type { OrderViewDeps } from './order-view';

/**
 * Rules of order requests beyond their JSON Schema (run once the schema passed), reported together as
 * field-located 422s, and the order documents the requests create.
 */

const OLDEST_DOB = '1900-01-01';

function checkPatient(body: Pick<CreateOrderBody, 'patient_details' | 'patient_address'>, errors: FieldError[]) {
  const today = todayUtc();
  const dob = body.patient_details.dob;
  if (dob > today) errors.push({ loc: ['body', 'patient_details', 'dob'], msg: `dob ${dob} is in the future.`, type: 'value_error.date_in_future' });
  else if (dob < OLDEST_DOB)
    errors.push({ loc: ['body', 'patient_details', 'dob'], msg: `dob ${dob} is before ${OLDEST_DOB}; check the date.`, type: 'value_error.date' });
  checkCountry(body.patient_address.country, ['body', 'patient_address', 'country'], errors);
}

function checkCountry(code: string, loc: string[], errors: FieldError[]) {
  const name = countryName(code.toUpperCase());
  if (name === code.toUpperCase() || /unknown/i.test(name)) {
    errors.push({ loc, msg: `'${code}' is not an ISO 3166-1 alpha-2 country code (e.g. US).`, type: 'value_error.country' });
  }
}

async function checkUser(deps: Pick<OrderViewDeps, 'repos' | 'labCatalogue' | 'config'>, teamId: string, userId: string, errors: FieldError[]) {
  const user = await deps.repos.users.find(teamId, userId);
  if (user?.status !== 'active') {
    errors.push({
      loc: ['body', 'user_id'],
      msg: `User ${userId} is not a user of your team (or is scheduled for deletion).`,
      type: 'value_error.user_not_found',
    });
  }
}

/** The order set's tests: each must exist for the team and be active; together they need one lab and method. */
async function resolveTests(
  deps: Pick<OrderViewDeps, 'repos' | 'labCatalogue' | 'config'>,
  teamId: string,
  ids: string[],
  loc: (string | number)[],
  errors: FieldError[],
): Promise<AnyLabTest[]> {
  const tests: AnyLabTest[] = [];
  for (const [i, id] of ids.entries()) {
    const test = await findLabTest(deps.labCatalogue, deps.repos, teamId, id);
    const at = ids.length > 1 || loc[loc.length - 1] === 'lab_test_ids' ? [...loc, i] : loc;
    if (!test) errors.push({ loc: at, msg: `Unknown lab test '${id}'. List tests with GET /v3/lab_test.`, type: 'value_error.lab_test_not_found' });
    else if (test.status !== 'active')
      errors.push({
        loc: at,
        msg: `Lab test '${id}' (${test.name}) is ${test.status}; only active tests can be ordered.`,
        type: 'value_error.lab_test_inactive',
      });
    else tests.push(test);
  }
  const [first, ...rest] = tests;
  for (const t of rest) {
    if (t.lab_id !== first.lab_id || t.method !== first.method) {
      errors.push({
        loc,
        msg: `All tests of one order must be from one lab with one collection method; '${t.name}' differs from '${first.name}'.`,
        type: 'value_error.order_set',
      });
      break;
    }
  }
  return tests;
}

/**
 * The lab account an order goes through (contract C2a): its tests' (one for all of them), or for tests that name
 * none the account the request names; null: the sandbox lab. The account must be the team's organisation's in this
 * deployment, with the tests' lab, have an order code for every marker and take the billing type.
 */
async function orderLabAccount(
  deps: Pick<OrderViewDeps, 'repos' | 'labCatalogue' | 'config'>,
  teamId: string,
  tests: AnyLabTest[],
  request: { lab_account_id: string | null | undefined; billing_type: string; testsAt: (string | number)[] },
  errors: FieldError[],
): Promise<string | null> {
  if (!tests.length) return null;
  const named = [...new Set(tests.map((t) => t.lab_account_id ?? null))];
  if (named.length > 1) {
    errors.push({
      loc: request.testsAt,
      msg: 'All tests of one order must go through one lab account; these name different ones.',
      type: 'value_error.order_set',
    });
    return null;
  }
  const [testAccount] = named;
  const requested = request.lab_account_id ?? null;
  const requestedAt = ['body', 'lab_account_id'];
  if (testAccount && requested && requested !== testAccount) {
    errors.push({
      loc: requestedAt,
      msg: `Lab test '${tests[0].name}' orders through lab account ${testAccount}; leave lab_account_id out or name that account.`,
      type: 'value_error.lab_account',
    });
    return null;
  }
  const accountId = testAccount ?? requested;
  if (!accountId) return null;
  const at = testAccount ? request.testsAt : requestedAt;
  const team = await deps.repos.tenancy.findTeamById(teamId);
  const account = team && (await deps.repos.labAccounts.findInScope(labAccountScope(team.org_id, deps.config), accountId));
  if (!account) {
    errors.push({ loc: at, msg: `Lab account ${accountId} not found in your organisation (it may have been deleted).`, type: 'value_error.lab_account' });
    return null;
  }
  const lab = deps.labCatalogue.labById(tests[0].lab_id);
  if (account.lab_id !== tests[0].lab_id) {
    errors.push({
      loc: at,
      msg: `Lab account ${accountId} is with ${account.lab_slug}; the tests are ${lab?.slug ?? `lab ${tests[0].lab_id}`}'s.`,
      type: 'value_error.lab_account_lab',
    });
    return null;
  }
  const markerIds = [...new Set(tests.flatMap((t) => t.marker_ids))];
  for (const id of uncoveredMarkers(account, markerIds)) {
    const marker = deps.labCatalogue.markerById(id);
    errors.push({
      loc: at,
      msg: `Marker ${id}${marker ? ` (${marker.slug})` : ''} has no order code in lab account ${accountId} (${account.name}); add it to the account's order_codes.`,
      type: 'value_error.marker_not_covered',
    });
  }
  if (!account.bill_types.includes(request.billing_type)) {
    errors.push({
      loc: ['body', 'billing_type'],
      msg: `Lab account ${accountId} (${account.name}) takes ${account.bill_types.join(', ')}, not ${request.billing_type}.`,
      type: 'value_error.billing_type',
    });
  }
  return accountId;
}

/** Ask-at-order-entry answers: each for a marker of the ordered tests (question ids kept as strings). */
function aoeAnswers(body: Pick<CreateOrderBody, 'aoe_answers'>, tests: AnyLabTest[], errors: FieldError[]): AoeAnswerDoc[] {
  const markers = new Set(tests.flatMap((t) => t.marker_ids));
  return (body.aoe_answers ?? []).map((a, i) => {
    if (tests.length && !markers.has(a.marker_id)) {
      errors.push({
        loc: ['body', 'aoe_answers', i, 'marker_id'],
        msg: `Marker ${a.marker_id} is not a marker of the ordered tests (${[...markers].join(', ')}).`,
        type: 'value_error.marker',
      });
    }
    return { marker_id: a.marker_id, question_id: String(a.question_id), answer: a.answer };
  });
}

function addressDoc(a: CreateOrderBody['patient_address'] | RegisterTestkitBody['patient_address'], fallbackName: string, phone: string): AddressDoc {
  const street = 'street' in a && a.street ? [a.street_number, a.street].filter(Boolean).join(' ') : null;
  const lines = { first_line: street ?? a.first_line ?? '', second_line: a.second_line ?? null };
  return {
    receiver_name: a.receiver_name ?? fallbackName,
    ...lines,
    city: a.city,
    state: a.state,
    zip: a.zip,
    country: a.country.toUpperCase(),
    phone_number: a.phone_number ?? phone,
    access_notes: a.access_notes ?? null,
  };
}

function baseDoc(
  teamId: string,
  orderId: string,
  tests: AnyLabTest[],
  now: Date,
): Pick<LabOrderDoc, '_id' | 'team_id' | 'method' | 'lab_test' | 'lab_test_ids' | 'marker_ids' | 'details_id' | 'placer_number' | 'created_at' | 'updated_at'> {
  return {
    _id: orderId,
    team_id: teamId,
    placer_number: placerNumberOf(orderId),
    method: tests[0].method as CollectionMethod,
    lab_test: tests[0],
    lab_test_ids: tests.map((t) => t.id),
    marker_ids: [...new Set(tests.flatMap((t) => t.marker_ids))],
    details_id: randomUUID(),
    created_at: now,
    updated_at: now,
  };
}

function events(
  method: CollectionMethod,
  lows: string[],
  now: Date,
): Pick<LabOrderDoc, 'events' | 'status' | 'low_level_status' | 'low_level_status_created_at'> {
  const list: OrderEventDoc[] = lows.map((low, i) => ({
    id: i + 1,
    created_at: new Date(now.getTime() + i),
    status: dottedStatus(method, low),
    status_detail: null,
  }));
  const low = lows[lows.length - 1];
  return { events: list, status: highLevelOf(method, low), low_level_status: low, low_level_status_created_at: list[list.length - 1].created_at };
}

/** POST /v3/order: the validated order document (status ordered), or a 422 naming every problem. */
export async function orderFromCreateRequest(
  deps: Pick<OrderViewDeps, 'repos' | 'labCatalogue' | 'config'>,
  teamId: string,
  body: CreateOrderBody,
  orderId: string,
  sampleId: string,
  parent?: LabOrderDoc,
): Promise<LabOrderDoc> {
  const errors: FieldError[] = [];
  const ids = body.order_set?.lab_test_ids ?? (body.lab_test_id ? [body.lab_test_id] : []);
  if (!ids.length)
    errors.push({ loc: ['body', 'order_set', 'lab_test_ids'], msg: 'Field required: the lab tests to order (order_set.lab_test_ids).', type: 'missing' });
  await checkUser(deps, teamId, body.user_id, errors);
  checkPatient(body, errors);
  if (body.activate_by && body.activate_by < todayUtc()) {
    errors.push({ loc: ['body', 'activate_by'], msg: `activate_by must be today (${todayUtc()}) or later.`, type: 'value_error.date_in_past' });
  }
  const testsAt = body.order_set ? ['body', 'order_set', 'lab_test_ids'] : ['body', 'lab_test_id'];
  const tests = await resolveTests(deps, teamId, ids, testsAt, errors);
  const billingType = body.billing_type ?? 'client_bill';
  // Checked once the tests are known (other problems are reported with the account's).
  const testsResolved = tests.length > 0 && tests.length === ids.length && !errors.some((e) => e.type === 'value_error.order_set');
  const labAccountId = !testsResolved
    ? null
    : await orderLabAccount(
        deps,
        teamId,
        tests,
        { lab_account_id: body.lab_account_id ?? body.order_set?.lab_account_id, billing_type: billingType, testsAt },
        errors,
      );
  const aoe = aoeAnswers(body, tests, errors);
  if (tests.length && body.collection_method && body.collection_method !== tests[0].method) {
    errors.push({
      loc: ['body', 'collection_method'],
      msg: `collection_method ${body.collection_method} does not match the lab test's method ${tests[0].method}.`,
      type: 'value_error.collection_method',
    });
  }
  if (errors.length) throw new ValidationError(errors);
  const now = new Date();
  const p = body.patient_details;
  const fullName = `${p.first_name} ${p.last_name}`;
  const method = tests[0].method as CollectionMethod;
  const address = addressDoc(body.patient_address, fullName, p.phone_number);
  return {
    ...baseDoc(teamId, orderId, tests, now),
    user_id: body.user_id,
    ...events(method, ['ordered'], now),
    patient_details: { ...p },
    patient_address: address,
    shipping_details: method === 'testkit' ? address : null,
    physician: body.physician ? { ...body.physician } : null,
    consents: body.consents ?? [],
    sample_id: sampleId,
    health_insurance_id: body.health_insurance_id ?? null,
    notes: body.notes ?? null,
    clinical_notes: body.clinical_notes ?? null,
    activate_by: body.activate_by ?? null,
    created_with_activate_by: Boolean(body.activate_by),
    priority: body.priority ?? false,
    billing_type: billingType,
    lab_account_id: labAccountId,
    icd_codes: body.icd_codes ?? [],
    aoe_answers: aoe,
    has_abn: false,
    origin: parent ? 'redraw' : 'initial',
    parent_id: parent?._id ?? null,
    order_transaction_id: parent?.order_transaction_id ?? randomUUID(),
    interpretation: null,
    has_missing_results: false,
    shipment: null,
    lab_reference: null,
    dispatched_at: null,
  };
}

/** POST /v3/order/testkit/register: an order whose events run up to testkit_registered. */
export async function orderFromRegistration(
  deps: Pick<OrderViewDeps, 'repos' | 'labCatalogue' | 'config'>,
  teamId: string,
  body: RegisterTestkitBody,
  orderId: string,
): Promise<LabOrderDoc> {
  const errors: FieldError[] = [];
  await checkUser(deps, teamId, body.user_id, errors);
  checkPatient(body as Pick<CreateOrderBody, 'patient_details' | 'patient_address'>, errors);
  if (!body.patient_address.first_line && !body.patient_address.street) {
    errors.push({ loc: ['body', 'patient_address', 'first_line'], msg: 'Field required: first_line (or street with street_number).', type: 'missing' });
  }
  const testId = body.lab_test_id ?? deps.labCatalogue.labTests.find((t) => t.method === 'testkit' && t.status === 'active')?.id;
  const tests = testId ? await resolveKitTest(deps, teamId, testId, errors) : [];
  if (!tests.length && !errors.some((e) => e.loc[1] === 'lab_test_id')) {
    errors.push({ loc: ['body', 'lab_test_id'], msg: 'No test-kit test to register the kit to; name one in lab_test_id.', type: 'missing' });
  }
  const testsAt = ['body', 'lab_test_id'];
  const labAccountId = errors.length
    ? null
    : await orderLabAccount(deps, teamId, tests, { lab_account_id: null, billing_type: 'client_bill', testsAt }, errors);
  if (errors.length) throw new ValidationError(errors);
  const now = new Date();
  const p = body.patient_details;
  const address = addressDoc(body.patient_address, `${p.first_name} ${p.last_name}`, p.phone_number);
  return {
    ...baseDoc(teamId, orderId, tests, now),
    user_id: body.user_id,
    // The kit is in the customer's hands: it was ordered, awaited registration, got its requisition and is now registered.
    ...events('testkit', ['ordered', 'awaiting_registration', 'requisition_created', 'testkit_registered'], now),
    patient_details: { ...p },
    patient_address: address,
    shipping_details: address,
    physician: body.physician ? { ...body.physician } : null,
    consents: body.consents,
    sample_id: body.sample_id,
    health_insurance_id: body.health_insurance_id ?? null,
    notes: null,
    clinical_notes: null,
    ...initialOrderFields(labAccountId),
  };
}

/** The one test of a kit order: an active test-kit test (422 at `lab_test_id` otherwise). */
async function resolveKitTest(
  deps: Pick<OrderViewDeps, 'repos' | 'labCatalogue' | 'config'>,
  teamId: string,
  testId: string,
  errors: FieldError[],
): Promise<AnyLabTest[]> {
  const tests = await resolveTests(deps, teamId, [testId], ['body', 'lab_test_id'], errors);
  if (tests.length && tests[0].method !== 'testkit') {
    errors.push({
      loc: ['body', 'lab_test_id'],
      msg: `Lab test '${testId}' is a ${tests[0].method} test; only test-kit tests are allowed here.`,
      type: 'value_error.lab_test_method',
    });
  }
  return tests;
}

/**
 * POST /v3/order/testkit: a kit ordered without a patient (reference: "registrable testkit"). Its events run to
 * awaiting_registration; its workflow ships it and waits for `POST /v3/order/testkit/register` with its sample id.
 */
export async function orderFromUnregisteredTestkit(
  deps: Pick<OrderViewDeps, 'repos' | 'labCatalogue' | 'config'>,
  teamId: string,
  body: UnregisteredTestkitBody,
  orderId: string,
  sampleId: string,
): Promise<LabOrderDoc> {
  const errors: FieldError[] = [];
  await checkUser(deps, teamId, body.user_id, errors);
  checkCountry(body.shipping_details.country, ['body', 'shipping_details', 'country'], errors);
  const tests = await resolveKitTest(deps, teamId, body.lab_test_id, errors);
  const testsAt = ['body', 'lab_test_id'];
  const labAccountId = errors.length
    ? null
    : await orderLabAccount(deps, teamId, tests, { lab_account_id: body.lab_account_id, billing_type: 'client_bill', testsAt }, errors);
  if (errors.length) throw new ValidationError(errors);
  const now = new Date();
  const s = body.shipping_details;
  const shipping = addressDoc({ ...s, second_line: s.second_line ?? null }, s.receiver_name, s.phone_number);
  return {
    ...baseDoc(teamId, orderId, tests, now),
    ...unboundPatient(),
    user_id: body.user_id,
    ...events('testkit', ['ordered', 'awaiting_registration'], now),
    shipping_details: shipping,
    sample_id: sampleId,
    passthrough: body.passthrough ?? null,
    registration_id: null,
    ...initialOrderFields(labAccountId),
  };
}

/** What an order without a patient holds of one (an unregistered kit). */
const unboundPatient = () => ({
  patient_details: null,
  patient_address: null,
  physician: null,
  consents: [],
  health_insurance_id: null,
  notes: null,
  clinical_notes: null,
});

/** The fields every new initial order (not a redraw) created at once (no activate_by) starts with. */
function initialOrderFields(labAccountId: string | null) {
  return {
    lab_account_id: labAccountId,
    icd_codes: [],
    aoe_answers: [],
    activate_by: null,
    created_with_activate_by: false,
    priority: false,
    billing_type: 'client_bill',
    has_abn: false,
    origin: 'initial' as const,
    parent_id: null,
    order_transaction_id: randomUUID(),
    interpretation: null,
    has_missing_results: false,
    shipment: null,
    lab_reference: null,
    dispatched_at: null,
  };
}

/** The request a redraw repeats: the same tests, patient, physician and billing as its initial order. */
export function redrawRequest(parent: LabOrderDoc): CreateOrderBody {
  const p = parent.patient_details;
  const a = parent.patient_address;
  if (!p || !a) throw badRequest('The patient data of this order was erased; create a new order instead.');
  return {
    user_id: parent.user_id,
    order_set: { lab_test_ids: parent.lab_test_ids },
    patient_details: { ...p, gender: p.gender as CreateOrderBody['patient_details']['gender'] },
    patient_address: {
      first_line: a.first_line,
      second_line: a.second_line,
      city: a.city,
      state: a.state,
      zip: a.zip,
      country: a.country,
      ...(a.receiver_name ? { receiver_name: a.receiver_name } : {}),
      ...(a.phone_number ? { phone_number: a.phone_number } : {}),
    },
    physician: parent.physician,
    consents: parent.consents as CreateOrderBody['consents'],
    priority: parent.priority,
    billing_type: parent.billing_type as CreateOrderBody['billing_type'],
    // The same lab account (the tests' own, or the one the initial request named), diagnoses and answers.
    lab_account_id: parent.lab_account_id,
    icd_codes: parent.icd_codes,
    aoe_answers: parent.aoe_answers,
  };
}
