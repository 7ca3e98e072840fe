// Apache Kafka in KRaft mode (one combined broker + controller, no ZooKeeper) from its jars on Maven Central, run
// with the machine's Java: fetched once with Maven into the user cache, formatted on first start, stopped cleanly.
// Part of the dev stack: scripts/stack.mjs is its entry point and says what it does.
//
//   node scripts/stack/kafka.mjs ensure              fetch the jars into the cache (prints version and classpath)
//   node scripts/stack/kafka.mjs start <stateDir>    run a broker in the foreground until Ctrl-C

import { execFile } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { cacheDir, which } from './binaries.mjs';
import { STOP_TIMEOUT_MS, rmrf, runLogged, seconds, sleep, withBuildLock } from './common.mjs';
import { assertPortFree, freePort, isAlive, probeSocket, procStartTime, signalGroup, spawnServer, waitReady } from './processes.mjs';

/**
 * The newest Kafka on Maven Central whose broker runs on Java 17 (Kafka 4.x: broker and tools need Java 17, its
 * classes are Java 17 bytecode). Kafka logs through slf4j 1.7 and depends on log4j-core but not on the binding
 * that joins them (the distribution's libs/ has it): without it the broker logs nothing, so it is added at the
 * version of the log4j-core that Kafka brings. Maven's dependency plugin is pinned too.
 */
export const KAFKA_VERSION = '4.4.0';
export const KAFKA_SCALA = '2.13';
const LOG4J_VERSION = '2.25.5';
const DEPENDENCY_PLUGIN = 'org.apache.maven.plugins:maven-dependency-plugin:3.8.1';
const MIN_JAVA = 17;
export const KAFKA_BUILD = `kafka_${KAFKA_SCALA}-${KAFKA_VERSION}-log4j${LOG4J_VERSION}`;
const REQUIRED_JARS = [
  `kafka_${KAFKA_SCALA}-${KAFKA_VERSION}.jar`,
  `kafka-clients-${KAFKA_VERSION}.jar`,
  `log4j-slf4j-impl-${LOG4J_VERSION}.jar`,
  `log4j-core-${LOG4J_VERSION}.jar`,
];
/** Heap of the test broker: enough for benchmarks with ~1 KB messages (RSS ~350-400 MB). */
const KAFKA_HEAP = '256m';

export const kafkaCachePath = () => path.join(cacheDir(), KAFKA_BUILD);

// ---- Jars ----------------------------------------------------------------------------------

let javaChecked = null;

/** The `java` to run Kafka with ($JAVA_HOME/bin/java, else PATH), checked once to be Java >= 17. */
export async function findJava() {
  if (javaChecked) return javaChecked;
  const home = process.env.JAVA_HOME && path.join(process.env.JAVA_HOME, 'bin', 'java');
  const java = home && fs.existsSync(home) ? home : which('java');
  const fix = `Fix: install a Java ${MIN_JAVA}+ runtime (Debian/Ubuntu: \`apt-get install openjdk-17-jre-headless\`) and put \`java\` on PATH or set JAVA_HOME.`;
  if (!java) throw new Error(`kafka: Apache Kafka ${KAFKA_VERSION} needs Java ${MIN_JAVA}+, but \`java\` is not on PATH (nor in JAVA_HOME).\n${fix}`);
  const out = await new Promise((resolve) =>
    execFile(java, ['-version'], { timeout: 20_000, encoding: 'utf8' }, (err, stdout, stderr) => resolve(err ? `error: ${err.message}` : `${stderr}${stdout}`)),
  );
  const m = /version "(\d+)(?:\.(\d+))?/.exec(out);
  const major = m ? (m[1] === '1' ? Number(m[2]) : Number(m[1])) : null;
  if (!major) throw new Error(`kafka: cannot tell the version of ${java}: \`java -version\` said:\n${out.trim()}\n${fix}`);
  if (major < MIN_JAVA) throw new Error(`kafka: Apache Kafka ${KAFKA_VERSION}'s broker needs Java ${MIN_JAVA}+, but ${java} is Java ${major}.\n${fix}`);
  javaChecked = { java, major };
  return javaChecked;
}

const hasJars = (dir) => REQUIRED_JARS.every((jar) => fs.existsSync(path.join(dir, 'libs', jar)));

/**
 * Fetches Kafka's jars with their runtime dependencies from Maven Central into the user cache, once (later calls
 * only check the folder). Needs `java` (17+) and, for the first fetch only, `mvn` on PATH. Returns
 * { version, dir, classpath, java }.
 */
export async function ensureKafka({ log = console.log } = {}) {
  const { java } = await findJava();
  const dir = kafkaCachePath();
  const result = () => ({ version: KAFKA_VERSION, dir, classpath: path.join(dir, 'libs', '*'), java });
  if (hasJars(dir)) return result();
  const mvn = which('mvn');
  if (!mvn) {
    throw new Error(
      `kafka: Apache Kafka ${KAFKA_VERSION} is not in the cache (${dir}) and Maven is needed to fetch its jars once ` +
        `from Maven Central, but \`mvn\` is not on PATH.\n` +
        `Fix: install Maven >= 3.6 (Debian/Ubuntu: \`apt-get install maven\`) and rerun \`node scripts/stack/kafka.mjs ensure\`.`,
    );
  }
  return withBuildLock('kafka', log, async () => {
    if (hasJars(dir)) {
      log(`[build kafka] reusing ${dir} (fetched by another process)`);
      return result();
    }
    const started = Date.now();
    log(`[build kafka] fetching Apache Kafka ${KAFKA_VERSION} (Scala ${KAFKA_SCALA}) and its dependencies from Maven Central (~45 MB) ...`);
    const tmp = fs.mkdtempSync(path.join(cacheDir(), '.build-kafka-'));
    try {
      const dep = (g, a, v) => `<dependency><groupId>${g}</groupId><artifactId>${a}</artifactId><version>${v}</version></dependency>`;
      const pom = `<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>
  <groupId>local.healthbridge</groupId><artifactId>kafka-jars</artifactId><version>0</version><packaging>pom</packaging>
  <dependencies>
    ${dep('org.apache.kafka', `kafka_${KAFKA_SCALA}`, KAFKA_VERSION)}
    ${dep('org.apache.logging.log4j', 'log4j-slf4j-impl', LOG4J_VERSION)}
  </dependencies>
</project>
`;
      fs.writeFileSync(path.join(tmp, 'pom.xml'), pom);
      const libs = path.join(tmp, 'kafka', 'libs');
      // A private local repository (removed afterwards): the cache holds only the jars. ~/.m2/settings.xml
      // (mirrors, proxies) still applies.
      const args = [
        '-B',
        '-q',
        '-Dstyle.color=never',
        `-Dmaven.repo.local=${path.join(tmp, 'm2')}`,
        `${DEPENDENCY_PLUGIN}:copy-dependencies`,
        '-DincludeScope=runtime',
        `-DoutputDirectory=${libs}`,
      ];
      try {
        await runLogged('build kafka', mvn, args, { cwd: tmp, quiet: true }, log);
      } catch (err) {
        throw new Error(`${err.message}\nMaven could not fetch the jars: Maven Central (or the mirror in ~/.m2/settings.xml) must be reachable.`);
      }
      if (!hasJars(path.dirname(libs))) throw new Error(`[build kafka] Maven finished but ${REQUIRED_JARS.join(', ')} are not all in ${libs}`);
      const jars = fs.readdirSync(libs).filter((f) => f.endsWith('.jar'));
      const bytes = jars.reduce((n, f) => n + fs.statSync(path.join(libs, f)).size, 0);
      rmrf(dir); // an incomplete folder (jars removed by hand)
      fs.renameSync(path.dirname(libs), dir); // same filesystem: the folder appears complete or not at all
      log(`[build kafka] done in ${seconds(Date.now() - started)}: ${jars.length} jars, ${(bytes / 1e6).toFixed(0)} MB in ${dir}`);
      return result();
    } finally {
      rmrf(tmp);
    }
  });
}

// ---- Broker --------------------------------------------------------------------------------

/** A cluster id as Kafka's Uuid.randomUuid makes them: 16 random bytes, URL-safe base64, never starting with '-'. */
function randomClusterId() {
  for (;;) {
    const id = crypto.randomBytes(16).toString('base64url');
    if (!id.startsWith('-')) return id;
  }
}

function serverProperties({ dataDir, port, controllerPort, autoCreateTopics, sasl }) {
  // An optional second listener that takes SASL/PLAIN logins (`sasl: { port, users: { name: password } }`).
  const saslListener = sasl ? `,SASL_PLAINTEXT://127.0.0.1:${sasl.port}` : '';
  const jaasUsers = sasl
    ? Object.entries(sasl.users)
        .map(([user, password]) => `user_${user}="${password}"`)
        .join(' ')
    : '';
  return `# Written by scripts/stack/kafka.mjs at every start (ports may change; the data in log.dirs stays).
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:${controllerPort}
listeners=PLAINTEXT://127.0.0.1:${port},CONTROLLER://127.0.0.1:${controllerPort}${saslListener}
advertised.listeners=PLAINTEXT://127.0.0.1:${port}${saslListener}
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT
${
  sasl
    ? `sasl.enabled.mechanisms=PLAIN
listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required ${jaasUsers};
`
    : ''
}controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
log.dirs=${dataDir}
# Topics are created explicitly (as on most managed clusters), so a missing topic is an error, not a new topic.
auto.create.topics.enable=${autoCreateTopics}
num.partitions=1
default.replication.factor=1
offsets.topic.replication.factor=1
# One partition each: the internal topics are created at the first group / producer id request, 50 would slow it.
offsets.topic.num.partitions=1
transaction.state.log.num.partitions=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
# After a crash (kill -9) the controller refuses the new broker until the old one's session expires (default 9 s).
broker.session.timeout.ms=4000
broker.heartbeat.interval.ms=1000
`;
}

// Kafka logs through log4j2: to stdout (the log file), without the configuration dumps (~2,000 lines a start).
const LOG4J_CONFIG = `status = warn
appender.out.type = Console
appender.out.name = STDOUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = STDOUT
logger.config.name = org.apache.kafka.common.config.AbstractConfig
logger.config.level = WARN
`;

// SerialGC: a small heap on a few cores needs no G1 threads and regions.
const jvmArgs = (dir, classpath) => [
  ...[`-Xms${KAFKA_HEAP}`, `-Xmx${KAFKA_HEAP}`, '-XX:+UseSerialGC', '-Djava.awt.headless=true'],
  ...[`-Dlog4j2.configurationFile=${path.join(dir, 'log4j2.properties')}`, '-cp', classpath],
];

/**
 * Readiness: the broker answers a Metadata request (v4) listing itself, which it does once it has registered
 * with the controller and been unfenced. Metadata v4 is within what Kafka 4.x accepts (v0-v3 are gone).
 */
export function kafkaMetadataReady(port) {
  const clientId = Buffer.from('healthbridge-stack');
  const correlationId = 1 + Math.floor(Math.random() * 1e6);
  const req = Buffer.alloc(4 + 10 + clientId.length + 5);
  let o = req.writeInt32BE(req.length - 4, 0);
  o = req.writeInt16BE(3, o); // api key: Metadata
  o = req.writeInt16BE(4, o); // version 4
  o = req.writeInt32BE(correlationId, o);
  o = req.writeInt16BE(clientId.length, o);
  o += clientId.copy(req, o);
  o = req.writeInt32BE(0, o); // no topics
  req.writeInt8(0, o); // allow_auto_topic_creation: false
  return probeSocket({ host: '127.0.0.1', port }, req, (buf) => {
    if (buf.length < 4 || buf.length < 4 + buf.readInt32BE(0)) return undefined;
    if (buf.readInt32BE(4) !== correlationId) return false;
    let p = 12; // size, correlation id, throttle_time_ms
    const brokers = buf.readInt32BE(p);
    p += 4;
    for (let i = 0; i < brokers; i++) {
      p += 4; // node id
      p += 2 + buf.readInt16BE(p); // host
      if (buf.readInt32BE(p) === port) return true;
      p += 4;
      p += 2 + Math.max(0, buf.readInt16BE(p)); // rack (nullable)
    }
    return false;
  });
}

function commandLine(pid) {
  try {
    return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ');
  } catch {
    return '';
  }
}

// Gone means reaped, not merely a zombie (isAlive): a killed JVM's leader turns zombie while its other
// threads, which share its sockets, are still exiting, and its ports are not free until they have.
function exists(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return err.code === 'EPERM';
  }
}

async function waitGone(pid, ms) {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline && exists(pid)) await sleep(50);
  return !exists(pid);
}

/**
 * A broker left running on this state folder by a run that was killed holds its ports and its log dirs' lock:
 * it is killed, unless the process that started it is still alive.
 */
async function reapPrevious(stateDir, log, { force = false } = {}) {
  const file = path.join(stateDir, 'kafka.json');
  let prev;
  try {
    prev = JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch {
    return;
  }
  const same = prev.pid && exists(prev.pid) && procStartTime(prev.pid) === prev.start;
  if (same && !isAlive(prev.pid))
    await waitGone(prev.pid, 5000); // killed, still exiting
  else if (same && commandLine(prev.pid).includes('kafka.Kafka')) {
    if (!force && prev.owner !== process.pid && isAlive(prev.owner)) {
      throw new Error(
        `kafka: ${stateDir} is in use by a broker (pid ${prev.pid}) of a running process (pid ${prev.owner}); stop it first, or use another state folder.`,
      );
    }
    log(`stack: killing the Kafka broker (pid ${prev.pid}) left running on ${stateDir}`);
    signalGroup(prev.pid, 'SIGKILL');
    await waitGone(prev.pid, 5000);
  }
  fs.rmSync(file, { force: true });
}

/** Kills the broker recorded in `stateDir` (kafka.json) whoever started it: what a reaper of state folders calls. */
export const stopLeftoverKafka = ({ stateDir, log = console.log }) => reapPrevious(path.resolve(stateDir), log, { force: true });

/**
 * Starts a single-node Kafka (broker + controller, KRaft) on loopback with its data in `${stateDir}/data`,
 * formatting that on first use, and waits until a client can fetch metadata. Ports default to free ones.
 * Restart on the same data: call startKafka again with the returned `startOptions` (same ports, so clients
 * keep their bootstrap address); after stop() or kill() (SIGKILL, a crash: Kafka recovers its logs).
 * Returns { bootstrap, saslBootstrap, port, controllerPort, pid, version, clusterId, logFile, startOptions, readyMs, stop(), kill() };
 * `sasl: { users: { name: password }, port? }` adds a SASL/PLAIN listener (saslBootstrap) beside the plaintext one.
 */
export async function startKafka({ stateDir, port, controllerPort, autoCreateTopics = false, sasl = null, log = console.log } = {}) {
  if (!stateDir) throw new Error('startKafka: stateDir is required');
  stateDir = path.resolve(stateDir);
  const { version, classpath, java } = await ensureKafka({ log });
  fs.mkdirSync(stateDir, { recursive: true });
  await reapPrevious(stateDir, log);
  port = port || (await freePort());
  if (!controllerPort)
    do controllerPort = await freePort();
    while (controllerPort === port);
  if (port === controllerPort) throw new Error(`startKafka: port and controllerPort are both ${port}`);
  await assertPortFree(port, 'Kafka');
  await assertPortFree(controllerPort, "Kafka's controller");

  const dataDir = path.join(stateDir, 'data');
  const configFile = path.join(stateDir, 'server.properties');
  const logFile = path.join(stateDir, 'kafka.log');
  if (sasl && !sasl.port) sasl = { ...sasl, port: await freePort() };
  if (sasl) await assertPortFree(sasl.port, "Kafka's SASL listener");
  fs.writeFileSync(configFile, serverProperties({ dataDir, port, controllerPort, autoCreateTopics, sasl }));
  fs.writeFileSync(path.join(stateDir, 'log4j2.properties'), LOG4J_CONFIG);
  const jvm = jvmArgs(stateDir, classpath);

  if (!fs.existsSync(path.join(dataDir, 'meta.properties'))) {
    const clusterId = randomClusterId();
    log(`stack: formatting Kafka storage in ${dataDir} (cluster id ${clusterId}) ...`);
    const args = [...jvm, 'kafka.tools.StorageTool', 'format', '--cluster-id', clusterId, '--config', configFile];
    try {
      await runLogged('kafka format', java, args, { quiet: true }, log);
    } catch (err) {
      rmrf(dataDir); // half-formatted: the next start formats again
      throw new Error(`kafka: formatting the storage failed.\n${err.message}`);
    }
  }
  const clusterId = /^cluster\.id=(.*)$/m.exec(fs.readFileSync(path.join(dataDir, 'meta.properties'), 'utf8'))?.[1];

  log(`stack: starting Apache Kafka ${version} (KRaft broker + controller) on 127.0.0.1:${port} (controller ${controllerPort}) ...`);
  fs.appendFileSync(logFile, `\n===== ${new Date().toISOString()} starting Kafka ${version} on 127.0.0.1:${port}\n`);
  const server = spawnServer(java, [...jvm, 'kafka.Kafka', configFile], logFile);
  const pid = server.child.pid;
  const record = { pid, start: procStartTime(pid), owner: process.pid, port, controllerPort, clusterId, version };
  fs.writeFileSync(path.join(stateDir, 'kafka.json'), `${JSON.stringify(record, null, 2)}\n`);

  let stopped = null;
  const end = (signal, graceMs) => {
    stopped ??= (async () => {
      const started = Date.now();
      if (exists(pid)) {
        signalGroup(pid, signal);
        if (!(await waitGone(pid, graceMs))) {
          log(`stack: Kafka (pid ${pid}) did not exit within ${graceMs / 1000} s, killing it`);
          signalGroup(pid, 'SIGKILL');
          await waitGone(pid, 5000);
        }
      }
      fs.rmSync(path.join(stateDir, 'kafka.json'), { force: true });
      return Date.now() - started;
    })();
    return stopped;
  };

  let readyMs;
  try {
    if (!pid) throw new Error(`kafka: could not start ${java}: ${server.error?.message ?? 'no pid'}`);
    readyMs = await waitReady({ label: `Kafka ${version}`, server, logFile, probe: () => kafkaMetadataReady(port), interval: 200 });
  } catch (err) {
    await end('SIGKILL', 5000);
    throw err;
  }
  log(`stack: Kafka ${version} ready on 127.0.0.1:${port} (${seconds(readyMs)})`);
  return {
    bootstrap: `127.0.0.1:${port}`,
    port,
    controllerPort,
    pid,
    version,
    clusterId,
    logFile,
    readyMs,
    /** The SASL/PLAIN listener's `host:port`, when `sasl` asked for one. */
    saslBootstrap: sasl ? `127.0.0.1:${sasl.port}` : null,
    startOptions: { stateDir, port, controllerPort, autoCreateTopics, sasl },
    /** SIGTERM (controlled shutdown, ~0.5 s), SIGKILL after STOP_TIMEOUT_MS; resolves with the time it took. */
    stop: () => end('SIGTERM', STOP_TIMEOUT_MS),
    /** SIGKILL at once: a crash, for recovery tests. */
    kill: () => end('SIGKILL', 5000),
  };
}

// ---------------------------------------------------------------------------------------------
// CLI
// ---------------------------------------------------------------------------------------------

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const [cmd, stateDir] = process.argv.slice(2);
  const run = async () => {
    if (cmd === 'ensure') {
      const k = await ensureKafka();
      console.log(`kafka ${k.version}: ${k.dir}\n  java: ${k.java}\n  classpath: ${k.classpath}`);
    } else if (cmd === 'start' && stateDir) {
      const k = await startKafka({ stateDir });
      console.log(`bootstrap: ${k.bootstrap} (pid ${k.pid}); Ctrl-C stops it`);
      const alive = setInterval(() => {}, 1 << 30); // the broker is detached: keep this process up until a signal
      const stop = async () => {
        console.log(`stopped in ${seconds(await k.stop())}`);
        clearInterval(alive);
      };
      for (const signal of ['SIGINT', 'SIGTERM']) process.once(signal, stop);
    } else {
      console.error('usage: node scripts/stack/kafka.mjs ensure | start <stateDir>');
      process.exitCode = 2;
    }
  };
  run().catch((err) => {
    console.error(err.message);
    process.exitCode = 1;
  });
}
