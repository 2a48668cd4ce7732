// Java Paimon 0.9 writes a dynamic-bucket (bucket = -1) primary-key table, so tests can check
// snaplake against its index manifests and HASH files.
//
//   create <warehouse>: creates db.t (dt STRING, id BIGINT, v STRING; partition dt, primary key
//       (dt, id)) and writes ("a", 0..3), ("b", 4..5), id i into bucket i % 2, in one commit.
//       tests/fixtures/java09_dynamic_index holds the index part of such a table.
//   append <warehouse> <dt> <bucket> <id>...: upserts the ids into that partition and bucket;
//       the writer restores the bucket's HASH index from the latest snapshot's index manifest.
//
// Build: javac -cp "$(cat .java-paimon/classpath.txt)" -d OUT JavaDynamicIndexWriter.java
import java.util.List;
import org.apache.paimon.catalog.Catalog;
import org.apache.paimon.catalog.CatalogContext;
import org.apache.paimon.catalog.CatalogFactory;
import org.apache.paimon.catalog.Identifier;
import org.apache.paimon.data.BinaryString;
import org.apache.paimon.data.GenericRow;
import org.apache.paimon.options.Options;
import org.apache.paimon.schema.Schema;
import org.apache.paimon.table.Table;
import org.apache.paimon.table.sink.BatchTableCommit;
import org.apache.paimon.table.sink.BatchTableWrite;
import org.apache.paimon.table.sink.BatchWriteBuilder;
import org.apache.paimon.table.sink.CommitMessage;
import org.apache.paimon.table.sink.TableWriteImpl;
import org.apache.paimon.types.DataTypes;

public class JavaDynamicIndexWriter {
    public static void main(String[] args) throws Exception {
        Options options = new Options();
        options.set("warehouse", args[1]);
        Catalog catalog = CatalogFactory.createCatalog(CatalogContext.create(options));
        Identifier ident = Identifier.create("db", "t");
        if (args[0].equals("create")) {
            catalog.createDatabase("db", true);
            Schema schema = Schema.newBuilder()
                .column("dt", DataTypes.STRING().notNull())
                .column("id", DataTypes.BIGINT().notNull())
                .column("v", DataTypes.STRING())
                .partitionKeys("dt")
                .primaryKey("dt", "id")
                .option("bucket", "-1")
                .build();
            catalog.createTable(ident, schema, false);
        }
        Table table = catalog.getTable(ident);
        BatchWriteBuilder builder = table.newBatchWriteBuilder();
        BatchTableWrite write = builder.newWrite();
        TableWriteImpl<?> impl = (TableWriteImpl<?>) write;
        if (args[0].equals("create")) {
            for (long i = 0; i < 6; i++) {
                impl.write(row(i < 4 ? "a" : "b", i), (int) (i % 2));
            }
        } else {
            for (int k = 4; k < args.length; k++) {
                impl.write(row(args[2], Long.parseLong(args[k])), Integer.parseInt(args[3]));
            }
        }
        List<CommitMessage> messages = write.prepareCommit();
        BatchTableCommit commit = builder.newCommit();
        commit.commit(messages);
        commit.close();
        write.close();
    }

    private static GenericRow row(String dt, long id) {
        return GenericRow.of(BinaryString.fromString(dt), id, BinaryString.fromString("v" + id));
    }
}
