"""Store layer: FileIO backends, paths, formats (BinaryRow, schema, snapshot, manifests), scans."""
