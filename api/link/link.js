// The hosted link page: shows the team's brand and the providers the link offers, and connects the one the user
// picks (demo: at once; OAuth: on to the provider's sign-in; password/email: a sign-in form). Text only (textContent).
import { linkApi } from './link-api.js';

const $ = (id) => document.getElementById(id);
const SECTIONS = ['loading', 'choose', 'oauth', 'credentials', 'done', 'failed'];
const token = new URLSearchParams(location.search).get('token') || '';
const api = linkApi(token);
let state = null;
let providers = [];

function el(tag, props = {}, children = []) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) {
    if (k === 'text') node.textContent = v;
    else if (k === 'class') node.className = v;
    else node.setAttribute(k, v);
  }
  for (const child of children) node.append(child);
  return node;
}

/** Shows one step; focus goes to its heading so screen readers announce it. */
function show(id, focus) {
  for (const s of SECTIONS) $(s).hidden = s !== id;
  if (focus) focus.focus();
  else $(`${id}-title`)?.focus?.();
}

function say(id, message) {
  $(id).textContent = message || '';
  $(id).hidden = !message;
}

// ---- brand --------------------------------------------------------------------------------------------------------

/** Relative luminance (WCAG 2) of #rrggbb. */
function luminance(hex) {
  const [r, g, b] = [1, 3, 5].map((i) => parseInt(hex.slice(i, i + 2), 16) / 255).map((c) => (c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4));
  return 0.2126 * r + 0.7152 * g + 0.0722 * b;
}

/** The team's colour on buttons and the card's edge, with white or black text, whichever contrasts more (≥ 4.58:1). */
function applyBrand(team) {
  let color = (team.brand_color || '').trim();
  if (/^#[0-9a-f]{3}$/i.test(color)) color = `#${[...color.slice(1)].map((c) => c + c).join('')}`;
  if (/^#[0-9a-f]{6}$/i.test(color)) {
    const l = luminance(color);
    document.documentElement.style.setProperty('--brand', color);
    document.documentElement.style.setProperty('--on-brand', (l + 0.05) / 0.05 > 1.05 / (l + 0.05) ? '#000000' : '#ffffff');
  }
  $('brand-name').textContent = team.name;
  document.title = `Connect your health data · ${team.name}`;
  // Only a logo this page may load (same origin or inline): nothing comes from other hosts.
  const logo = team.logo_url && new URL(team.logo_url, location.href);
  if (logo && (logo.origin === location.origin || logo.protocol === 'data:')) {
    $('brand-logo').src = logo.href;
    $('brand-logo').alt = `${team.name} logo`;
    $('brand-logo').hidden = false;
    $('brand-name').classList.add('visually-hidden');
  } else {
    $('brand-mark').textContent = team.name.split(/\s+/).filter(Boolean).slice(0, 2).map((w) => w[0].toUpperCase()).join('');
  }
}

// ---- providers ----------------------------------------------------------------------------------------------------

const METHOD_BADGE = { demo: 'Demo', oauth: 'Sign in', password: 'Password', email: 'Email' };

function renderProviders() {
  const list = $('providers');
  list.replaceChildren(
    ...providers.map((p, i) => {
      const radio = el('input', { type: 'radio', name: 'provider', value: p.slug, id: `p-${p.slug}`, 'aria-describedby': `d-${p.slug}` });
      if (i === 0) radio.checked = true;
      return el('li', { 'data-search': `${p.name} ${p.slug}`.toLowerCase() }, [
        el('label', { class: 'provider', for: `p-${p.slug}` }, [
          radio,
          el('img', { src: `/v2/providers/${encodeURIComponent(p.slug)}/logo.svg`, alt: '' }),
          el('span', { class: 'name', text: p.name }),
          el('span', { class: 'desc', id: `d-${p.slug}`, text: p.description }),
          el('span', { class: `badge ${p.link_method}`, text: METHOD_BADGE[p.link_method] }),
        ]),
      ]);
    }),
  );
}

function filterProviders() {
  const q = $('search').value.trim().toLowerCase();
  let shown = 0;
  for (const li of $('providers').children) {
    li.hidden = !!q && !li.dataset.search.includes(q);
    if (!li.hidden) shown += 1;
  }
  $('no-match').hidden = shown > 0;
  const checked = $('providers').querySelector('input:checked');
  if (checked && checked.closest('li').hidden) {
    const first = [...$('providers').children].find((li) => !li.hidden);
    if (first) first.querySelector('input').checked = true;
  }
  $('live').textContent = `${shown} provider${shown === 1 ? '' : 's'}`;
}

const selected = () => providers.find((p) => p.slug === $('providers').querySelector('input:checked')?.value);

// ---- connecting ---------------------------------------------------------------------------------------------------

/** A connect outcome: on to the redirect_url (`?state=…&provider=…`), the success step, or its error in `errorId`. */
function outcome(result, provider, errorId) {
  if (result.state !== 'success') return say(errorId, result.error || 'The provider did not connect. Try again.');
  const target = result.redirect_url && safeUrl(result.redirect_url);
  if (target) {
    target.searchParams.set('state', 'success');
    target.searchParams.set('provider', provider.slug);
    location.assign(target.href);
    return;
  }
  $('done-title').textContent = `${provider.name} is connected`;
  $('done-text').textContent = `${state.team.name} can now receive your ${provider.name} data. You can close this window.`;
  $('expiry').textContent = '';
  show('done');
}

function safeUrl(url) {
  try {
    const parsed = new URL(url);
    return parsed.protocol === 'https:' || parsed.protocol === 'http:' ? parsed : null;
  } catch {
    return null;
  }
}

/** A refused token (401: used in another tab, expired meanwhile) ends the page; other failures stay on the step. */
function failure(err, errorId) {
  if (err.status === 401) return fail(err.message);
  say(errorId, err.message);
}

function fail(message) {
  $('failed-text').textContent = message;
  $('expiry').textContent = '';
  show('failed');
}

async function busy(button, work) {
  button.disabled = true;
  try {
    await work();
  } finally {
    button.disabled = false;
  }
}

async function choose(event) {
  event.preventDefault();
  const provider = selected();
  say('choose-error', '');
  if (!provider) return say('choose-error', 'Choose a provider first.');
  if (provider.link_method === 'demo') {
    $('live').textContent = `Connecting ${provider.name}…`;
    return busy($('choose-continue'), () => api.connectDemo(provider.slug).then((r) => outcome(r, provider, 'choose-error'), (err) => failure(err, 'choose-error')));
  }
  if (provider.link_method === 'oauth') return showOAuth(provider);
  showCredentials(provider);
}

async function showOAuth(provider) {
  $('oauth-title').textContent = `Connect ${provider.name}`;
  $('oauth-text').textContent = `You will continue at ${provider.name} to sign in and allow ${state.team.name} to read your data. ${provider.name} then sends you back.`;
  // A real integration (the deployment or the team has an OAuth app there) signs in for real, sandbox included.
  say('oauth-sandbox', state.environment === 'sandbox' && provider.integration !== 'real' ? `Sandbox: ${provider.name}'s sign-in cannot be reached from this test deployment, so this step ends in an error page. Providers marked Demo connect at once with sample data.` : '');
  say('oauth-error', '');
  // A provider that keeps each account in one region (Dexcom): the user says which; the sign-in goes to its server.
  const regions = provider.regions || [];
  $('oauth-region-field').hidden = !regions.length;
  $('oauth-region-label').textContent = `Where is your ${provider.name} account?`;
  $('oauth-region').replaceChildren(...regions.map((r) => el('option', { value: r.id, text: r.label })));
  if (regions.length) $('oauth-region').value = provider.default_region || regions[0].id;
  $('oauth-region').onchange = () => signInUrl(provider, false);
  show('oauth');
  await signInUrl(provider, true);
}

let signInRequest = 0;

/** The provider's sign-in address (in the chosen region, if it has regions) behind the Continue button; the last asked wins. */
async function signInUrl(provider, focus) {
  const mine = ++signInRequest;
  $('oauth-continue').hidden = true;
  say('oauth-error', '');
  try {
    const source = await api.oauth(provider.slug, provider.regions?.length ? $('oauth-region').value : undefined);
    if (mine !== signInRequest) return;
    $('oauth-continue').href = source.oauth_url;
    $('oauth-continue').textContent = `Continue to ${provider.name}`;
    $('oauth-continue').hidden = false;
    if (focus) $('oauth-continue').focus();
  } catch (err) {
    failure(err, 'oauth-error');
  }
}

function showCredentials(provider) {
  const fields = provider.form_components?.fields || [];
  $('cred-title').textContent = `Sign in to ${provider.name}`;
  $('cred-text').textContent = `${state.team.name} receives your ${provider.name} data; your ${provider.link_method === 'email' ? 'email' : 'password'} is used to connect only.`;
  $('cred-fields').replaceChildren(
    ...fields.map((f) => el('label', { for: `f-${f.name}` }, [f.label, el('input', { id: `f-${f.name}`, name: f.name, type: f.type, autocomplete: f.autocomplete, required: '', spellcheck: 'false' })])),
  );
  const hints = fields.filter((f) => f.sandbox_value).map((f) => `${f.label.toLowerCase()} “${f.sandbox_value}”`);
  say('cred-hint', hints.length ? `Sandbox: ${provider.name} cannot be reached from this test deployment; sign in with ${hints.join(' and ')} to connect sample data.` : '');
  say('cred-error', '');
  $('cred-form').dataset.provider = provider.slug;
  show('credentials', $('cred-fields').querySelector('input'));
}

async function signIn(event) {
  event.preventDefault();
  const provider = providers.find((p) => p.slug === $('cred-form').dataset.provider);
  const inputs = [...$('cred-fields').querySelectorAll('input')];
  const empty = inputs.find((i) => !i.value);
  if (empty) {
    say('cred-error', `Enter your ${empty.labels[0].textContent.toLowerCase()}.`);
    return empty.focus();
  }
  const fields = Object.fromEntries(inputs.map((i) => [i.name, i.value]));
  await busy($('cred-submit'), () => api.signIn(provider.slug, provider.link_method, fields).then((r) => outcome(r, provider, 'cred-error'), (err) => failure(err, 'cred-error')));
}

function back() {
  show('choose', $('providers').querySelector('input:checked') || $('search'));
}

// ---- start --------------------------------------------------------------------------------------------------------

async function start() {
  $('choose-form').addEventListener('submit', choose);
  $('cred-form').addEventListener('submit', signIn);
  $('search').addEventListener('input', filterProviders);
  $('oauth-back').addEventListener('click', back);
  $('cred-back').addEventListener('click', back);
  try {
    [state, providers] = await Promise.all([api.state(), api.providers()]);
  } catch (err) {
    return fail(err.message);
  }
  applyBrand(state.team);
  $('expiry').textContent = `This link works until ${new Date(state.expires_at).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' })}.`;
  if (!providers.length) return fail('This link offers no provider that can be connected here. Ask the app that sent you for a new link.');
  $('choose-intro').textContent = `Choose the app or device whose data you want to share with ${state.team.name}.`;
  renderProviders();
  // One provider (the token names it): no need to search.
  $('search').hidden = $('search').previousElementSibling.hidden = providers.length < 6;
  show('choose', $('providers').querySelector('input'));
}

start();
