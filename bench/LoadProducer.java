// The scale bench's load written by Apache Kafka's own Java producer (`python -m bench scale --load-client
// java`; bench/java_load.py runs it with the brokers' jars, `java LoadProducer.java ...`, no build step).
//
// librdkafka sends one partition per Produce request (confluentinc/librdkafka#1700), 5 at a time per broker
// when idempotent: over thousands of partitions at a record a second each, the bench's own librdkafka
// producer fell behind what it was asked (2,493 of 5,000 records/s at 5,000 partitions, docs/scale.md), so
// the copy's start and latency were measured on a late load. The Java producer, as most users' producers
// are, puts every partition of a broker into one request.
//
// Arguments: bootstrap servers, records/s per partition, a file of "topic partitions" lines, and the file
// to write the per-millisecond counts of the records sent ("<epoch ms> <count>" lines: the bench counts
// the records of its window exactly). It writes records round robin over every partition (100 B values,
// the key the record's number, the timestamp its send time) until its standard input closes, flushes,
// and prints "sent <n> seconds <s> failures <n>". "ready" is printed once the producer is built.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class LoadProducer {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        double ratePerPartition = Double.parseDouble(args[1]);
        List<String> topics = new ArrayList<>();
        List<Integer> partitions = new ArrayList<>();
        for (String line : Files.readAllLines(Path.of(args[2]))) {
            String[] fields = line.trim().split(" ");
            if (fields.length != 2) {
                continue;
            }
            for (int partition = 0; partition < Integer.parseInt(fields[1]); partition++) {
                topics.add(fields[0]);
                partitions.add(partition);
            }
        }
        Properties config = new Properties();
        config.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        config.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        config.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        // The client's defaults (acks=all, idempotent, linger.ms 5), with room for a batch per partition.
        config.put(ProducerConfig.BUFFER_MEMORY_CONFIG, Long.toString(256L << 20));
        KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(config);
        AtomicBoolean stop = new AtomicBoolean(false);
        Thread watcher = new Thread(() -> {
            try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                while (in.readLine() != null) {
                    // anything before the end of input is ignored
                }
            } catch (Exception ignored) {
                // the same as the end of input
            }
            stop.set(true);
        });
        watcher.setDaemon(true);
        watcher.start();
        System.out.println("ready");
        System.out.flush();

        byte[] value = new byte[100];
        Arrays.fill(value, (byte) 'v');
        AtomicLong failures = new AtomicLong();
        Map<Long, int[]> perMs = new TreeMap<>();
        double rate = ratePerPartition * topics.size();
        long sent = 0;
        long started = System.nanoTime();
        while (!stop.get()) {
            long due = (long) ((System.nanoTime() - started) / 1e9 * rate);
            while (sent < due) {
                int index = (int) (sent % topics.size());
                long nowMs = System.currentTimeMillis();
                producer.send(
                    new ProducerRecord<>(
                        topics.get(index),
                        partitions.get(index),
                        nowMs,
                        Long.toString(sent).getBytes(StandardCharsets.US_ASCII),
                        value),
                    (metadata, error) -> {
                        if (error != null) {
                            failures.incrementAndGet();
                        }
                    });
                perMs.computeIfAbsent(nowMs, ms -> new int[1])[0]++;
                sent++;
            }
            Thread.sleep(2);
        }
        double seconds = (System.nanoTime() - started) / 1e9;
        producer.flush();
        producer.close();
        try (PrintWriter out = new PrintWriter(Files.newBufferedWriter(Path.of(args[3])))) {
            for (Map.Entry<Long, int[]> entry : perMs.entrySet()) {
                out.println(entry.getKey() + " " + entry.getValue()[0]);
            }
        }
        System.out.println("sent " + sent + " seconds " + seconds + " failures " + failures.get());
    }
}
