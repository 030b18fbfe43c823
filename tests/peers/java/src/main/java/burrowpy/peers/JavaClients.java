package burrowpy.peers;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListGroupsOptions;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.GroupType;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * The Java client (kafka-clients) against a broker, every call with the client's defaults, printing one JSON
 * line per step with what the call returned, for tests/integration/test_java_clients.py:
 *
 * <pre>
 *   JavaClients admin BOOTSTRAP TOPIC        topics and configs through the AdminClient
 *   JavaClients produce BOOTSTRAP TOPIC N    N records with the producer's defaults (idempotent, acks=all)
 *   JavaClients consume BOOTSTRAP TOPIC GROUP N [PROTOCOL]   subscribe, read N records, commitSync
 *                                            (PROTOCOL: the group protocol, classic or consumer)
 *   JavaClients groups BOOTSTRAP TOPIC GROUP      the AdminClient's consumer group and records calls
 *   JavaClients transactions BOOTSTRAP TOPIC TXN_ID   a transactional producer: a committed and an aborted
 *                                            transaction, read back read_committed; a second instance fences
 *                                            the first; the AdminClient describes and lists transactions
 * </pre>
 */
public final class JavaClients {
  private static final ObjectMapper JSON = new ObjectMapper();

  private JavaClients() {}

  static void emit(String step, Object value) throws Exception {
    Map<String, Object> line = new LinkedHashMap<>();
    line.put("step", step);
    line.put("value", value);
    System.out.println(JSON.writeValueAsString(line));
    System.out.flush();
  }

  static Admin admin(String bootstrap) {
    Properties props = new Properties();
    props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    return Admin.create(props);
  }

  static void topics(String bootstrap, String topic) throws Exception {
    try (Admin admin = admin(bootstrap)) {
      admin.createTopics(List.of(new NewTopic(topic, 3, (short) 1)
          .configs(Map.of("retention.ms", "3600000")))).all().get();
      emit("created", topic);
      emit("listed", admin.listTopics().names().get().contains(topic));
      TopicDescription described = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
      emit("described", Map.of("partitions", described.partitions().size(),
          "topic_id_set", !described.topicId().toString().isEmpty()));
      ConfigResource resource = new ConfigResource(ConfigResource.Type.TOPIC, topic);
      admin.incrementalAlterConfigs(Map.of(resource, List.of(
          new AlterConfigOp(new ConfigEntry("retention.ms", "7200000"), AlterConfigOp.OpType.SET),
          new AlterConfigOp(new ConfigEntry("cleanup.policy", "compact"), AlterConfigOp.OpType.SET))))
          .all().get();
      Config config = admin.describeConfigs(List.of(resource)).all().get().get(resource);
      emit("configs", Map.of("retention.ms", config.get("retention.ms").value(),
          "cleanup.policy", config.get("cleanup.policy").value(),
          "retention.ms.source", config.get("retention.ms").source().toString()));
      admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(5))).all().get();
      emit("partitions", admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic).partitions().size());
      admin.deleteTopics(List.of(topic)).all().get();
      emit("deleted", topic);
    }
  }

  static void produce(String bootstrap, String topic, int count) throws Exception {
    Properties props = new Properties();
    props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
    props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
    List<Map<String, Object>> sent = new ArrayList<>();
    try (KafkaProducer<String, String> producer = new KafkaProducer<>(props)) {
      for (int i = 0; i < count; i++) {
        RecordMetadata metadata = producer.send(new ProducerRecord<>(topic, "key-" + i, "value-" + i)).get();
        sent.add(Map.of("key", "key-" + i, "partition", metadata.partition(), "offset", metadata.offset()));
      }
    }
    emit("produced", sent);
  }

  static void consume(String bootstrap, String topic, String group, int count, String protocol) throws Exception {
    Properties props = new Properties();
    props.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol);
    props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    props.put(ConsumerConfig.GROUP_ID_CONFIG, group);
    props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
    props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
    props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
    props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
    List<Map<String, Object>> read = new ArrayList<>();
    try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props)) {
      consumer.subscribe(List.of(topic));
      long deadline = System.currentTimeMillis() + 60_000;
      while (read.size() < count && System.currentTimeMillis() < deadline) {
        for (ConsumerRecord<String, String> record : consumer.poll(Duration.ofMillis(500))) {
          Map<String, Object> row = new LinkedHashMap<>();  // keys and values may be null
          row.put("key", record.key());
          row.put("value", record.value());
          row.put("partition", record.partition());
          row.put("offset", record.offset());
          read.add(row);
        }
      }
      consumer.commitSync();
      emit("consumed", read);
      Map<Integer, Long> committed = new TreeMap<>();
      Set<TopicPartition> assigned = consumer.assignment();
      consumer.committed(assigned).forEach((tp, offset) -> committed.put(tp.partition(), offset.offset()));
      emit("committed", committed);
    }
  }

  static void groups(String bootstrap, String topic, String group) throws Exception {
    try (Admin admin = admin(bootstrap)) {
      Collection<GroupListing> listed = admin.listGroups(ListGroupsOptions.forConsumerGroups()).all().get();
      emit("listed", listed.stream().filter(g -> g.groupId().equals(group))
          .map(g -> Map.of("group", g.groupId(), "type", g.type().map(GroupType::toString).orElse(""),
              "protocol", g.protocol()))
          .toList());
      ConsumerGroupDescription described = admin.describeConsumerGroups(List.of(group)).all().get().get(group);
      emit("described", Map.of("state", described.groupState().toString(), "members", described.members().size()));
      Map<Integer, Long> offsets = new TreeMap<>();
      admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get()
          .forEach((tp, offset) -> offsets.put(tp.partition(), offset.offset()));
      emit("offsets", offsets);
      TopicPartition first = new TopicPartition(topic, 0);
      TopicPartition second = new TopicPartition(topic, 1);
      admin.alterConsumerGroupOffsets(group, Map.of(first, new OffsetAndMetadata(1))).all().get();
      admin.deleteConsumerGroupOffsets(group, Set.of(second)).all().get();
      Map<Integer, Long> after = new TreeMap<>();
      admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get()
          .forEach((tp, offset) -> after.put(tp.partition(), offset.offset()));
      emit("altered", after);
      Map<Integer, Long> lowWatermarks = new HashMap<>();
      admin.deleteRecords(Map.of(first, RecordsToDelete.beforeOffset(1))).lowWatermarks().forEach((tp, future) -> {
        try {
          lowWatermarks.put(tp.partition(), future.get().lowWatermark());
        } catch (InterruptedException | ExecutionException e) {
          throw new IllegalStateException(e);
        }
      });
      emit("records_deleted", lowWatermarks);
      admin.deleteConsumerGroups(List.of(group)).all().get();
      emit("group_deleted", admin.listGroups(ListGroupsOptions.forConsumerGroups()).all().get().stream()
          .noneMatch(g -> g.groupId().equals(group)));
    }
  }

  static KafkaProducer<String, String> transactionalProducer(String bootstrap, String transactionalId) {
    Properties props = new Properties();
    props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    props.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId);
    props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
    props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
    KafkaProducer<String, String> producer = new KafkaProducer<>(props);
    producer.initTransactions();
    return producer;
  }

  static void transactions(String bootstrap, String topic, String transactionalId) throws Exception {
    try (KafkaProducer<String, String> producer = transactionalProducer(bootstrap, transactionalId)) {
      producer.beginTransaction();
      for (int i = 0; i < 5; i++) {
        producer.send(new ProducerRecord<>(topic, "key-" + i, "committed-" + i));
      }
      producer.commitTransaction();
      producer.beginTransaction();
      for (int i = 0; i < 3; i++) {
        producer.send(new ProducerRecord<>(topic, "key-" + i, "aborted-" + i));
      }
      producer.flush();
      producer.abortTransaction();
      emit("transactions", "committed and aborted");
      try (KafkaProducer<String, String> successor = transactionalProducer(bootstrap, transactionalId)) {
        String outcome;
        try {
          producer.beginTransaction();
          producer.send(new ProducerRecord<>(topic, "zombie", "zombie")).get();
          producer.commitTransaction();
          outcome = "not fenced";
        } catch (Exception e) {
          Throwable cause = e.getCause() != null ? e.getCause() : e;
          outcome = cause.getClass().getSimpleName();
        }
        emit("fenced", outcome);
        successor.beginTransaction();
        successor.send(new ProducerRecord<>(topic, "successor", "successor"));
        successor.commitTransaction();
      }
    } catch (org.apache.kafka.common.KafkaException e) {
      // closing the fenced producer may report the fencing again
      emit("close", e.getClass().getSimpleName());
    }
    Properties props = new Properties();
    props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    props.put(ConsumerConfig.GROUP_ID_CONFIG, transactionalId + "-reader");
    props.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
    props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
    props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
    props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
    List<String> values = new ArrayList<>();
    try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props)) {
      consumer.subscribe(List.of(topic));
      long deadline = System.currentTimeMillis() + 30_000;
      while (values.size() < 6 && System.currentTimeMillis() < deadline) {
        for (ConsumerRecord<String, String> record : consumer.poll(Duration.ofMillis(500))) {
          values.add(record.value());
        }
      }
    }
    emit("read_committed", values);
    try (Admin admin = admin(bootstrap)) {
      var description = admin.describeTransactions(List.of(transactionalId)).all().get().get(transactionalId);
      emit("described", Map.of("state", description.state().toString(),
          "epoch", description.producerEpoch()));
      emit("listed", admin.listTransactions().all().get().stream()
          .filter(t -> t.transactionalId().equals(transactionalId))
          .map(t -> t.state().toString()).toList());
    }
  }

  public static void main(String[] args) throws Exception {
    switch (args[0]) {
      case "admin" -> topics(args[1], args[2]);
      case "produce" -> produce(args[1], args[2], Integer.parseInt(args[3]));
      case "consume" -> consume(args[1], args[2], args[3], Integer.parseInt(args[4]),
          args.length > 5 ? args[5] : "classic");
      case "groups" -> groups(args[1], args[2], args[3]);
      case "transactions" -> transactions(args[1], args[2], args[3]);
      default -> throw new IllegalArgumentException("unknown command " + args[0]);
    }
  }
}
