package burrowpy.peers;

import java.util.Arrays;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Produced;

/**
 * A Kafka Streams word count: lines from INPUT, counts per word to OUTPUT (key: word, value: count as a
 * long). It prints {"state":...} lines as the application changes state and runs until SIGTERM; the last
 * line, after a clean close, is {"state":"NOT_RUNNING"}.
 *
 * <pre>
 *   WordCount BOOTSTRAP APPLICATION_ID INPUT OUTPUT STATE_DIR [GROUP_PROTOCOL [GUARANTEE]]
 * </pre>
 *
 * GROUP_PROTOCOL is the group rebalance protocol, classic by default; "streams" (KIP-1071) needs a Kafka
 * 4.1+ broker. GUARANTEE is processing.guarantee: at_least_once (the default) or exactly_once_v2.
 */
public final class WordCount {
  private WordCount() {}

  public static void main(String[] args) throws Exception {
    Properties props = new Properties();
    props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
    props.put(StreamsConfig.APPLICATION_ID_CONFIG, args[1]);
    props.put(StreamsConfig.STATE_DIR_CONFIG, args[4]);
    props.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
    props.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
    // Counts reach the output soon after their input, which keeps the test short.
    props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 100);
    props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
    if (args.length > 5) {
      props.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, args[5]);
    }
    if (args.length > 6) {
      props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, args[6]);
    }

    StreamsBuilder builder = new StreamsBuilder();
    builder.<String, String>stream(args[2])
        .flatMapValues(line -> Arrays.asList(line.toLowerCase().split("\\W+")))
        .filter((key, word) -> !word.isEmpty())
        .groupBy((key, word) -> word)
        .count()
        .toStream()
        .to(args[3], Produced.with(Serdes.String(), Serdes.Long()));

    KafkaStreams streams = new KafkaStreams(builder.build(), props);
    CountDownLatch stopped = new CountDownLatch(1);
    CountDownLatch notRunning = new CountDownLatch(1);
    streams.setStateListener((now, before) -> {
      System.out.println("{\"state\":\"" + now + "\"}");
      System.out.flush();
      if (now == KafkaStreams.State.NOT_RUNNING) {
        notRunning.countDown();
      }
    });
    Runtime.getRuntime().addShutdownHook(new Thread(() -> {
      streams.close();
      try {
        // The listener may hear of NOT_RUNNING after close() returns: wait for its line before exiting.
        notRunning.await(30, TimeUnit.SECONDS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
      stopped.countDown();
    }));
    streams.start();
    stopped.await();
  }
}
