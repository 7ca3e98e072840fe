// Starts a RabbitMQ and a Kafka broker of their own (scripts/stack/rabbitmq.mjs, scripts/stack/kafka.mjs) in
// BROKER_STATE_DIR for test/brokers.test.ts. Prints `ready <json>` with their addresses once both answer;
// SIGTERM stops both and exits (a test that fails still stops them in its afterAll).
import { startKafka } from '../../scripts/stack/kafka.mjs';
import { startRabbitmq } from '../../scripts/stack/rabbitmq.mjs';
import path from 'node:path';

const stateDir = process.env.BROKER_STATE_DIR;
const log = (line) => console.log(line);
const [rabbitmq, kafka] = await Promise.all([
  startRabbitmq({ stateDir: path.join(stateDir, 'rabbitmq'), log }),
  startKafka({ stateDir: path.join(stateDir, 'kafka'), log }),
]);
console.log(`ready ${JSON.stringify({ amqpUrl: rabbitmq.url, kafkaBootstrap: kafka.bootstrap })}`);
// The brokers run detached: this process stays until it is told to stop them.
const keepAlive = setInterval(() => undefined, 60_000);
let stopping = false;
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.on(signal, async () => {
    if (stopping) return;
    stopping = true;
    await Promise.allSettled([rabbitmq.stop(), kafka.stop()]);
    clearInterval(keepAlive);
    console.log('stopped');
    process.exit(0);
  });
}
