"""The on-disk codecs: BinaryRow, types, schema, DataFileMeta, manifests, snapshot, Avro."""
