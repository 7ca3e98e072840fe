// Starts a RabbitMQ and a Kafka broker of their own (scripts/stack/rabbitmq.mjs, scripts/stack/kafka.mjs) in
// BROKER_STATE_DIR for the broker and pipeline tests. Prints `ready <json>` with their addresses once both answer.
// Reads commands on stdin, one per line, for outage tests: `stop rabbitmq`, `start rabbitmq`, `stop kafka`,
// `start kafka` (same port, same data), answering `done <command>` (or `failed <command>: <reason>`).
// SIGTERM stops both and exits (a test that fails still stops them in its afterAll).
import { startKafka } from '../../scripts/stack/kafka.mjs';
import { startRabbitmq } from '../../scripts/stack/rabbitmq.mjs';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import readline from 'node:readline';

const stateDir = process.env.BROKER_STATE_DIR;
const log = (line) => console.log(line);
// Kafka also takes SASL/PLAIN logins on a second listener, for pipelines with credentials.
const kafkaSasl = { username: 'healthbridge', password: `kpw-${randomBytes(12).toString('hex')}` };
let [rabbitmq, kafka] = await Promise.all([
  // A password of its own (not the user name), so tests can look for it where it must not be.
  startRabbitmq({ stateDir: path.join(stateDir, 'rabbitmq'), password: `pw-${randomBytes(12).toString('hex')}`, log }),
  startKafka({
    stateDir: path.join(stateDir, 'kafka'),
    log,
    autoCreateTopics: process.env.BROKER_KAFKA_AUTO_CREATE_TOPICS === 'true',
    sasl: { users: { [kafkaSasl.username]: kafkaSasl.password } },
  }),
]);
console.log(`ready ${JSON.stringify({ amqpUrl: rabbitmq.url, kafkaBootstrap: kafka.bootstrap, kafkaSasl: { bootstrap: kafka.saslBootstrap, ...kafkaSasl } })}`);

const commands = {
  'stop rabbitmq': () => rabbitmq.stop(),
  'start rabbitmq': () => rabbitmq.start(),
  'stop kafka': () => kafka.stop(),
  'start kafka': async () => (kafka = await startKafka({ ...kafka.startOptions, log })),
};
let queue = Promise.resolve();
readline.createInterface({ input: process.stdin }).on('line', (line) => {
  const command = line.trim();
  queue = queue.then(async () => {
    if (!commands[command]) return console.log(`failed ${command}: unknown command`);
    try {
      await commands[command]();
      console.log(`done ${command}`);
    } catch (err) {
      console.log(`failed ${command}: ${err.message.split('\n')[0]}`);
    }
  });
});

// The brokers run detached: this process stays until it is told to stop them.
const keepAlive = setInterval(() => undefined, 60_000);
let stopping = false;
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.on(signal, async () => {
    if (stopping) return;
    stopping = true;
    await queue.catch(() => undefined);
    await Promise.allSettled([rabbitmq.stop(), kafka.stop()]);
    clearInterval(keepAlive);
    console.log('stopped');
    process.exit(0);
  });
}
