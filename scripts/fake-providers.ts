import { providerEnvKey } from '../lib/platform/config';
import { PROVIDER_FAKES } from '../test/support/fakes/all';

/**
 * `DEV_FAKE_PROVIDERS=1 npm run dev` starts this: the six provider fakes (test/support/fakes/) on loopback, so a
 * newcomer can click through a real OAuth flow without provider accounts. Prints one JSON line of the environment
 * that points the providers at them (PROVIDER_<SLUG>_BASE_URL, _CLIENT_ID, _CLIENT_SECRET), then serves until stopped.
 * Ports: DEV_FAKE_PROVIDERS_PORT (default 9400) and the next five, in catalogue order.
 */
async function main(): Promise<void> {
  const base = Number(process.env.DEV_FAKE_PROVIDERS_PORT || 9400);
  const env: Record<string, string> = {};
  const fakes: { close(): Promise<void> }[] = [];
  for (const [i, [slug, fake]] of Object.entries(PROVIDER_FAKES).entries()) {
    const started = await fake.start({ port: base + i });
    fakes.push(started);
    env[providerEnvKey(slug, 'BASE_URL')] = started.url;
    env[providerEnvKey(slug, 'CLIENT_ID')] = fake.client.clientId;
    env[providerEnvKey(slug, 'CLIENT_SECRET')] = fake.client.clientSecret;
  }
  process.stdout.write(`${JSON.stringify(env)}\n`);
  const stop = async () => {
    await Promise.all(fakes.map((f) => f.close()));
    process.exit(0);
  };
  process.once('SIGINT', () => void stop());
  process.once('SIGTERM', () => void stop());
}

main().catch((err) => {
  console.error(`fake providers failed: ${(err as Error).message}`);
  process.exit(1);
});
