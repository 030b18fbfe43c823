// Produce messages given as JSON on stdin with kafkajs, consume them back from the beginning, and print
// what was consumed as JSON. Used by tests/integration/test_clients.py against our broker.
// usage: node roundtrip.js BROKER TOPIC CODEC   (CODEC: none | gzip | snappy)
const { Kafka, CompressionTypes, CompressionCodecs, logLevel } = require("kafkajs");
const SnappyCodec = require("kafkajs-snappy");

CompressionCodecs[CompressionTypes.Snappy] = SnappyCodec;
const CODECS = { none: CompressionTypes.None, gzip: CompressionTypes.GZIP, snappy: CompressionTypes.Snappy };

async function main() {
  const [broker, topic, codec] = process.argv.slice(2);
  const input = JSON.parse(require("fs").readFileSync(0, "utf8"));
  const kafka = new Kafka({ clientId: "roundtrip-js", brokers: [broker], logLevel: logLevel.ERROR });
  const producer = kafka.producer({ allowAutoTopicCreation: true });
  await producer.connect();
  for (const m of input) {
    await producer.send({
      topic,
      compression: CODECS[codec],
      messages: [{
        partition: m.partition,
        key: m.key === null ? null : Buffer.from(m.key, "base64"),
        value: m.value === null ? null : Buffer.from(m.value, "base64"),
        timestamp: String(m.timestamp),
        headers: Object.fromEntries(m.headers.map(([k, v]) => [k, Buffer.from(v, "base64")])),
      }],
    });
  }
  await producer.disconnect();

  const consumer = kafka.consumer({ groupId: `roundtrip-js-${topic}` });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  const out = [];
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`consumed ${out.length} of ${input.length}`)), 60000);
    consumer.run({
      eachMessage: async ({ partition, message }) => {
        out.push({
          partition,
          offset: Number(message.offset),
          key: message.key === null ? null : message.key.toString("base64"),
          value: message.value === null ? null : message.value.toString("base64"),
          timestamp: Number(message.timestamp),
          headers: Object.entries(message.headers || {}).map(([k, v]) => [k, v.toString("base64")]),
        });
        if (out.length === input.length) { clearTimeout(timer); resolve(); }
      },
    });
  });
  await consumer.disconnect();
  process.stdout.write(JSON.stringify(out));
}

main().catch((err) => { console.error(err); process.exit(1); });
