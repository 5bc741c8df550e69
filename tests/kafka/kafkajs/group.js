// A kafkajs consumer group member against zlog: reads COUNT records of TOPIC from the start,
// commits after each, leaves. Usage: node group.js BOOTSTRAP GROUP TOPIC COUNT; prints one
// JSON line with the values read.
const { Kafka, logLevel } = require("kafkajs");

async function main() {
  const [bootstrap, group, topic, count] = process.argv.slice(2);
  const kafka = new Kafka({ clientId: "zlog-test", brokers: [bootstrap], logLevel: logLevel.ERROR });
  const consumer = kafka.consumer({ groupId: group, sessionTimeout: 6000, heartbeatInterval: 500 });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  const values = [];
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`read ${values.length} of ${count}`)), 45000);
    consumer.run({
      autoCommit: false,
      eachMessage: async ({ partition, message }) => {
        values.push(message.value.toString());
        await consumer.commitOffsets([{ topic, partition, offset: (BigInt(message.offset) + 1n).toString() }]);
        if (values.length >= Number(count)) { clearTimeout(timer); resolve(); }
      },
    }).catch(reject);
  });
  await consumer.disconnect();
  console.log(JSON.stringify({ values }));
}

main().catch((error) => { console.error(error); process.exit(1); });
