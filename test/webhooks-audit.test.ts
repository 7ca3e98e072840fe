import { randomUUID } from 'node:crypto';
import { generateSecret } from '../lib/events/destinations/webhook/signing';
import { AuditLogPage } from '../schemas/management';
import { createTenant, expectSchema, managementClient, startTestApp, type HttpClient, type Tenant, type TestApp } from './support/harness';
import { startReceiver, type Receiver } from './support/receiver';

/**
 * Webhook endpoint management is audited like the rest of management (lib/tenancy/audit.ts): every change
 * (not reads, not refused validation) leaves one entry with the key, action, team, target and outcome, and
 * no secret or header value.
 */
let app: TestApp;
let tenant: Tenant;
let mgmt: HttpClient;
let rx: Receiver;
let base: string;

beforeAll(async () => {
  app = await startTestApp();
  tenant = await createTenant(app.deps, 'Webhook audit');
  mgmt = managementClient(app, tenant);
  rx = await startReceiver();
  base = `/v1/org/${tenant.orgId}/team/${tenant.teamId}/${app.deps.config.DEPLOYMENT_ENVIRONMENT}/webhook`;
});
afterAll(async () => {
  await rx?.close();
  await app?.close();
});

type Entry = {
  id: string;
  action: string;
  team_id: string | null;
  status: string;
  request_id: string;
  target: { type: string; id: string };
  actor: { management_key_id: string; header: string };
  error: { status: number; detail: string } | null;
  changes: string[];
};

async function auditLog(query = ''): Promise<Entry[]> {
  const res = await mgmt.get(`/v1/org/${tenant.orgId}/audit_log?limit=100${query}`);
  expect(res.status).toBe(200);
  expectSchema(AuditLogPage, res.body);
  expect(res.body.next_cursor).toBeNull();
  return res.body.data;
}

test('every webhook management change is audited (key, action, team, target, outcome), reads and refused input are not, and no secret is kept', async () => {
  const keyId = (await mgmt.get(`/v1/org/${tenant.orgId}/management_key`)).body.data[0].id;
  const rid = (name: string) => ({ 'x-request-id': `${name}-${tenant.orgId}` });
  const createdSecret = generateSecret();
  const headerValue = `Bearer header-value-${randomUUID()}`;

  const created = await mgmt.post(base, { url: `${rx.url}/hooks`, description: 'audited', secret: createdSecret }, rid('create'));
  expect(created.status).toBe(200);
  const id: string = created.body.id;
  expect((await mgmt.patch(`${base}/${id}`, { description: 'audited 2', rate_limit: 10 }, rid('update'))).status).toBe(200);
  expect((await mgmt.put(`${base}/${id}/headers`, { headers: { 'X-Receiver-Token': headerValue } }, rid('headers'))).status).toBe(200);
  const rotated = await mgmt.post(`${base}/${id}/secret/rotate`, undefined, rid('rotate'));
  expect(rotated.status).toBe(200);
  const tested = await mgmt.post(`${base}/${id}/test`, {}, rid('test'));
  expect(tested.status).toBe(202);
  const eventId: string = tested.body.event_id;
  expect((await mgmt.post(`${base}/${id}/events/${eventId}/resend`, undefined, rid('resend'))).status).toBe(202);
  expect((await mgmt.post(`${base}/${id}/recover`, { since: new Date(Date.now() - 3_600_000).toISOString() }, rid('recover'))).status).toBe(202);
  // A change refused by its target: recorded, failed, with what the client got.
  const unknownEvent = randomUUID();
  expect((await mgmt.post(`${base}/${id}/events/${unknownEvent}/resend`, undefined, rid('resend-unknown'))).status).toBe(404);
  expect((await mgmt.del(`${base}/${id}`, rid('delete'))).status).toBe(204);
  expect((await mgmt.del(`${base}/${id}`, rid('delete-again'))).status).toBe(404);

  // Reads and requests refused before any change (validation, another environment) leave no entry.
  await mgmt.get(base, rid('read'));
  await mgmt.get(`${base}/event_types`, rid('read'));
  expect((await mgmt.post(base, { url: `${rx.url}/x`, secret: 'whsec_short' }, rid('invalid'))).status).toBe(422);
  const otherEnv = app.deps.config.DEPLOYMENT_ENVIRONMENT === 'sandbox' ? 'production' : 'sandbox';
  expect((await mgmt.post(base.replace(`/${app.deps.config.DEPLOYMENT_ENVIRONMENT}/`, `/${otherEnv}/`), { url: `${rx.url}/x` }, rid('other-env'))).status).toBe(
    400,
  );

  const entries = await auditLog();
  const byRequest = Object.fromEntries(entries.map((e) => [e.request_id.replace(`-${tenant.orgId}`, ''), e]));
  expect(entries).toHaveLength(10);
  expect(Object.fromEntries(Object.entries(byRequest).map(([name, e]) => [name, e.action]))).toEqual({
    create: 'webhook.create',
    update: 'webhook.update',
    headers: 'webhook.headers.update',
    rotate: 'webhook.secret.rotate',
    test: 'webhook.test',
    resend: 'webhook.event.resend',
    recover: 'webhook.recover',
    'resend-unknown': 'webhook.event.resend',
    delete: 'webhook.delete',
    'delete-again': 'webhook.delete',
  });
  for (const e of entries) {
    expect(e.actor).toEqual({ management_key_id: keyId, header: 'X-Management-Key' });
    expect(e.team_id).toBe(tenant.teamId);
  }
  for (const name of ['create', 'update', 'headers', 'rotate', 'test', 'recover', 'delete', 'delete-again']) {
    expect(byRequest[name].target).toEqual({ type: 'webhook', id });
  }
  expect(byRequest.resend.target).toEqual({ type: 'webhook_event', id: `${id}:${eventId}` });
  expect(byRequest['resend-unknown'].target).toEqual({ type: 'webhook_event', id: `${id}:${unknownEvent}` });

  expect(
    entries
      .filter((e) => e.status !== 'succeeded')
      .map((e) => [e.request_id.replace(`-${tenant.orgId}`, ''), e.status, e.error?.status])
      .sort(),
  ).toEqual([
    ['delete-again', 'failed', 404],
    ['resend-unknown', 'failed', 404],
  ]);
  expect(byRequest['resend-unknown'].error!.detail).toBe(`Event ${unknownEvent} not found.`);

  // Field names only.
  expect(byRequest.create.changes).toEqual(expect.arrayContaining(['url', 'description', 'secret']));
  expect(byRequest.update.changes.sort()).toEqual(['description', 'rate_limit']);
  expect(byRequest.headers.changes).toEqual(['headers.X-Receiver-Token']);
  expect(byRequest.rotate.changes).toEqual(['secret']);
  expect(byRequest.recover.changes).toEqual(['since']);
  expect(byRequest.delete.changes).toEqual([]);

  // Filterable like any other action.
  expect((await auditLog('&action=webhook.delete')).map((e) => e.id)).toEqual([byRequest['delete-again'].id, byRequest.delete.id]);
  expect((await auditLog(`&team_id=${tenant.teamId}&action=webhook.secret.rotate`)).map((e) => e.id)).toEqual([byRequest.rotate.id]);

  // No secret or header value anywhere: neither in what the API shows nor in the stored documents.
  const stored = await app.inspect.collection('audit_log').find({ org_id: tenant.orgId }).toArray();
  expect(stored).toHaveLength(10);
  for (const text of [JSON.stringify(entries), JSON.stringify(stored)]) {
    expect(text).not.toContain(createdSecret);
    expect(text).not.toContain(rotated.body.key);
    expect(text).not.toContain('header-value-');
    expect(text).not.toContain('whsec_');
  }
});
