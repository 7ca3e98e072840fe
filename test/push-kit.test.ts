import { freshWithin, hmacSha256, MAX_PUSH_AGE_MS, pushHeader, sameText } from '../lib/wearables/providers/push-kit';
import type { PushRequest } from '../lib/wearables/providers/contract';

/** What every provider's push verifier is built from; each provider's own signature format is tested in its file. */
describe('push kit', () => {
  const request = (headers: Record<string, string>): PushRequest => ({ method: 'POST', query: {}, headers, rawBody: Buffer.from('{}') });

  it('finds a header whatever case the sender or a proxy wrote it in', () => {
    expect(pushHeader(request({ 'x-oura-timestamp': '1767225600' }), 'x-oura-timestamp')).toBe('1767225600');
    expect(pushHeader(request({ 'X-WHOOP-Signature': 'c2lnbmVk' }), 'x-whoop-signature')).toBe('c2lnbmVk');
    expect(pushHeader(request({ 'polar-webhook-event': 'EXERCISE' }), 'Polar-Webhook-Event')).toBe('EXERCISE');
    expect(pushHeader(request({ 'x-oura-signature': 'ABC' }), 'x-oura-timestamp')).toBeUndefined();
  });

  it('compares texts byte for byte: equal, same length but different, different length, multi-byte', () => {
    expect(sameText('verify-token-1', 'verify-token-1')).toBe(true);
    expect(sameText('verify-token-1', 'verify-token-2')).toBe(false);
    expect(sameText('verify-token-1', 'verify-token-12')).toBe(false);
    expect(sameText('', '')).toBe(true);
    expect(sameText('é', 'e\u0301')).toBe(false);
  });

  it('takes a push as fresh within five minutes of our clock on either side, and never with an unreadable time', () => {
    const now = new Date('2026-05-24T12:00:00Z');
    expect(MAX_PUSH_AGE_MS).toBe(5 * 60_000);
    expect(freshWithin(now, now.getTime() - MAX_PUSH_AGE_MS)).toBe(true);
    expect(freshWithin(now, now.getTime() - MAX_PUSH_AGE_MS - 1)).toBe(false);
    expect(freshWithin(now, now.getTime() + MAX_PUSH_AGE_MS)).toBe(true);
    expect(freshWithin(now, now.getTime() + MAX_PUSH_AGE_MS + 1)).toBe(false);
    expect(freshWithin(now, now.getTime() - 3_600_000, 2 * 3_600_000)).toBe(true);
    expect(freshWithin(now, Number.NaN)).toBe(false);
  });

  it('computes HMAC-SHA256 over its parts in order, as over their concatenation (RFC 4231 test case 2)', () => {
    const expectedHex = '5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843';
    expect(hmacSha256('Jefe', ['what do ya want for nothing?'], 'hex')).toBe(expectedHex);
    expect(hmacSha256('Jefe', ['what do ya ', Buffer.from('want for nothing?')], 'hex')).toBe(expectedHex);
    expect(hmacSha256('Jefe', ['what do ya want for nothing?'], 'base64')).toBe(Buffer.from(expectedHex, 'hex').toString('base64'));
    expect(hmacSha256('Jefe', ['what do ya want for nothing!'], 'hex')).not.toBe(expectedHex);
  });
});
