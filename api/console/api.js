// The public management API, as the delivery-log page calls it: a management key in X-Management-Key, or a
// session from a sign-in link as `Authorization: Bearer`. Never anything in a URL but ids and filters.

export class ApiError extends Error {
  constructor(status, detail) {
    super(detail);
    this.status = status;
  }
}

/** The `detail` of an error body as one sentence (422s carry a list of field errors). */
function detailOf(body, status) {
  const detail = body && body.detail;
  if (typeof detail === 'string') return detail;
  if (Array.isArray(detail)) return detail.map((d) => `${(d.loc || []).join('.')}: ${d.msg}`).join('; ');
  return `The API answered ${status}.`;
}

/** One JSON call of the public API (the link page uses it too); a non-2xx answer throws ApiError with its detail. */
export async function send(method, path, headers, body) {
  const res = await fetch(path, {
    method,
    headers: { accept: 'application/json', ...headers, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
    credentials: 'omit',
    cache: 'no-store',
  });
  const text = await res.text();
  let parsed = null;
  try {
    parsed = text ? JSON.parse(text) : null;
  } catch {
    parsed = null;
  }
  if (!res.ok) throw new ApiError(res.status, detailOf(parsed, res.status));
  return parsed;
}

/** Uses a sign-in link once: the session `{ token, expires_at, org_id, team_id, environment }`. */
export const exchangeLink = (link) => send('POST', '/v1/console/sessions', {}, { link });

const query = (q) => {
  const params = new URLSearchParams();
  for (const [k, v] of Object.entries(q)) if (v !== undefined && v !== null && v !== '') params.set(k, String(v));
  const s = params.toString();
  return s ? `?${s}` : '';
};

/** The management API of one team (`auth`: { kind: 'key' | 'session', secret, org, team, env }). */
export function teamApi(auth) {
  const headers = auth.kind === 'key' ? { 'X-Management-Key': auth.secret } : { Authorization: `Bearer ${auth.secret}` };
  const team = `/v1/org/${encodeURIComponent(auth.org)}/team/${encodeURIComponent(auth.team)}/${encodeURIComponent(auth.env)}`;
  const call = (method, path, body) => send(method, team + path, headers, body);
  /** Every page of a short list (a team's endpoints or pipelines). */
  async function all(path) {
    const items = [];
    let cursor;
    do {
      const page = await call('GET', path + query({ limit: 250, next_cursor: cursor }));
      items.push(...page.data);
      cursor = page.next_cursor;
    } while (cursor);
    return items;
  }
  const dest = (d) => `/${d.kind}/${encodeURIComponent(d.id)}`;
  return {
    webhooks: () => all('/webhook'),
    pipelines: () => all('/pipeline'),
    eventTypes: () => call('GET', '/webhook/event_types'),
    events: (q) => call('GET', `/webhook/events${query(q)}`),
    deliveries: (d, q) => call('GET', `${dest(d)}/deliveries${query(q)}`),
    eventDeliveries: (eventId) => call('GET', `/webhook/events/${encodeURIComponent(eventId)}/deliveries${query({ limit: 250 })}`),
    eventAttempts: (eventId) => call('GET', `/webhook/events/${encodeURIComponent(eventId)}/attempts${query({ limit: 250 })}`),
    resend: (d, eventId) => call('POST', `${dest(d)}/events/${encodeURIComponent(eventId)}/resend`),
    recover: (d, range) => call('POST', `${dest(d)}/recover`, range),
    setDisabled: (d, disabled) => call('PATCH', dest(d), { disabled }),
  };
}
