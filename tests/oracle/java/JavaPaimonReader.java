/*
 * Java Paimon 0.9 as a reference reader for snaplake's tests (tests/oracle/java_paimon.py).
 *
 * Usage: java -cp <paimon jar>:<hadoop client jars>:<this dir> JavaPaimonReader
 *
 * One long-lived JVM answers request after request (tests/oracle/java_paimon.py keeps one per
 * pytest process): each stdin line is the path of a REQUEST.json, answered by one stdout line,
 * "ok" once every table of it is read, or "error " + the stack trace as a JSON string.
 *
 * REQUEST.json is a JSON array of {"path": TABLE_DIR, "snapshot": N or null, "out": FILE} objects,
 * optionally with "stream": "true" and any number of "option.<key>": VALUE (Paimon dynamic options,
 * applied with FileStoreTable.copy). Each table is opened with FileStoreTableFactory on the local
 * file system and read through ReadBuilder -> newRead().createReader(split), as every Paimon
 * engine reads:
 *   - batch (default): newScan().plan() of the latest snapshot, or of "snapshot" (scan.snapshot-id);
 *   - stream: newStreamScan(), planned again and again until it has consumed the latest snapshot
 *     (each plan covers one snapshot; a streaming job's view of the table's changes). With
 *     "snapshot" = N it starts at N (scan.mode = from-snapshot: the changes of N, N+1, ...; for a
 *     changelog-producer = input table, its changelog files), otherwise Paimon's default start
 *     (latest-full: the latest snapshot in full). "option.scan.mode" etc. override.
 * FILE receives JSON lines:
 *   {"table":..., "schema":[{"name","type"}], "partitionKeys":[...], "primaryKeys":[...],
 *    "snapshotId": N|null}
 *   {"split": {"partition":[...], "partitionBytes":HEX, "bucket":B, "snapshotId":N,
 *              "files":[...], "streaming":true|false}}                        per split
 *   {"k": "+I", "v": [...], "p": HEX, "b": B}                                 per row
 * where "p" and "b" are what Java's own writer would compute for the row (RowKeyExtractor:
 * the partition BinaryRow bytes and, for fixed or unaware buckets, the bucket), so a test
 * can check that the writer put every row where Java would have.
 * Values are encoded by the column's Paimon type, losslessly: integers and booleans as JSON,
 * FLOAT/DOUBLE as the exact double (NaN/Infinity as bare tokens), DECIMAL as a plain string,
 * CHAR/VARCHAR as strings, BINARY/VARBINARY as base64, DATE as epoch days, TIME as millis of
 * day, TIMESTAMP(p) as epoch nanoseconds, ARRAY as a list, MAP as [[key, value], ...],
 * ROW as a list of its fields.
 */

import org.apache.paimon.data.BinaryRow;
import org.apache.paimon.data.InternalArray;
import org.apache.paimon.data.InternalMap;
import org.apache.paimon.data.InternalRow;
import org.apache.paimon.data.Timestamp;
import org.apache.paimon.fs.Path;
import org.apache.paimon.fs.local.LocalFileIO;
import org.apache.paimon.io.DataFileMeta;
import org.apache.paimon.reader.RecordReader;
import org.apache.paimon.table.FileStoreTable;
import org.apache.paimon.table.BucketMode;
import org.apache.paimon.table.FileStoreTableFactory;
import org.apache.paimon.table.sink.RowKeyExtractor;
import org.apache.paimon.table.source.DataSplit;
import org.apache.paimon.table.source.ReadBuilder;
import org.apache.paimon.table.source.StreamTableScan;
import org.apache.paimon.table.source.Split;
import org.apache.paimon.table.source.TableRead;
import org.apache.paimon.types.ArrayType;
import org.apache.paimon.types.DataField;
import org.apache.paimon.types.DataType;
import org.apache.paimon.types.MapType;
import org.apache.paimon.types.MultisetType;
import org.apache.paimon.types.RowType;

import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

public final class JavaPaimonReader {

    /**
     * A REQUEST.json path per stdin line, answered on stdout by one line, "ok" or "error " +
     * the stack trace as a JSON string; ends at the end of stdin. Anything the libraries
     * print goes to stderr, so stdout carries only the answers.
     */
    public static void main(String[] args) throws IOException {
        PrintStream answers = System.out;
        System.setOut(System.err);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line = in.readLine(); line != null; line = in.readLine()) {
            if (line.isEmpty()) continue;
            try {
                readRequests(line);
                answers.println("ok");
            } catch (Throwable t) {
                StringWriter trace = new StringWriter();
                t.printStackTrace(new PrintWriter(trace));
                answers.println("error " + quote(trace.toString()));
            }
            answers.flush();
        }
    }

    private static void readRequests(String requestPath) throws IOException {
        String request = new String(Files.readAllBytes(Paths.get(requestPath)), StandardCharsets.UTF_8);
        for (Map<String, String> item : MiniJson.parseRequests(request)) {
            try (BufferedWriter out =
                    Files.newBufferedWriter(Paths.get(item.get("out")), StandardCharsets.UTF_8)) {
                readTable(item, out);
            }
        }
    }

    private static void readTable(Map<String, String> item, Writer out) throws IOException {
        String tablePath = item.get("path");
        String snapshot = item.get("snapshot");
        boolean stream = "true".equals(item.get("stream"));
        FileStoreTable table = FileStoreTableFactory.create(LocalFileIO.create(), new Path(tablePath));
        Map<String, String> dynamic = new HashMap<>();
        if (snapshot != null) {
            if (stream) {
                dynamic.put("scan.mode", "from-snapshot");
            }
            dynamic.put("scan.snapshot-id", snapshot);
        }
        for (Map.Entry<String, String> e : item.entrySet()) {
            if (e.getKey().startsWith("option.")) {
                dynamic.put(e.getKey().substring("option.".length()), e.getValue());
            }
        }
        if (!dynamic.isEmpty()) {
            table = table.copy(dynamic);
        }
        RowType rowType = table.rowType();
        Long latest = table.snapshotManager().latestSnapshotId();

        StringBuilder head = new StringBuilder("{\"table\":").append(quote(tablePath));
        head.append(",\"schema\":[");
        List<DataField> fields = rowType.getFields();
        for (int i = 0; i < fields.size(); i++) {
            if (i > 0) head.append(',');
            head.append("{\"name\":").append(quote(fields.get(i).name()));
            head.append(",\"type\":").append(quote(fields.get(i).type().asSQLString())).append('}');
        }
        head.append("],\"partitionKeys\":").append(strings(table.partitionKeys()));
        head.append(",\"primaryKeys\":").append(strings(table.primaryKeys()));
        head.append(",\"snapshotId\":").append(snapshot != null ? snapshot : String.valueOf(latest));
        out.write(head.append("}\n").toString());

        ReadBuilder builder = table.newReadBuilder();
        TableRead read = builder.newRead();
        if (!stream) {
            for (Split split : builder.newScan().plan().splits()) {
                writeSplit(table, split, read, out);
            }
            return;
        }
        StreamTableScan scan = builder.newStreamScan();
        // Each plan consumes (at most) one snapshot; stop once the latest one is consumed.
        for (int round = 0; round < 1_000_000; round++) {
            List<Split> splits = scan.plan().splits();
            for (Split split : splits) {
                writeSplit(table, split, read, out);
            }
            Long next = scan.checkpoint();
            if (splits.isEmpty() && (latest == null || next == null || next > latest)) {
                return;
            }
        }
        throw new IllegalStateException("stream scan of " + tablePath + " did not end");
    }

    private static void writeSplit(FileStoreTable table, Split split, TableRead read, Writer out)
            throws IOException {
        RowType rowType = table.rowType();
        RowType partitionType = table.schema().logicalPartitionType();
        BucketMode mode = table.bucketMode();
        boolean bucketed = mode == BucketMode.HASH_FIXED || mode == BucketMode.BUCKET_UNAWARE;
        RowKeyExtractor extractor = table.createRowKeyExtractor();
        StringBuilder line = new StringBuilder("{\"split\":{");
        if (split instanceof DataSplit) {
            DataSplit data = (DataSplit) split;
            BinaryRow partition = data.partition();
            line.append("\"partition\":").append(rowValue(partition, partitionType));
            line.append(",\"partitionBytes\":").append(quote(hex(partition.toBytes())));
            line.append(",\"bucket\":").append(data.bucket());
            line.append(",\"snapshotId\":").append(data.snapshotId());
            line.append(",\"streaming\":").append(data.isStreaming());
            List<String> names = new ArrayList<>();
            for (DataFileMeta file : data.dataFiles()) {
                names.add(file.fileName());
            }
            line.append(",\"files\":").append(strings(names));
        }
        out.write(line.append("}}\n").toString());
        try (RecordReader<InternalRow> reader = read.createReader(split)) {
            reader.forEachRemaining(
                    row -> {
                        try {
                            extractor.setRecord(row);
                            String where = ",\"p\":" + quote(hex(extractor.partition().toBytes()));
                            if (bucketed) {
                                where += ",\"b\":" + extractor.bucket();
                            }
                            out.write(
                                    "{\"k\":" + quote(row.getRowKind().shortString())
                                            + ",\"v\":" + rowValue(row, rowType)
                                            + where + "}\n");
                        } catch (IOException e) {
                            throw new RuntimeException(e);
                        }
                    });
        }
    }

    private static String hex(byte[] bytes) {
        StringBuilder sb = new StringBuilder();
        for (byte b : bytes) {
            sb.append(String.format("%02x", b & 0xff));
        }
        return sb.toString();
    }

    private static String strings(List<String> values) {
        StringBuilder sb = new StringBuilder("[");
        for (int i = 0; i < values.size(); i++) {
            if (i > 0) sb.append(',');
            sb.append(quote(values.get(i)));
        }
        return sb.append(']').toString();
    }

    private static String rowValue(InternalRow row, RowType type) {
        StringBuilder sb = new StringBuilder("[");
        List<DataType> types = type.getFieldTypes();
        for (int i = 0; i < types.size(); i++) {
            if (i > 0) sb.append(',');
            Object v = InternalRow.createFieldGetter(types.get(i), i).getFieldOrNull(row);
            sb.append(value(v, types.get(i)));
        }
        return sb.append(']').toString();
    }

    private static String arrayValue(InternalArray array, DataType elementType) {
        StringBuilder sb = new StringBuilder("[");
        InternalArray.ElementGetter getter = InternalArray.createElementGetter(elementType);
        for (int i = 0; i < array.size(); i++) {
            if (i > 0) sb.append(',');
            sb.append(value(getter.getElementOrNull(array, i), elementType));
        }
        return sb.append(']').toString();
    }

    private static String mapValue(InternalMap map, DataType keyType, DataType valueType) {
        InternalArray keys = map.keyArray();
        InternalArray values = map.valueArray();
        InternalArray.ElementGetter keyGetter = InternalArray.createElementGetter(keyType);
        InternalArray.ElementGetter valueGetter = InternalArray.createElementGetter(valueType);
        StringBuilder sb = new StringBuilder("[");
        for (int i = 0; i < map.size(); i++) {
            if (i > 0) sb.append(',');
            sb.append('[').append(value(keyGetter.getElementOrNull(keys, i), keyType));
            sb.append(',').append(value(valueGetter.getElementOrNull(values, i), valueType));
            sb.append(']');
        }
        return sb.append(']').toString();
    }

    private static String value(Object v, DataType type) {
        if (v == null) {
            return "null";
        }
        switch (type.getTypeRoot()) {
            case BOOLEAN:
            case TINYINT:
            case SMALLINT:
            case INTEGER:
            case BIGINT:
            case DATE:
            case TIME_WITHOUT_TIME_ZONE:
                return v.toString();
            case FLOAT:
                return number((double) (Float) v);
            case DOUBLE:
                return number((Double) v);
            case DECIMAL:
                return quote(((org.apache.paimon.data.Decimal) v).toBigDecimal().toPlainString());
            case CHAR:
            case VARCHAR:
                return quote(v.toString());
            case BINARY:
            case VARBINARY:
                return quote(Base64.getEncoder().encodeToString((byte[]) v));
            case TIMESTAMP_WITHOUT_TIME_ZONE:
            case TIMESTAMP_WITH_LOCAL_TIME_ZONE:
                Timestamp ts = (Timestamp) v;
                return String.valueOf(ts.getMillisecond() * 1_000_000L + ts.getNanoOfMillisecond());
            case ARRAY:
                return arrayValue((InternalArray) v, ((ArrayType) type).getElementType());
            case MULTISET:
                return mapValue(
                        (InternalMap) v,
                        ((MultisetType) type).getElementType(),
                        new org.apache.paimon.types.IntType(false));
            case MAP:
                MapType mapType = (MapType) type;
                return mapValue((InternalMap) v, mapType.getKeyType(), mapType.getValueType());
            case ROW:
                return rowValue((InternalRow) v, (RowType) type);
            default:
                throw new UnsupportedOperationException("no JSON encoding for " + type);
        }
    }

    private static String number(double d) {
        if (Double.isNaN(d)) return "NaN";
        if (Double.isInfinite(d)) return d > 0 ? "Infinity" : "-Infinity";
        return Double.toString(d);
    }

    private static String quote(String s) {
        StringBuilder sb = new StringBuilder("\"");
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"': sb.append("\\\""); break;
                case '\\': sb.append("\\\\"); break;
                case '\n': sb.append("\\n"); break;
                case '\r': sb.append("\\r"); break;
                case '\t': sb.append("\\t"); break;
                default:
                    if (c < 0x20) {
                        sb.append(String.format("\\u%04x", (int) c));
                    } else {
                        sb.append(c);
                    }
            }
        }
        return sb.append('"').toString();
    }

    /** Just enough JSON to read the request: an array of flat objects of strings/ints/null. */
    static final class MiniJson {
        private final String s;
        private int pos;

        private MiniJson(String s) {
            this.s = s;
        }

        static List<Map<String, String>> parseRequests(String text) {
            MiniJson p = new MiniJson(text);
            List<Map<String, String>> out = new ArrayList<>();
            p.expect('[');
            if (p.peek() == ']') {
                p.pos++;
                return out;
            }
            while (true) {
                out.add(p.object());
                char c = p.next();
                if (c == ']') return out;
                if (c != ',') throw p.error("',' or ']'");
            }
        }

        private Map<String, String> object() {
            Map<String, String> m = new HashMap<>();
            expect('{');
            if (peek() == '}') {
                pos++;
                return m;
            }
            while (true) {
                String key = string();
                expect(':');
                m.put(key, scalar());
                char c = next();
                if (c == '}') return m;
                if (c != ',') throw error("',' or '}'");
            }
        }

        private String scalar() {
            char c = peek();
            if (c == '"') return string();
            int start = pos;
            while (pos < s.length() && ",}] \n\t\r".indexOf(s.charAt(pos)) < 0) pos++;
            String token = s.substring(start, pos);
            return token.equals("null") ? null : token;
        }

        private String string() {
            expect('"');
            StringBuilder sb = new StringBuilder();
            while (true) {
                char c = s.charAt(pos++);
                if (c == '"') return sb.toString();
                if (c == '\\') {
                    char e = s.charAt(pos++);
                    switch (e) {
                        case 'n': sb.append('\n'); break;
                        case 't': sb.append('\t'); break;
                        case 'r': sb.append('\r'); break;
                        case 'b': sb.append('\b'); break;
                        case 'f': sb.append('\f'); break;
                        case 'u':
                            sb.append((char) Integer.parseInt(s.substring(pos, pos + 4), 16));
                            pos += 4;
                            break;
                        default: sb.append(e);
                    }
                } else {
                    sb.append(c);
                }
            }
        }

        private char peek() {
            while (Character.isWhitespace(s.charAt(pos))) pos++;
            return s.charAt(pos);
        }

        private char next() {
            char c = peek();
            pos++;
            return c;
        }

        private void expect(char c) {
            if (next() != c) throw error("'" + c + "'");
        }

        private IllegalArgumentException error(String expected) {
            return new IllegalArgumentException("bad request JSON at " + pos + ": expected " + expected);
        }
    }
}
