package burrowpy.peers;

/** Prints the Kafka version the peers were built with; `make install` runs it to check the classpath. */
public final class Peers {
    private Peers() {}

    public static void main(String[] args) {
        System.out.println(org.apache.kafka.common.utils.internals.AppInfoParser.getVersion());
    }
}
