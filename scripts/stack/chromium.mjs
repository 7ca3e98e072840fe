// Debian's Chromium for the browser tests (test/console.test.ts drives it with playwright-core): installed once with
// apt-get when missing. Unlike the stack's servers it cannot live in the user cache (it needs its shared
// libraries from the system), so installing it needs root; running it does not.

import fs from 'node:fs';
import { which } from './binaries.mjs';
import { runLogged, seconds } from './common.mjs';

/** How tests and scripts start it: executable and flags (chromium-launch.json, read by test/support/browser.ts too). */
export const CHROMIUM_LAUNCH = JSON.parse(fs.readFileSync(new URL('./chromium-launch.json', import.meta.url), 'utf8'));
export const CHROMIUM_BIN = CHROMIUM_LAUNCH.executablePath;

/** Debian's `chromium` at CHROMIUM_BIN (installed with apt-get if missing, which needs root). Returns { bin }. */
export async function ensureChromium({ log = console.log } = {}) {
  if (fs.existsSync(CHROMIUM_BIN)) return { bin: CHROMIUM_BIN };
  const fix = 'sudo apt-get install -y --no-install-recommends chromium';
  if (!which('apt-get'))
    throw new Error(`setup chromium: ${CHROMIUM_BIN} is missing and this machine has no apt-get; install Debian's chromium package (${fix}).`);
  if (process.getuid?.() !== 0) throw new Error(`setup chromium: ${CHROMIUM_BIN} is missing (the browser tests need it); install it once as root: ${fix}`);
  const prefix = 'setup chromium';
  const started = Date.now();
  log(`[${prefix}] Debian's chromium is missing (test/console.test.ts drives it); apt-get install -y --no-install-recommends chromium ...`);
  const env = { DEBIAN_FRONTEND: 'noninteractive' };
  await runLogged(prefix, 'apt-get', ['update'], { env, quiet: true }, log);
  await runLogged(prefix, 'apt-get', ['install', '-y', '--no-install-recommends', 'chromium'], { env, quiet: true }, log);
  if (!fs.existsSync(CHROMIUM_BIN)) throw new Error(`setup chromium: apt-get installed chromium but ${CHROMIUM_BIN} is not there.`);
  log(`[${prefix}] done in ${seconds(Date.now() - started)}`);
  return { bin: CHROMIUM_BIN };
}
