// The PostgreSQL cluster behind FerretDB: a template cluster made once, copied per stack, started on a Unix socket.
// Part of the dev stack: scripts/stack.mjs is its entry point and says what it does.

import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { which } from './binaries.mjs';
import { POSTGRES_MAJOR, isRoot, runLogged } from './common.mjs';
import { postgresReady, spawnServer, stopPids, waitReady } from './processes.mjs';

/** postgresql.conf lines of every cluster (the port and address are set per start, see postgresCommand). */
const POSTGRES_CONF = [
  '# Healthbridge embedded store (scripts/stack.mjs)',
  "shared_preload_libraries = 'pg_cron,pg_documentdb_core,pg_documentdb'",
  "cron.database_name = 'postgres'",
  "timezone = 'UTC'",
  "log_timezone = 'UTC'",
].join('\n');

export async function createTemplateCluster(paths, log) {
  const prefix = 'setup documentdb';
  log(`[${prefix}] creating the template cluster (initdb, CREATE EXTENSION documentdb CASCADE)...`);
  // initdb runs inside the root (as its postgres user: PostgreSQL refuses root), then the cluster moves out.
  const inRoot = '/var/lib/healthbridge-template';
  const idOf = (flag) => Number(execFileSync('chroot', [paths.root, 'id', flag, 'postgres'], { encoding: 'utf8' }).trim());
  fs.mkdirSync(path.join(paths.root, inRoot), { mode: 0o700 });
  fs.chownSync(path.join(paths.root, inRoot), idOf('-u'), idOf('-g'));
  await runLogged(
    prefix,
    'chroot',
    [
      '--userspec=postgres:postgres',
      paths.root,
      `/usr/lib/postgresql/${POSTGRES_MAJOR}/bin/initdb`,
      '-D',
      inRoot,
      '-A',
      'trust',
      '-U',
      'postgres',
      '--locale=C',
      '--encoding=UTF8',
    ],
    { env: { LC_ALL: 'C' }, quiet: true },
    log,
  );
  fs.renameSync(path.join(paths.root, inRoot), paths.template);
  walkTree(paths.template, (p) => fs.lchownSync(p, process.getuid(), process.getgid()));
  fs.appendFileSync(path.join(paths.template, 'postgresql.conf'), `\n${POSTGRES_CONF}\n`);

  // Start it the way every run does, create the extension, stop it cleanly.
  const socketDir = path.join(path.dirname(paths.template), 'socket');
  fs.mkdirSync(socketDir, { mode: 0o700 });
  const logFile = path.join(path.dirname(paths.template), 'template.log');
  const [bin, args] = postgresCommand(paths, paths.template, socketDir);
  const server = spawnServer(bin, args, logFile);
  try {
    await waitReady({ label: 'PostgreSQL (template)', server, logFile, probe: () => postgresReady(socketDir), interval: 100 });
    await runLogged(
      prefix,
      paths.loader,
      [
        '--library-path',
        paths.libraryPath,
        paths.bin('psql'),
        '-h',
        socketDir,
        '-p',
        String(POSTGRES_SOCKET_PORT),
        '-U',
        'postgres',
        '-v',
        'ON_ERROR_STOP=1',
        '-c',
        'CREATE EXTENSION documentdb CASCADE',
      ],
      { quiet: true },
      log,
    );
  } finally {
    // Fast shutdown, as for every stack: a clean checkpoint, nothing for a copy to recover.
    await stopPids({ postgres: server.child.pid }, () => {}, { stopSignals: { postgres: 'SIGINT' } });
    fs.rmSync(socketDir, { recursive: true, force: true });
  }
  for (const leftover of ['postmaster.pid', 'postmaster.opts']) fs.rmSync(path.join(paths.template, leftover), { force: true });
  // Readable by anyone, so a non-root user can copy it (an empty cluster; each copy is its owner's alone).
  walkTree(paths.template, (p, kind) => kind !== 'link' && fs.chmodSync(p, fs.statSync(p).mode | (kind === 'dir' ? 0o555 : 0o444)));
}

/** Calls `visit(path, kind)` for `dir` ('dir') and everything below it ('dir', 'file' or 'link'), children first. */
export function walkTree(dir, visit) {
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, entry.name);
    if (entry.isDirectory()) walkTree(p, visit);
    else visit(p, entry.isSymbolicLink() ? 'link' : 'file');
  }
  visit(dir, 'dir');
}

/**
 * PostgreSQL listens on a Unix socket only, in a folder of the stack's own (mode 0700), never on TCP: the cluster
 * trusts its connections, so only the user who started it (and root) may reach it. The socket's name still
 * carries a port number; one is enough, since each stack has its own folder.
 */
export const POSTGRES_SOCKET_PORT = 5432;
export const POSTGRES_SOCKET_MAX = 100; // a Unix socket path longer than ~107 bytes cannot be bound

/**
 * The command that runs sid's `postgres` on this host: through the root's own dynamic loader and libraries
 * (the host's glibc is older), so no chroot and no mount is needed. PostgreSQL refuses to run as root; as root,
 * the server runs in a user namespace where it is `nobody` while its files stay the invoking user's (no second
 * account, no chown, and every path the caller can reach stays reachable).
 */
export function postgresCommand(documentdb, dataDir, socketDir) {
  const args = [
    '--library-path',
    documentdb.libraryPath,
    documentdb.bin('postgres'),
    '-D',
    dataDir,
    '-c',
    `port=${POSTGRES_SOCKET_PORT}`,
    '-c',
    'listen_addresses=',
    '-c',
    `unix_socket_directories=${socketDir}`,
    '-c',
    'unix_socket_permissions=0700',
    // DocumentDB runs some commands over a connection of its own to `localhost`: point it at the socket.
    '-c',
    `documentdb.localhost_connection_string=host=${socketDir} port=${POSTGRES_SOCKET_PORT}`,
    // pg_cron runs DocumentDB's jobs (TTL expiry, background index builds, cursor clean-up) in background
    // workers: the jobs' stored host and port are the template cluster's, which no stack listens on.
    '-c',
    'cron.use_background_workers=on',
    '-c',
    'cron.log_run=off', // two jobs every 2 s would fill the log
    '-c',
    'max_worker_processes=32',
  ];
  if (!isRoot()) return [documentdb.loader, args];
  return [which('unshare') || 'unshare', ['--user', '--map-user=65534', '--map-group=65534', '--', documentdb.loader, ...args]];
}

/** A data directory of the stack's own: a copy of the template cluster (instant, versus initdb + extension). */
export function preparePostgresData(documentdb, dataDir) {
  if (fs.existsSync(path.join(dataDir, 'PG_VERSION'))) return false;
  fs.rmSync(dataDir, { recursive: true, force: true });
  fs.cpSync(documentdb.template, dataDir, { recursive: true });
  // PostgreSQL requires its data directory to be the owner's alone (0700); files 0600.
  walkTree(dataDir, (p, kind) => kind !== 'link' && fs.chmodSync(p, kind === 'dir' ? 0o700 : 0o600));
  return true;
}

/** Mount points at or below `dir` (deepest first), from /proc/self/mountinfo. */
export function mountsUnder(dir) {
  let text = '';
  try {
    text = fs.readFileSync('/proc/self/mountinfo', 'utf8');
  } catch {
    return [];
  }
  let prefix = path.resolve(dir);
  try {
    prefix = fs.realpathSync(prefix); // mountinfo lists real paths
  } catch {}
  return text
    .split('\n')
    .map((line) => line.split(' ')[4]?.replace(/\\([0-7]{3})/g, (_, octal) => String.fromCharCode(parseInt(octal, 8))))
    .filter((p) => p && (p === prefix || p.startsWith(`${prefix}/`)))
    .sort((a, b) => b.length - a.length);
}
