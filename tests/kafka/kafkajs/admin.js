// kafkajs's admin client against zlog: create, grow, describe, list and delete topics.
// Usage: node admin.js BOOTSTRAP TOPIC; prints one JSON line of what each call returned.
const { Kafka, logLevel, ConfigResourceTypes } = require("kafkajs");

async function main() {
  const [bootstrap, topic] = process.argv.slice(2);
  const kafka = new Kafka({ clientId: "zlog-test", brokers: [bootstrap], logLevel: logLevel.ERROR });
  const admin = kafka.admin();
  await admin.connect();
  const created = await admin.createTopics({
    topics: [{ topic, numPartitions: 2, configEntries: [{ name: "retention.ms", value: "123456" }] }],
    waitForLeaders: false,
  });
  await admin.createPartitions({ topicPartitions: [{ topic, count: 4 }] });
  const metadata = await admin.fetchTopicMetadata({ topics: [topic] });
  const configs = await admin.describeConfigs({
    includeSynonyms: false,
    resources: [{ type: ConfigResourceTypes.TOPIC, name: topic, configNames: ["retention.ms"] }],
  });
  const cluster = await admin.describeCluster();
  const groups = await admin.listGroups();
  const listed = await admin.listTopics();
  await admin.deleteTopics({ topics: [topic] });
  const after = await admin.listTopics();
  await admin.disconnect();
  console.log(JSON.stringify({
    created,
    partitions: metadata.topics[0].partitions.length,
    retention: configs.resources[0].configEntries[0].configValue,
    controller: cluster.controller,
    brokers: cluster.brokers.map((b) => `${b.nodeId}@${b.host}:${b.port}`),
    groups: groups.groups,
    listed: listed.includes(topic),
    deleted: !after.includes(topic),
  }));
}

main().catch((error) => { console.error(error); process.exit(1); });
