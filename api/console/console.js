// The delivery-log page: sign-in, the list of destinations, the log with filters and cursor pages, an event's
// deliveries and attempts, and the actions (resend, recover, disable/enable). Only the public management API.

import { ApiError, exchangeLink, teamApi } from './api.js';
import { destinationList, eventDetail, logRow, tableHead } from './views.js';

const $ = (id) => document.getElementById(id);
const AUTH_KEY = 'healthbridge.console.auth';
const PAGE = 50;
const FILTERS = ['event_type', 'user_id', 'status', 'since', 'until'];

const state = { auth: null, api: null, destinations: [], dest: null, filters: {}, items: [], cursor: null, mode: 'events', open: null, loadSeq: 0 };

// ---------------------------------------------------------------- sign-in

function showSignIn(message) {
  sessionStorage.removeItem(AUTH_KEY);
  state.auth = state.api = null;
  $('console').hidden = true;
  $('sign-out').hidden = true;
  $('scope').textContent = '';
  $('signin').hidden = false;
  $('signin-error').hidden = !message;
  $('signin-error').textContent = message || '';
  $('signin-key').focus();
}

async function signIn(auth) {
  state.auth = auth;
  state.api = teamApi(auth);
  try {
    await loadDestinations();
  } catch (err) {
    showSignIn(refusalText(err, auth));
    return;
  }
  sessionStorage.setItem(AUTH_KEY, JSON.stringify(auth));
  $('signin').hidden = true;
  $('console').hidden = false;
  $('sign-out').hidden = false;
  $('scope').textContent = `team ${auth.team} · ${auth.env}${auth.kind === 'session' ? ` · link session until ${new Date(auth.expires_at).toLocaleTimeString()}` : ''}`;
  state.api.eventTypes().then((types) => $('event-types').replaceChildren(...types.data.map((t) => new Option(t.name))), () => undefined);
  readHash();
  await reload();
}

/** Why a sign-in failed, for the person at the form (the API's words name the header a program would set). */
function refusalText(err, auth) {
  if (!(err instanceof ApiError)) return `Could not reach the API: ${err.message}`;
  if (err.status === 401 && auth.kind === 'key') return 'Refused: invalid management key. Check that it was pasted whole; a key is shown only once, when it is made.';
  return `Refused: ${err.message}`;
}

/** A 401 at any time (session over, key deleted) ends the sign-in with the API's reason. */
function failed(err) {
  if (err instanceof ApiError && err.status === 401) return showSignIn(`Signed out: ${err.message}`);
  toast(err instanceof ApiError ? err.message : `Could not reach the API: ${err.message}`, 'bad');
}

// ---------------------------------------------------------------- destinations

async function loadDestinations() {
  const [webhooks, pipelines] = await Promise.all([state.api.webhooks(), state.api.pipelines()]);
  state.destinations = [
    ...webhooks.map((w) => ({ ...w, kind: 'webhook', label: w.description || w.url })),
    ...pipelines.map((p) => ({ ...p, kind: 'pipeline', label: p.description || `${p.destination.type} pipeline` })),
  ];
  if (state.dest) state.dest = state.destinations.find((d) => d.id === state.dest.id) || null;
  drawDestinations();
}

function drawDestinations() {
  $('dest-list').replaceChildren(...destinationList(state.destinations, state.dest && state.dest.id, selectDestination));
  const d = state.dest;
  $('log-title').textContent = d ? d.label : 'All events';
  $('dest-actions').hidden = !d;
  $('toggle-disabled').textContent = d && d.disabled ? 'Enable' : 'Disable';
  $('f-status').disabled = !d;
  $('status-hint').hidden = !!d;
}

function selectDestination(d) {
  state.dest = d;
  if (!d) state.filters.status = '';
  drawDestinations();
  writeHash();
  reload();
}

// ---------------------------------------------------------------- the log (filters in the URL fragment, never credentials)

function readHash() {
  const params = new URLSearchParams(location.hash.slice(1));
  state.filters = Object.fromEntries(FILTERS.map((f) => [f, params.get(f) || '']));
  const dest = params.get('dest');
  state.dest = (dest && state.destinations.find((d) => d.id === dest)) || null;
  $('f-type').value = state.filters.event_type;
  $('f-user').value = state.filters.user_id;
  $('f-status').value = state.filters.status;
  $('f-since').value = toLocalInput(state.filters.since);
  $('f-until').value = toLocalInput(state.filters.until);
  drawDestinations();
}

function writeHash() {
  const params = new URLSearchParams();
  if (state.dest) params.set('dest', state.dest.id);
  for (const f of FILTERS) if (state.filters[f]) params.set(f, state.filters[f]);
  history.replaceState(null, '', `${location.pathname}${params.toString() ? `#${params}` : ''}`);
}

const toLocalInput = (iso) => {
  if (!iso) return '';
  const d = new Date(iso);
  return new Date(d.getTime() - d.getTimezoneOffset() * 60_000).toISOString().slice(0, 19);
};
const fromLocalInput = (value) => (value ? new Date(value).toISOString() : '');

function queryOf(cursor) {
  const f = state.filters;
  const q = { event_type: f.event_type, user_id: f.user_id, since: f.since, until: f.until, next_cursor: cursor, limit: PAGE };
  if (state.dest) q.status = f.status;
  return q;
}

async function reload() {
  state.items = [];
  state.cursor = null;
  state.mode = state.dest ? 'deliveries' : 'events';
  $('rows-head').replaceChildren(tableHead(state.mode));
  $('rows-body').replaceChildren();
  await loadPage();
}

/** The next page (cursor), appended: the log is never read whole, however long it is. */
async function loadPage() {
  const seq = ++state.loadSeq;
  $('list-status').textContent = 'Loading…';
  $('load-more').hidden = true;
  try {
    const q = queryOf(state.cursor);
    const page = state.dest ? await state.api.deliveries(state.dest, q) : await state.api.events(q);
    if (seq !== state.loadSeq) return; // a newer load (another filter) started meanwhile
    state.items.push(...page.data);
    state.cursor = page.next_cursor;
    $('rows-body').append(...page.data.map((item) => logRow(state.mode, item, openItem)));
    $('list-status').textContent = state.items.length ? `${state.items.length} shown${state.cursor ? '' : ' (all)'}` : emptyText();
    $('rows').parentElement.hidden = !state.items.length; // an empty table says less than the sentence below
    $('load-more').hidden = !state.cursor;
  } catch (err) {
    if (seq === state.loadSeq) $('list-status').textContent = '';
    failed(err);
  }
}

/** Why the list is empty, in words: what it lists, under which filters, and where an open event went. */
function emptyText() {
  const f = state.filters;
  const what = state.dest ? `${f.status ? `${f.status} ` : ''}deliveries to ${state.dest.label}` : 'events';
  const terms = [
    f.event_type && `of type ${f.event_type}`,
    f.user_id && `for user ${f.user_id}`,
    f.since && `from ${new Date(f.since).toLocaleString()}`,
    f.until && `until ${new Date(f.until).toLocaleString()}`,
  ].filter(Boolean);
  const filtered = terms.length || (state.dest && f.status);
  let text = `No ${what}${terms.length ? ` ${terms.join(', ')}` : ''}.`;
  // After a resend under a status filter the open event's delivery has moved on: say so, not just "nothing".
  const moved = state.open && state.dest && state.open.deliveries.find((d) => d.webhook_id === state.dest.id);
  const since = { succeeded: 'has succeeded since', pending: 'is pending again', failed: 'has failed since', cancelled: 'was cancelled since' };
  if (moved && f.status && moved.status !== f.status) text += ` The open event's delivery ${since[moved.status] || `is ${moved.status} now`}, so it left this list.`;
  return filtered ? `${text} Clear the filters to see every one.` : text;
}

// ---------------------------------------------------------------- an event: deliveries and attempts

async function openItem(item) {
  const event =
    state.mode === 'events' ? item : { id: item.event_id, event_type: item.event_type, user_id: item.user_id, created_at: item.created_at, data: null };
  state.open = { event, deliveries: [], attempts: [], busy: false };
  markSelected(event.id);
  $('detail').hidden = false;
  $('detail-title').textContent = event.event_type;
  await refreshOpen();
  $('detail').focus();
}

async function refreshOpen() {
  const open = state.open;
  if (!open) return;
  try {
    const [deliveries, attempts] = await Promise.all([state.api.eventDeliveries(open.event.id), state.api.eventAttempts(open.event.id)]);
    if (state.open !== open) return;
    open.deliveries = deliveries.data;
    open.attempts = attempts.data;
    drawOpen();
  } catch (err) {
    failed(err);
  }
}

function drawOpen() {
  $('detail-body').replaceChildren(...eventDetail({ ...state.open, destinations: state.destinations }, resend));
}

function closeOpen() {
  const id = state.open && state.open.event.id;
  state.open = null;
  $('detail').hidden = true;
  const row = id && document.querySelector(`#rows-body tr[data-event="${CSS.escape(id)}"]`);
  if (row) row.focus();
}

/** Resends to one destination, then watches for the new attempt (polls, up to 30 s). */
async function resend(destinationId) {
  const open = state.open;
  const d = state.destinations.find((x) => x.id === destinationId) || { id: destinationId, kind: 'webhook', label: destinationId };
  const before = open.attempts.length;
  open.busy = true;
  drawOpen();
  try {
    await state.api.resend(d, open.event.id);
    toast(`Resend to ${d.label} queued.`);
    for (let i = 0; i < 60 && state.open === open && open.attempts.length <= before; i++) {
      await new Promise((r) => setTimeout(r, 500));
      await refreshOpen();
    }
  } catch (err) {
    failed(err);
  } finally {
    open.busy = false;
    if (state.open === open) drawOpen();
  }
  // The list and the destination's health show the outcome too (the open event stays marked).
  await Promise.all([reload(), loadDestinations().catch(failed)]);
  if (state.open === open) markSelected(open.event.id);
}

// ---------------------------------------------------------------- destination actions

async function toggleDisabled() {
  const d = state.dest;
  try {
    await state.api.setDisabled(d, !d.disabled);
    toast(`${d.label} ${d.disabled ? 'enabled' : 'disabled'}.`);
    await loadDestinations();
  } catch (err) {
    failed(err);
  }
}

function openRecover() {
  $('recover-dest').textContent = state.dest.label;
  $('recover-since').value = toLocalInput(state.filters.since || new Date(Date.now() - 3_600_000).toISOString());
  $('recover-until').value = toLocalInput(state.filters.until);
  $('recover-dialog').showModal();
}

async function recover(event) {
  if (event.submitter && event.submitter.value !== 'recover') return;
  const range = { since: fromLocalInput($('recover-since').value) };
  if ($('recover-until').value) range.until = fromLocalInput($('recover-until').value);
  try {
    const { resent } = await state.api.recover(state.dest, range);
    toast(`${resent} failed ${resent === 1 ? 'delivery' : 'deliveries'} queued again.`);
    await reload();
  } catch (err) {
    failed(err);
  }
}

// ---------------------------------------------------------------- keyboard and little things

function rows() {
  return [...document.querySelectorAll('#rows-body tr')];
}
function markSelected(eventId) {
  for (const r of rows()) r.classList.toggle('selected', r.dataset.event === eventId);
}
function move(step) {
  const all = rows();
  if (!all.length) return;
  const at = all.indexOf(document.activeElement);
  const next = all[Math.min(all.length - 1, Math.max(0, at === -1 ? 0 : at + step))];
  next.focus();
  next.scrollIntoView({ block: 'nearest' });
  if (next === all[all.length - 1] && state.cursor) loadPage();
}

function onKey(e) {
  if ($('console').hidden || e.ctrlKey || e.metaKey || e.altKey) return;
  const typing = /^(INPUT|SELECT|TEXTAREA)$/.test(e.target.tagName) || $('recover-dialog').open;
  if (e.key === 'Escape' && !$('recover-dialog').open) {
    if (typing) e.target.blur();
    else if (state.open) closeOpen();
    return;
  }
  if (typing) return;
  if (e.key === 'j' || e.key === 'ArrowDown') move(1);
  else if (e.key === 'k' || e.key === 'ArrowUp') move(-1);
  else if (e.key === 'Enter' && e.target.closest && e.target.closest('#rows-body tr')) e.target.click();
  else if (e.key === '/') $('f-type').focus();
  else if (e.key === 'r') reload();
  else return;
  e.preventDefault();
}

let toastTimer;
function toast(message, tone = 'ok') {
  const t = $('toast');
  t.textContent = message;
  t.className = `toast toast-${tone}`;
  t.hidden = false;
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => (t.hidden = true), 4000);
}

function wire() {
  $('signin-form').addEventListener('submit', (e) => {
    e.preventDefault();
    const auth = { kind: 'key', secret: $('signin-key').value.trim(), org: $('signin-org').value.trim(), team: $('signin-team').value.trim(), env: $('signin-env').value };
    $('signin-key').value = '';
    signIn(auth);
  });
  $('sign-out').addEventListener('click', () => showSignIn(''));
  $('filters').addEventListener('submit', (e) => {
    e.preventDefault();
    state.filters = { event_type: $('f-type').value.trim(), user_id: $('f-user').value.trim(), status: $('f-status').value, since: fromLocalInput($('f-since').value), until: fromLocalInput($('f-until').value) };
    writeHash();
    reload();
  });
  $('clear-filters').addEventListener('click', () => {
    for (const id of ['f-type', 'f-user', 'f-status', 'f-since', 'f-until']) $(id).value = '';
    $('filters').requestSubmit();
  });
  $('load-more').addEventListener('click', () => loadPage());
  $('close-detail').addEventListener('click', closeOpen);
  $('toggle-disabled').addEventListener('click', toggleDisabled);
  $('open-recover').addEventListener('click', openRecover);
  $('recover-form').addEventListener('submit', recover);
  document.addEventListener('keydown', onKey);
}

/** A sign-in link (#link=…) is used once and leaves the address bar at once; else this tab's earlier sign-in. */
async function start() {
  wire();
  const link = new URLSearchParams(location.hash.slice(1)).get('link');
  if (link) {
    history.replaceState(null, '', location.pathname);
    try {
      const s = await exchangeLink(link);
      return signIn({ kind: 'session', secret: s.token, org: s.org_id, team: s.team_id, env: s.environment, expires_at: s.expires_at });
    } catch (err) {
      return showSignIn(err instanceof ApiError ? `Refused: ${err.message}` : `Could not reach the API: ${err.message}`);
    }
  }
  const saved = sessionStorage.getItem(AUTH_KEY);
  if (saved) return signIn(JSON.parse(saved));
  showSignIn('');
}

start();
