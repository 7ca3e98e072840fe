// The link-token API as the link page calls it: the token from the page's address in x-vital-link-token, nothing else.
// (The request itself is the delivery-log page's: one way to call the API from a page.)
import { send } from '/console/assets/api.js';

export function linkApi(token) {
  const headers = { 'x-vital-link-token': token };
  const slug = (provider) => encodeURIComponent(provider);
  return {
    state: () => send('GET', '/v2/link/state', headers),
    providers: () => send('GET', '/v2/link/providers', headers),
    connectDemo: (provider) => send('POST', `/v2/link/provider/demo/${slug(provider)}`, headers),
    oauth: (provider, region) => send('GET', `/v2/link/provider/oauth/${slug(provider)}${region ? `?region=${encodeURIComponent(region)}` : ''}`, headers),
    signIn: (provider, method, fields) => send('POST', `/v2/link/provider/${method}/${slug(provider)}`, headers, fields),
  };
}
