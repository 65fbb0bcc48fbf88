import java.time.Duration;
import java.util.Map;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.connect.mirror.RemoteClusterUtils;

/**
 * MirrorMaker 2's own reading of a consumer group's checkpoints (what MM2 users call at failover):
 * RemoteClusterUtils.translateOffsets against the cluster holding the checkpoints topic. Prints one
 * "topic partition offset" line per partition. Run as a source file: java -cp 'libs/*' TranslateOffsets.java
 * BOOTSTRAP_SERVERS SOURCE_ALIAS GROUP
 */
public class TranslateOffsets {
    public static void main(String[] args) throws Exception {
        Map<String, Object> properties = Map.of("bootstrap.servers", args[0]);
        Map<TopicPartition, OffsetAndMetadata> offsets =
                RemoteClusterUtils.translateOffsets(properties, args[1], args[2], Duration.ofSeconds(60));
        for (Map.Entry<TopicPartition, OffsetAndMetadata> entry : offsets.entrySet()) {
            TopicPartition partition = entry.getKey();
            System.out.println(partition.topic() + " " + partition.partition() + " " + entry.getValue().offset());
        }
    }
}
