#!/usr/bin/env node
// The embedded dev stack: a real Temporal dev server and a real MongoDB-wire database on loopback, without
// Docker. The database is `mongod` if one is on PATH; else PostgreSQL 18 with the DocumentDB extension
// behind FerretDB v2 (the MongoDB wire-protocol gateway): indexed, with atomic single-document updates.
// See the design notes (devstack.md). Node built-ins only: this runs before dependencies are installed and
// from CI on a fresh clone.
//
//   node scripts/stack.mjs ensure   locate, install or build the server binaries (prints their versions)
//   node scripts/stack.mjs start    start the stack in the background (state in .devstack/)
//   node scripts/stack.mjs stop     stop it
//   node scripts/stack.mjs status   show stack.json and which pids are alive (exit 1 if not running)
//
// MONGO_URL / TEMPORAL_ADDRESS point at external servers instead of starting our own.
//
// Its parts are in scripts/stack/: common.mjs, binaries.mjs, documentdb.mjs, postgres.mjs, processes.mjs, lifecycle.mjs;
// the servers tests add: rabbitmq.mjs and kafka.mjs (pipelines' brokers), prometheus.mjs (the metrics test).

import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ensureBinaries } from './stack/binaries.mjs';
import { describeVersions } from './stack/documentdb.mjs';
import { startStack, stopStack } from './stack/lifecycle.mjs';
import { isOurs, readStackFile } from './stack/processes.mjs';

export { ensureBinaries, cacheDir, TEMPORAL_SEARCH_ATTRIBUTES } from './stack/binaries.mjs';
export { embeddedStoreAvailable, describeVersions } from './stack/documentdb.mjs';
export { startStack, stopStack, reapAbandonedStacks, stopStacksWithin } from './stack/lifecycle.mjs';
export { freePort } from './stack/processes.mjs';

// ---------------------------------------------------------------------------------------------
// CLI
// ---------------------------------------------------------------------------------------------

const DEV_STATE_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '.devstack');

function envPort(name, fallback) {
  const raw = process.env[name];
  if (!raw) return fallback;
  const port = Number(raw);
  if (!Number.isInteger(port) || port < 1 || port > 65535) throw new Error(`${name}=${raw} is not a valid port`);
  return port;
}

/** The dev stack's fixed ports (`npm run dev`, `stack.mjs start`), each movable with its variable. */
export function devPorts() {
  return {
    mongo: envPort('DEV_MONGO_PORT', 27017),
    temporal: envPort('DEV_TEMPORAL_PORT', 7233),
    temporalUi: envPort('DEV_TEMPORAL_UI_PORT', 8233),
  };
}

async function main(cmd) {
  switch (cmd) {
    case 'ensure': {
      const bins = await ensureBinaries();
      for (const [key, value] of Object.entries(bins)) {
        if (key === 'documentdb') console.log(`postgres + documentdb: ${value.dir}\n  ${describeVersions(value)}`);
        else console.log(`${key}: ${value}`);
      }
      if (process.env.MONGO_URL) console.log(`database: external (MONGO_URL)`);
      if (process.env.TEMPORAL_ADDRESS) console.log(`temporal: external (TEMPORAL_ADDRESS)`);
      return 0;
    }
    case 'start': {
      // The servers are in their own process groups, so Ctrl-C would not reach them: clean up here.
      const abort = async () => {
        await stopStack({ stateDir: DEV_STATE_DIR, log: () => {} }).catch(() => {});
        process.exit(130);
      };
      process.once('SIGINT', abort);
      process.once('SIGTERM', abort);
      const info = await startStack({ stateDir: DEV_STATE_DIR, ports: devPorts() });
      console.log(`\nDev stack running (state and logs in ${DEV_STATE_DIR}):`);
      console.log(`  MONGO_URL=${info.mongoUrl}`);
      console.log(`  TEMPORAL_ADDRESS=${info.temporalAddress}`);
      if (info.temporalUiUrl) console.log(`  Temporal UI: ${info.temporalUiUrl}`);
      for (const version of Object.values(info.versions)) console.log(`  ${version}`);
      console.log(`Stop it with: node scripts/stack.mjs stop`);
      return 0;
    }
    case 'stop': {
      const running = readStackFile(DEV_STATE_DIR);
      await stopStack({ stateDir: DEV_STATE_DIR, force: true });
      console.log(running ? 'stack: stopped' : 'stack: not running');
      return 0;
    }
    case 'status': {
      const info = readStackFile(DEV_STATE_DIR);
      if (!info) {
        console.log(`stack: not running (no ${path.join(DEV_STATE_DIR, 'stack.json')})`);
        return 1;
      }
      console.log(JSON.stringify(info, null, 2));
      let allAlive = true;
      for (const [name, pid] of Object.entries(info.pids || {})) {
        const alive = isOurs(pid, info.starts?.[name]);
        allAlive &&= alive;
        console.log(`${name}: pid ${pid} ${alive ? 'alive' : 'NOT running'}`);
      }
      return allAlive ? 0 : 1;
    }
    default:
      console.error('usage: node scripts/stack.mjs <ensure|start|stop|status>');
      return 2;
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main(process.argv[2]).then(
    (code) => process.exit(code),
    (err) => {
      console.error(err instanceof Error ? err.message : err);
      process.exit(1);
    },
  );
}
