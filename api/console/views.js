// What the delivery-log page draws. Every value from the API goes in as text (textContent, attributes): no
// HTML is ever built from data.

/** An element with attributes (`on*` functions become listeners) and children (strings become text). */
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith('on') && typeof value === 'function') node.addEventListener(name.slice(2), value);
    else if (name === 'className') node.className = value;
    else node.setAttribute(name, value === true ? '' : String(value));
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

const pad = (n) => String(n).padStart(2, '0');
/** Local time to the second, with as much of the date as differs from today (the title keeps the exact time). */
export function timeText(iso, now = new Date()) {
  if (!iso) return '—';
  const d = new Date(iso);
  const clock = `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
  if (d.toDateString() === now.toDateString()) return clock;
  const day = `${pad(d.getMonth() + 1)}-${pad(d.getDate())}`;
  return d.getFullYear() === now.getFullYear() ? `${day} ${clock}` : `${d.getFullYear()}-${day} ${clock}`;
}
export const time = (iso) => el('time', { datetime: iso || undefined, title: iso || undefined }, timeText(iso));

/** "3 min ago", "in 12 s". */
export function relative(iso, now = Date.now()) {
  const s = Math.round((new Date(iso).getTime() - now) / 1000);
  const a = Math.abs(s);
  const text = a < 60 ? `${a} s` : a < 3600 ? `${Math.round(a / 60)} min` : a < 172800 ? `${Math.round(a / 3600)} h` : `${Math.round(a / 86400)} d`;
  return s < 0 ? `${text} ago` : `in ${text}`;
}

// The end of an id: time-ordered ids (events) share their beginning with their neighbours.
const shortId = (id) => (id ? `…${id.slice(-8)}` : '—');
export const idText = (id) => el('code', { title: id, className: 'id' }, shortId(id));
export const badge = (status) => el('span', { className: `badge badge-${status}` }, status);

/** A destination's health: disabled (and why), failing since when, or healthy. */
export function health(d) {
  if (d.disabled) return { status: 'disabled', text: `disabled${d.disabled_reason ? ` (${d.disabled_reason})` : ''}` };
  if (d.failing_since) return { status: 'failing', text: `failing since ${relative(d.failing_since).replace(/ ago$/, '')}` };
  return { status: 'healthy', text: 'healthy' };
}

/** The left list: "All events", then each endpoint and pipeline with its health. */
export function destinationList(destinations, selectedId, onSelect) {
  const item = (d, label, sub, state) =>
    el(
      'li',
      {},
      el(
        'button',
        { type: 'button', className: `dest${selectedId === (d && d.id) || (!d && !selectedId) ? ' selected' : ''}`, 'aria-current': (d ? d.id : null) === (selectedId || null) ? 'true' : undefined, 'data-dest': d ? d.id : '', onclick: () => onSelect(d) },
        el('span', { className: 'dest-name' }, label),
        sub ? el('span', { className: 'dest-sub' }, sub) : null,
        state ? el('span', { className: `health health-${state.status}` }, state.text) : null,
      ),
    );
  return [
    item(null, 'All events', 'every event of the team', null),
    ...destinations.map((d) => item(d, d.label, d.kind === 'webhook' ? 'endpoint' : 'pipeline', health(d))),
  ];
}

/** The table head for events (all events) or deliveries (one destination). */
export function tableHead(mode) {
  const cols = mode === 'events' ? ['Time', 'Event type', 'User', 'Event'] : ['Time', 'Event type', 'Status', 'Attempts', 'Last outcome', 'Next retry'];
  return el('tr', {}, cols.map((c) => el('th', { scope: 'col' }, c)));
}

/** One row of the log: an event, or a delivery to the selected destination. */
export function logRow(mode, item, onOpen) {
  const cells =
    mode === 'events'
      ? [time(item.created_at), el('span', { className: 'type' }, item.event_type), item.user_id ? idText(item.user_id) : el('span', { className: 'muted' }, '—'), idText(item.id)]
      : [
          time(item.created_at),
          el('span', { className: 'type' }, item.event_type),
          badge(item.status),
          String(item.attempts),
          // A pipeline's failure has no status code, only the broker's sentence: shortened here, whole in the title and the attempts.
          item.last_status_code ? String(item.last_status_code) : el('span', { className: 'muted clip', title: item.last_error || undefined }, item.last_error || '—'),
          item.next_attempt_at ? el('span', { title: item.next_attempt_at }, relative(item.next_attempt_at)) : el('span', { className: 'muted' }, '—'),
        ];
  const eventId = mode === 'events' ? item.id : item.event_id;
  return el('tr', { tabindex: '-1', 'data-event': eventId, onclick: () => onOpen(item) }, cells.map((c) => el('td', {}, c)));
}

const field = (label, value) => [el('dt', {}, label), el('dd', {}, value)];

/** The event's detail: its deliveries (with resend) and every attempt, newest first. */
export function eventDetail({ event, deliveries, attempts, destinations, busy }, onResend) {
  const nameOf = (id) => destinations.find((d) => d.id === id)?.label ?? id;
  const byId = new Map(destinations.map((d) => [d.id, d]));
  const parts = [
    el(
      'dl',
      { className: 'facts' },
      field('Event id', el('code', {}, event.id)),
      field('Type', event.event_type),
      field('User', event.user_id ? el('code', {}, event.user_id) : '—'),
      field('Created', time(event.created_at)),
    ),
    el('h3', {}, 'Deliveries'),
    deliveries.length
      ? el(
          'table',
          { className: 'mini' },
          el('thead', {}, el('tr', {}, ['Destination', 'Status', 'Attempts', 'Next retry', ''].map((c) => el('th', { scope: 'col' }, c)))),
          el(
            'tbody',
            {},
            deliveries.map((d) =>
              el(
                'tr',
                {},
                el('td', {}, nameOf(d.webhook_id)),
                el('td', {}, badge(d.status)),
                el('td', {}, String(d.attempts)),
                el('td', {}, d.next_attempt_at ? el('span', { title: d.next_attempt_at }, relative(d.next_attempt_at)) : '—'),
                el(
                  'td',
                  {},
                  el(
                    'button',
                    { type: 'button', className: 'small', 'data-resend': d.webhook_id, disabled: busy || byId.get(d.webhook_id)?.disabled || undefined, onclick: () => onResend(d.webhook_id) },
                    'Resend',
                  ),
                ),
              ),
            ),
          ),
        )
      : el('p', { className: 'muted' }, 'No deliveries (no destination took this event).'),
    el('h3', {}, `Attempts (${attempts.length})`),
    attempts.length ? el('ol', { className: 'attempts' }, attempts.map((a) => attemptItem(a, nameOf))) : el('p', { className: 'muted' }, 'No attempts yet.'),
  ];
  if (event.data) parts.push(el('details', {}, el('summary', {}, 'Event data'), el('pre', { className: 'body' }, JSON.stringify(event.data, null, 2))));
  return parts;
}

function attemptItem(a, nameOf) {
  // A webhook's attempt has an HTTP status; a pipeline's has none when its broker took the message. A failure has an error class.
  const ok = !a.error_class && (a.status_code === null || (a.status_code >= 200 && a.status_code < 300));
  const outcome = a.status_code !== null ? `HTTP ${a.status_code}` : a.error_class || 'accepted by the broker';
  const excerpt = a.response_body ? a.response_body.slice(0, 600) + (a.response_body.length > 600 ? '…' : '') : null;
  return el(
    'li',
    { className: `attempt ${ok ? 'ok' : 'bad'}`, 'data-attempt': a.id, tabindex: '0' },
    el(
      'div',
      { className: 'attempt-head' },
      el('span', { className: `badge badge-${ok ? 'succeeded' : 'failed'}` }, outcome),
      el('span', {}, `#${a.attempt}`),
      el('span', { className: 'muted' }, a.trigger === 'manual' ? 'manual resend' : 'scheduled'),
      el('span', {}, `${a.duration_ms} ms`),
      el('span', { className: 'muted' }, nameOf(a.webhook_id)),
      el('span', { className: 'attempt-time' }, time(a.timestamp)),
    ),
    a.error ? el('p', { className: 'error' }, a.error) : null,
    excerpt !== null ? el('pre', { className: 'body', 'aria-label': 'Response excerpt' }, excerpt) : null,
  );
}
