import { OAuthError } from '../lib/wearables/providers/contract';
import { authorizeUrl, exchangeCode, pkcePair } from '../lib/wearables/providers/oauth-client';
import { rebase } from '../lib/wearables/providers/http';
import { integration as oura } from '../lib/wearables/providers/oura';
import { startFakeOura, type FakeOura } from './support/fakes/oura';

/**
 * The shared OAuth client (lib/wearables/providers/oauth-client.ts) against a provider fake, for what no provider of
 * the six exercises on its own: PKCE (S256), which the link step sends for a provider that takes it (Fitbit and
 * Garmin do; both are demo-only here), and PROVIDER_<SLUG>_BASE_URL rebasing.
 */
let fake: FakeOura;
beforeAll(async () => {
  fake = await startFakeOura();
});
afterAll(() => fake.close());

const client = () => ({ clientId: fake.options.clientId, clientSecret: fake.options.clientSecret, redirectUri: 'http://127.0.0.1:1/callback' });

async function consent(url: string): Promise<string> {
  const u = new URL(url);
  const res = await fetch(new URL(fake.options.authorizePath, fake.url), {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ ...Object.fromEntries(u.searchParams), decision: 'approve' }).toString(),
    redirect: 'manual',
  });
  return new URL(res.headers.get('location')!).searchParams.get('code')!;
}

test('PKCE: the authorize URL carries the S256 challenge; the exchange with its verifier succeeds, with another verifier it is refused', async () => {
  const settings = { ...oura.oauth, pkce: true };
  const pkce = pkcePair();
  expect(pkce.verifier).toMatch(/^[A-Za-z0-9_-]{43,128}$/);
  const url = authorizeUrl(settings, client(), 'state-12345678', { baseUrl: fake.url, codeChallenge: pkce.challenge });
  expect(new URL(url).searchParams.get('code_challenge')).toBe(pkce.challenge);
  expect(new URL(url).searchParams.get('code_challenge_method')).toBe('S256');
  const tokens = await exchangeCode(settings, client(), await consent(url), { baseUrl: fake.url, codeVerifier: pkce.verifier });
  expect(tokens.access_token).toMatch(/^at_/);

  const other = authorizeUrl(settings, client(), 'state-12345678', { baseUrl: fake.url, codeChallenge: pkcePair().challenge });
  await expect(exchangeCode(settings, client(), await consent(other), { baseUrl: fake.url, codeVerifier: pkce.verifier })).rejects.toBeInstanceOf(OAuthError);
});

test('a provider without PKCE gets no challenge, and a reused code is an OAuthError (invalid_grant)', async () => {
  const url = authorizeUrl(oura.oauth, client(), 'state-12345678', { baseUrl: fake.url });
  expect(new URL(url).searchParams.has('code_challenge')).toBe(false);
  const code = await consent(url);
  await exchangeCode(oura.oauth, client(), code, { baseUrl: fake.url });
  await expect(exchangeCode(oura.oauth, client(), code, { baseUrl: fake.url })).rejects.toMatchObject({ error: 'invalid_grant' });
});

test('PROVIDER_<SLUG>_BASE_URL replaces scheme, host and port and keeps path and query; a base with a path prefixes it', () => {
  expect(rebase('https://api.ouraring.com/v2/usercollection/sleep?start_date=1', 'http://127.0.0.1:9400')).toBe(
    'http://127.0.0.1:9400/v2/usercollection/sleep?start_date=1',
  );
  expect(rebase('https://cloud.ouraring.com/oauth/authorize', 'https://proxy.example/oura/')).toBe('https://proxy.example/oura/oauth/authorize');
  expect(rebase('https://api.ouraring.com/oauth/token', undefined)).toBe('https://api.ouraring.com/oauth/token');
});
