import type { FakeProvider } from './fake-provider';
import { FAKE_DEXCOM_CLIENT, startFakeDexcom } from './dexcom';
import { FAKE_OURA_CLIENT, startFakeOura } from './oura';
import { FAKE_POLAR_CLIENT, startFakePolar } from './polar';
import { FAKE_STRAVA_CLIENT, startFakeStrava } from './strava';
import { FAKE_WHOOP_CLIENT, startFakeWhoop } from './whoop';
import { FAKE_WITHINGS_CLIENT, startFakeWithings } from './withings';

/** Every provider fake, by catalogue slug: how to start it and the client it was "registered" with. */
export const PROVIDER_FAKES: Record<string, { start(opts: { port?: number }): Promise<FakeProvider>; client: { clientId: string; clientSecret: string } }> = {
  oura: { start: startFakeOura, client: FAKE_OURA_CLIENT },
  whoop_v2: { start: startFakeWhoop, client: FAKE_WHOOP_CLIENT },
  polar: { start: startFakePolar, client: FAKE_POLAR_CLIENT },
  strava: { start: startFakeStrava, client: FAKE_STRAVA_CLIENT },
  dexcom_v3: { start: startFakeDexcom, client: FAKE_DEXCOM_CLIENT },
  withings: { start: startFakeWithings, client: FAKE_WITHINGS_CLIENT },
};
