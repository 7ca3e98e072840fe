// Temporal's time-skipping test server (the Java SDK's `io.temporal:temporal-test-server`) from Maven Central, run
// with the machine's Java: fetched once with Maven into the user cache, with a launcher that takes the port as its
// argument, as @temporalio/testing's createTimeSkipping runs it (test/support/time-skipping.ts).
// Part of the dev stack: scripts/stack.mjs is its entry point and says what it does.
//
//   node scripts/stack/temporal-test-server.mjs ensure       fetch the jars into the cache (prints the launcher)
//   node scripts/stack/temporal-test-server.mjs executable   the same, printing only the launcher's path (for tests)

import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { cacheDir, which } from './binaries.mjs';
import { rmrf, runLogged, seconds, withBuildLock } from './common.mjs';

/** The newest release on Maven Central (2026-11); its classes are Java 8 bytecode, run here on Java 17. */
export const TEMPORAL_TEST_SERVER_VERSION = '1.38.0';
/** The server logs through slf4j 1.7 without a binding (slf4j prints a warning at every start): this one discards its logs. */
const SLF4J_NOP_VERSION = '1.7.36';
const DEPENDENCY_PLUGIN = 'org.apache.maven.plugins:maven-dependency-plugin:3.8.1';
const MAIN_CLASS = 'io.temporal.testserver.TestServer';

const serverDir = () => path.join(cacheDir(), `temporal-test-server-${TEMPORAL_TEST_SERVER_VERSION}-slf4j-nop${SLF4J_NOP_VERSION}`);
const launcherOf = (dir) => path.join(dir, 'temporal-test-server');

/** `java` from JAVA_HOME, else PATH; null when neither has one. */
function findJava() {
  const home = process.env.JAVA_HOME && path.join(process.env.JAVA_HOME, 'bin', 'java');
  return home && fs.existsSync(home) ? home : which('java');
}

/**
 * The test server's jars with their runtime dependencies in the user cache (once; later calls only check the
 * folder) and a launcher script beside them: `temporal-test-server <port>` runs the server in the foreground, its
 * clock locked until a client unlocks time skipping (as the SDK's own download behaves). Needs `java` and, for the
 * first fetch only, `mvn` on PATH. Returns { version, executable }.
 */
export async function ensureTemporalTestServer({ log = console.log } = {}) {
  const dir = serverDir();
  const result = () => ({ version: `temporal-test-server ${TEMPORAL_TEST_SERVER_VERSION}`, executable: launcherOf(dir) });
  if (fs.existsSync(launcherOf(dir))) return result();
  const java = findJava();
  const mvn = which('mvn');
  if (!java || !mvn) {
    throw new Error(
      `temporal-test-server ${TEMPORAL_TEST_SERVER_VERSION} is not in the cache (${dir}); fetching it once from Maven Central needs ` +
        `Java 17+ and Maven >= 3.6, but ${[!java && '`java`', !mvn && '`mvn`'].filter(Boolean).join(' and ')} is not on PATH.\n` +
        `Fix (Debian/Ubuntu): \`apt-get install openjdk-17-jre-headless maven\`, then rerun \`node scripts/stack/temporal-test-server.mjs ensure\`.`,
    );
  }
  return withBuildLock('temporal-test-server', log, async () => {
    if (fs.existsSync(launcherOf(dir))) return result();
    const started = Date.now();
    log(
      `[build temporal-test-server] fetching Temporal's time-skipping test server ${TEMPORAL_TEST_SERVER_VERSION} and its dependencies from Maven Central (~40 MB) ...`,
    );
    const tmp = fs.mkdtempSync(path.join(cacheDir(), '.build-temporal-test-server-'));
    try {
      const pom = `<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>
  <groupId>local.healthbridge</groupId><artifactId>temporal-test-server-jars</artifactId><version>0</version><packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>io.temporal</groupId><artifactId>temporal-test-server</artifactId><version>${TEMPORAL_TEST_SERVER_VERSION}</version></dependency>
    <dependency><groupId>org.slf4j</groupId><artifactId>slf4j-nop</artifactId><version>${SLF4J_NOP_VERSION}</version></dependency>
  </dependencies>
</project>
`;
      fs.writeFileSync(path.join(tmp, 'pom.xml'), pom);
      const out = path.join(tmp, 'server');
      const libs = path.join(out, 'libs');
      // A private local repository (removed afterwards): the cache holds only the jars.
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
        await runLogged('build temporal-test-server', mvn, args, { cwd: tmp, quiet: true }, log);
      } catch (err) {
        throw new Error(`${err.message}\nMaven could not fetch the jars: Maven Central (or the mirror in ~/.m2/settings.xml) must be reachable.`);
      }
      const jars = fs.readdirSync(libs).filter((f) => f.endsWith('.jar'));
      if (!jars.includes(`temporal-test-server-${TEMPORAL_TEST_SERVER_VERSION}.jar`))
        throw new Error(`[build temporal-test-server] Maven finished but the server's jar is not in ${libs}`);
      // exec: the SDK stops the server by killing the process it started, which must be the JVM itself.
      // SerialGC and a small heap: a few workflows at a time on a 2-core machine.
      fs.writeFileSync(
        launcherOf(out),
        `#!/bin/sh\n# Written by scripts/stack/temporal-test-server.mjs: temporal-test-server <port>\nexec "${java}" -Xmx256m -XX:+UseSerialGC -cp "${path.join(dir, 'libs')}/*" ${MAIN_CLASS} "$@"\n`,
        { mode: 0o755 },
      );
      rmrf(dir); // an incomplete folder (files removed by hand)
      fs.renameSync(out, dir); // same filesystem: the folder appears complete or not at all
      log(`[build temporal-test-server] done in ${seconds(Date.now() - started)}: ${jars.length} jars in ${dir}`);
      return result();
    } finally {
      rmrf(tmp);
    }
  });
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const cmd = process.argv[2];
  if (cmd === 'ensure' || cmd === 'executable') {
    // Progress on stderr: `executable` prints nothing but the path on stdout.
    ensureTemporalTestServer({ log: (m) => console.error(m) }).then(
      (s) => console.log(cmd === 'ensure' ? `${s.version}: ${s.executable} <port>` : s.executable),
      (err) => {
        console.error(err.message);
        process.exitCode = 1;
      },
    );
  } else {
    console.error('usage: node scripts/stack/temporal-test-server.mjs ensure | executable');
    process.exitCode = 2;
  }
}
