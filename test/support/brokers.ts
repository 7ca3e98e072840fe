import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import type amqp from 'amqplib';
import { collectLines } from './child-lines';
import { eventually } from './harness';

/**
 * A RabbitMQ and a Kafka broker of a test file's own, in a driver process (broker-driver.mjs), the way the
 * stack starts its servers; `command` stops or starts one of them (outage tests) and waits until it is done.
 */
export interface TestBrokers {
  amqpUrl: string;
  kafkaBootstrap: string;
  /** The same Kafka's SASL/PLAIN listener and its one user. */
  kafkaSasl: { bootstrap: string; username: string; password: string };
  lines: string[];
  command(command: 'stop rabbitmq' | 'start rabbitmq' | 'stop kafka' | 'start kafka'): Promise<void>;
  /** Stops both brokers; true when the driver said it stopped them. */
  stop(): Promise<boolean>;
}

export async function startTestBrokers(name: string, env: Record<string, string> = {}): Promise<TestBrokers> {
  const stateDir = path.join(process.env.HB_TEST_STATE_DIR ?? path.join(__dirname, '..', '..', '.devstack', 'test-adhoc'), `${name}-${process.pid}`);
  const driver: ChildProcess = spawn(process.execPath, [path.join(__dirname, 'broker-driver.mjs')], {
    env: { ...process.env, ...env, BROKER_STATE_DIR: stateDir },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  const lines = collectLines(driver);
  const exited = new Promise<never>((_, reject) =>
    driver.once('exit', (code) => reject(new Error(`the broker driver exited (${code}):\n${lines.join('\n')}`))),
  );
  exited.catch(() => undefined); // also after `ready`: stop() looks for its 'stopped'
  const ready = await Promise.race([
    eventually(
      async () => {
        const line = lines.find((l) => l.startsWith('ready '));
        return line ? (JSON.parse(line.slice('ready '.length)) as Pick<TestBrokers, 'amqpUrl' | 'kafkaBootstrap' | 'kafkaSasl'>) : null;
      },
      240_000, // a first run fetches RabbitMQ's packages and Kafka's jars into the cache
      'RabbitMQ and Kafka',
    ),
    exited,
  ]);
  return {
    ...ready,
    lines,
    async command(command) {
      const seen = lines.length;
      driver.stdin!.write(`${command}\n`);
      const answer = await eventually(
        async () => lines.slice(seen).find((l) => l === `done ${command}` || l.startsWith(`failed ${command}`)),
        120_000,
        command,
      );
      if (answer !== `done ${command}`) throw new Error(`${answer}\n${lines.slice(seen).join('\n')}`);
    },
    async stop() {
      if (driver.exitCode === null) {
        const gone = new Promise((r) => driver.once('exit', r));
        driver.kill('SIGTERM');
        let timer: NodeJS.Timeout | undefined;
        await Promise.race([gone, new Promise((r) => (timer = setTimeout(r, 25_000)))]);
        clearTimeout(timer);
        if (driver.exitCode === null) driver.kill('SIGKILL');
      }
      // Its pipes would keep the test process alive (a broker's helper process may hold them a while longer).
      for (const stream of [driver.stdin, driver.stdout, driver.stderr]) stream?.destroy();
      return lines.includes('stopped');
    },
  };
}

/** A durable queue bound to `exchange` (a topic exchange, declared if missing) with `routingKey`, and the messages it receives. */
export async function boundQueue(
  connection: amqp.ChannelModel,
  exchange: string,
  routingKey: string,
): Promise<{ messages: amqp.ConsumeMessage[]; queue: string }> {
  const channel = await connection.createChannel();
  await channel.assertExchange(exchange, 'topic', { durable: true });
  const { queue } = await channel.assertQueue(`${routingKey}-${randomUUID()}`, { durable: true });
  await channel.bindQueue(queue, exchange, routingKey);
  const messages: amqp.ConsumeMessage[] = [];
  await channel.consume(queue, (m) => m && messages.push(m), { noAck: true });
  return { messages, queue };
}
