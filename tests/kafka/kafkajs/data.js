// kafkajs driven from the tests (tests/kafka_clients.py): one JSON command in argv, the
// records read (if any) as one JSON line on stdout. Bytes travel as hex.
const { Kafka, CompressionTypes, logLevel } = require("kafkajs");

const CODECS = { none: CompressionTypes.None, gzip: CompressionTypes.GZIP };

async function produce(kafka, command) {
  const producer = kafka.producer({ idempotent: command.idempotent, maxInFlightRequests: 1 });
  await producer.connect();
  await producer.send({
    topic: command.topic,
    acks: command.acks,
    compression: CODECS[command.codec],
    messages: command.records.map((r) => ({
      partition: 0,
      key: r.key === null ? null : Buffer.from(r.key, "hex"),
      value: r.value === null ? null : Buffer.from(r.value, "hex"),
      headers: Object.fromEntries(r.headers.map(([k, v]) => [k, Buffer.from(v, "hex")])),
      timestamp: r.timestamp,
    })),
  });
  await producer.disconnect();
  return [];
}

async function read(kafka, command) {
  let offset = command.offset;
  if (command.timestamp !== null) {
    const admin = kafka.admin();
    await admin.connect();
    const found = await admin.fetchTopicOffsetsByTimestamp(command.topic, command.timestamp);
    await admin.disconnect();
    offset = found.find((p) => p.partition === 0).offset;
  }
  const consumer = kafka.consumer({ groupId: `reader-${process.pid}-${Date.now()}`,
                                    maxWaitTimeInMs: 100, readUncommitted: false });
  await consumer.connect();
  await consumer.subscribe({ topic: command.topic, fromBeginning: true });
  const records = [];
  await new Promise((resolve, reject) => {
    consumer.on(consumer.events.CRASH, (event) => reject(event.payload.error));
    consumer
      .run({
        autoCommit: false,
        eachMessage: async ({ partition, message }) => {
          if (partition !== 0 || records.length >= command.count) return;
          records.push({
            key: message.key === null ? null : message.key.toString("hex"),
            value: message.value === null ? null : message.value.toString("hex"),
            headers: Object.entries(message.headers || {}).map(([k, v]) => [k, v.toString("hex")]),
            timestamp: message.timestamp,
            offset: message.offset,
          });
          if (records.length >= command.count) resolve();
        },
      })
      .catch(reject);
    consumer.seek({ topic: command.topic, partition: 0, offset });
  });
  await consumer.disconnect();
  return records;
}

async function main() {
  const command = JSON.parse(process.argv[2]);
  const kafka = new Kafka({ clientId: "zlog-tests", brokers: [command.bootstrap],
                            logLevel: logLevel.ERROR });
  const records = command.op === "produce" ? await produce(kafka, command)
                                           : await read(kafka, command);
  // Exit once stdout is written: a pipe is written asynchronously.
  await new Promise((resolve) => process.stdout.write(JSON.stringify(records) + "\n", resolve));
}

main().then(() => process.exit(0), (error) => {
  process.stderr.write(`${error.stack || error}\n`);
  process.exit(1);
});
