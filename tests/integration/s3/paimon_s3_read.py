"""Read a table with pypaimon through its own S3 support; runs in the pypaimon venv.

Usage: <.venv-paimon python> paimon_s3_read.py s3://BUCKET/wh db.t OUT.arrow

pypaimon catalog options (``s3.endpoint``, ``s3.access-key``, ``s3.secret-key``, ...)
come as JSON in ``$SNAPLAKE_TEST_PAIMON_S3_OPTIONS``, so credentials stay off the
command line. Writes the rows as an Arrow IPC file and prints the snapshot ids as JSON.
"""

from __future__ import annotations

import json
import os
import sys

import pyarrow as pa
from pypaimon import CatalogFactory


def main() -> int:
    warehouse, identifier, out = sys.argv[1:4]
    options = json.loads(os.environ["SNAPLAKE_TEST_PAIMON_S3_OPTIONS"])
    catalog = CatalogFactory.create({"warehouse": warehouse, **options})
    table = catalog.get_table(identifier)
    builder = table.new_read_builder()
    splits = builder.new_scan().plan().splits()
    data = builder.new_read().to_arrow(splits)
    with pa.OSFile(out, "wb") as sink, pa.ipc.new_file(sink, data.schema) as writer:
        writer.write_table(data)
    print(json.dumps({"splits": len(splits), "rows": data.num_rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
