// Java Paimon 0.9 writes a primary-key table with deletion vectors, so tests can check that
// snaplake reads every snapshot of it as Java does.
//
//   <warehouse> <table> <commits> <deletes> [key=value ...]: creates db.<table> (dt STRING,
//       id BIGINT, v STRING, n BIGINT; partition dt, primary key (dt, id); bucket 2,
//       deletion-vectors.enabled = true, plus the given options), then writes <commits>
//       commits. Commit c upserts ids (c * 7 + i) % 40 for i < 12 in partitions "a" and "b",
//       v = "v<c>" (null when c is odd and the key is even: partial-update keeps the old v)
//       and n = c * 100 + i; with <deletes> = true it also deletes ids 3 * c and 3 * c + 1 of
//       partition "a". The last commit then compacts every bucket fully.
//   Each BatchTableWrite.prepareCommit compacts level 0 up with lookup (deletion vectors on
//   make the table need lookup) and waits for it, so each commit yields an APPEND snapshot
//   (level-0 files) followed by a COMPACT snapshot (vectors written).
//
//   bulk <warehouse> <table> <keys> <commits> <fraction> <buckets>: creates db.<table> (id
//       BIGINT primary key, name STRING, amount DOUBLE, note STRING; unpartitioned, deletion
//       vectors on), writes ids 0..keys-1, then <commits> commits each upserting
//       keys * fraction random ids (seeded; benchmarks/dv_read.py).
//
// Build: javac -cp "$(cat .java-paimon/classpath.txt)" -d OUT JavaDeletionVectorWriter.java
import java.util.List;
import org.apache.paimon.catalog.Catalog;
import org.apache.paimon.catalog.CatalogContext;
import org.apache.paimon.catalog.CatalogFactory;
import org.apache.paimon.catalog.Identifier;
import org.apache.paimon.data.BinaryRow;
import org.apache.paimon.data.BinaryRowWriter;
import org.apache.paimon.data.BinaryString;
import org.apache.paimon.data.GenericRow;
import org.apache.paimon.disk.IOManager;
import org.apache.paimon.options.Options;
import org.apache.paimon.schema.Schema;
import org.apache.paimon.table.Table;
import org.apache.paimon.table.sink.BatchTableCommit;
import org.apache.paimon.table.sink.BatchTableWrite;
import org.apache.paimon.table.sink.BatchWriteBuilder;
import org.apache.paimon.table.sink.CommitMessage;
import org.apache.paimon.table.sink.TableWriteImpl;
import org.apache.paimon.types.DataTypes;
import org.apache.paimon.types.RowKind;

public class JavaDeletionVectorWriter {
    public static void main(String[] args) throws Exception {
        if (args[0].equals("bulk")) {
            bulk(args);
            return;
        }
        Options options = new Options();
        options.set("warehouse", args[0]);
        Catalog catalog = CatalogFactory.createCatalog(CatalogContext.create(options));
        catalog.createDatabase("db", true);
        Identifier ident = Identifier.create("db", args[1]);
        int commits = Integer.parseInt(args[2]);
        boolean deletes = Boolean.parseBoolean(args[3]);
        Schema.Builder schema = Schema.newBuilder()
            .column("dt", DataTypes.STRING().notNull())
            .column("id", DataTypes.BIGINT().notNull())
            .column("v", DataTypes.STRING())
            .column("n", DataTypes.BIGINT())
            .partitionKeys("dt")
            .primaryKey("dt", "id")
            .option("bucket", "2")
            .option("deletion-vectors.enabled", "true");
        for (int k = 4; k < args.length; k++) {
            String[] kv = args[k].split("=", 2);
            schema.option(kv[0], kv[1]);
        }
        catalog.createTable(ident, schema.build(), false);
        Table table = catalog.getTable(ident);
        for (int c = 0; c < commits; c++) {
            BatchWriteBuilder builder = table.newBatchWriteBuilder();
            BatchTableWrite write = builder.newWrite();
            write.withIOManager(IOManager.create(System.getProperty("java.io.tmpdir")));
            for (String dt : new String[] {"a", "b"}) {
                for (int i = 0; i < 12; i++) {
                    long id = (c * 7L + i) % 40;
                    String v = (c % 2 == 1 && id % 2 == 0) ? null : "v" + c;
                    write.write(GenericRow.of(
                        BinaryString.fromString(dt), id,
                        v == null ? null : BinaryString.fromString(v), c * 100L + i));
                }
            }
            if (deletes) {
                for (long id = 3L * c; id < 3L * c + 2; id++) {
                    write.write(GenericRow.ofKind(
                        RowKind.DELETE, BinaryString.fromString("a"), id, null, null));
                }
            }
            if (c == commits - 1) {
                TableWriteImpl<?> impl = (TableWriteImpl<?>) write;
                for (String dt : new String[] {"a", "b"}) {
                    for (int bucket = 0; bucket < 2; bucket++) {
                        impl.compact(partition(dt), bucket, true);
                    }
                }
            }
            List<CommitMessage> messages = write.prepareCommit();
            BatchTableCommit commit = builder.newCommit();
            commit.commit(messages);
            commit.close();
            write.close();
        }
    }

    private static void bulk(String[] args) throws Exception {
        Options options = new Options();
        options.set("warehouse", args[1]);
        Catalog catalog = CatalogFactory.createCatalog(CatalogContext.create(options));
        catalog.createDatabase("db", true);
        Identifier ident = Identifier.create("db", args[2]);
        int keys = Integer.parseInt(args[3]);
        int commits = Integer.parseInt(args[4]);
        int upserts = (int) (keys * Double.parseDouble(args[5]));
        Schema schema = Schema.newBuilder()
            .column("id", DataTypes.BIGINT().notNull())
            .column("name", DataTypes.STRING())
            .column("amount", DataTypes.DOUBLE())
            .column("note", DataTypes.STRING())
            .primaryKey("id")
            .option("bucket", args[6])
            .option("deletion-vectors.enabled", "true")
            .build();
        catalog.createTable(ident, schema, false);
        Table table = catalog.getTable(ident);
        java.util.Random random = new java.util.Random(42);
        for (int c = 0; c <= commits; c++) {
            BatchWriteBuilder builder = table.newBatchWriteBuilder();
            BatchTableWrite write = builder.newWrite();
            write.withIOManager(IOManager.create(System.getProperty("java.io.tmpdir")));
            int count = c == 0 ? keys : upserts;
            for (int i = 0; i < count; i++) {
                long id = c == 0 ? i : random.nextInt(keys);
                write.write(GenericRow.of(
                    id, BinaryString.fromString("customer-" + (id % 100000)),
                    id * 0.25 + c, BinaryString.fromString("v" + c + "-" + id)));
            }
            List<CommitMessage> messages = write.prepareCommit();
            BatchTableCommit commit = builder.newCommit();
            commit.commit(messages);
            commit.close();
            write.close();
        }
    }

    private static BinaryRow partition(String dt) {
        BinaryRow row = new BinaryRow(1);
        BinaryRowWriter writer = new BinaryRowWriter(row);
        writer.writeString(0, BinaryString.fromString(dt));
        writer.complete();
        return row;
    }
}
