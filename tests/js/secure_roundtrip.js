// Produce three records over a secured listener with kafkajs, read them back in a consumer group, commit,
// and print what was read and the group's committed offset as JSON. Used by
// tests/integration/test_security_clients.py.
// usage: node secure_roundtrip.js BROKER TOPIC GROUP SECURITY_JSON
//   SECURITY_JSON: {"ssl": {"ca": path, "cert": path, "key": path} | null,
//                   "sasl": {"mechanism": "plain" | "scram-sha-512", "username": u, "password": p} | null}
const fs = require("fs");
const { Kafka, logLevel } = require("kafkajs");

async function main() {
  const [broker, topic, group, securityJson] = process.argv.slice(2);
  const security = JSON.parse(securityJson);
  let ssl = false;
  if (security.ssl) {
    ssl = { ca: [fs.readFileSync(security.ssl.ca, "utf8")] };
    if (security.ssl.cert) {
      ssl.cert = fs.readFileSync(security.ssl.cert, "utf8");
      ssl.key = fs.readFileSync(security.ssl.key, "utf8");
    }
  }
  const kafka = new Kafka({ clientId: "secure-js", brokers: [broker], ssl, sasl: security.sasl || undefined,
                            logLevel: logLevel.ERROR });
  const producer = kafka.producer();
  await producer.connect();
  await producer.send({ topic, messages: [0, 1, 2].map((n) => ({ value: `secure ${n}` })) });
  await producer.disconnect();

  const consumer = kafka.consumer({ groupId: group });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  const values = [];
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`consumed ${values.length} of 3`)), 60000);
    consumer.run({
      autoCommit: false,
      eachMessage: async ({ partition, message }) => {
        values.push(message.value.toString());
        await consumer.commitOffsets([{ topic, partition, offset: String(Number(message.offset) + 1) }]);
        if (values.length === 3) { clearTimeout(timer); resolve(); }
      },
    });
  });
  await consumer.disconnect();
  const admin = kafka.admin();
  await admin.connect();
  const offsets = await admin.fetchOffsets({ groupId: group, topics: [topic] });
  await admin.disconnect();
  process.stdout.write(JSON.stringify({ values, committed: Number(offsets[0].partitions[0].offset) }));
}

main().catch((err) => { console.error(err); process.exit(1); });
