"""A consumer process for the subscription crash test: mirror ``db.source`` into ``db.target``.

Usage: python tests/integration/subscription_mirror_proc.py --warehouse WH --consumer ID
       [--kill-at K] [--kill-after]

Subscribes to ``db.source`` as consumer ``ID`` (``start="earliest"``,
``stop_when_idle``) and, for each batch, writes its rows to ``db.target`` in one
exactly-once commit (commit user ``mirror``, ``commit_identifier`` = the source
snapshot id), then acknowledges the batch. Prints
``COMMIT <source snapshot> <target snapshot> <duplicate 0|1>`` after each commit,
``ACK <source snapshot>`` after each ack and ``DONE`` at the end.

With ``--kill-at K`` the process SIGKILLs itself at the K-th storage write (before
it or, with ``--kill-after``, right after it returned), counted as
``tests/integration/writer_proc.KillSwitch`` counts them, over both tables: the
lease, the target's data file, manifests, manifest lists, snapshot and hint, and
the consumer file's rewrite on ack. The lease is long (1 h), so no renewal
happens during a run and the count is the same on every machine.
"""

from __future__ import annotations

import argparse
import sys
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.integration.writer_proc import KillSwitch

from snaplake.store.io.local_file_io import LocalFileIO
from snaplake.table import Table

COMMIT_USER = "mirror"


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--warehouse", required=True)
    p.add_argument("--consumer", required=True)
    p.add_argument("--kill-at", type=int, default=0)
    p.add_argument("--kill-after", action="store_true")
    args = p.parse_args()
    file_io = LocalFileIO()
    if args.kill_at:
        KillSwitch(args.kill_at, after=args.kill_after).install(file_io)
    root = args.warehouse.rstrip("/")
    source = Table(file_io=file_io, root=f"{root}/db.db/source", identifier="db.source")
    target = Table(file_io=file_io, root=f"{root}/db.db/target", identifier="db.target")
    with source.subscribe(
        args.consumer, start="earliest", stop_when_idle=True, lease_ttl=timedelta(hours=1)
    ) as subscription:
        for batch in subscription:
            rows = batch.reader.read_all().drop_columns(["_row_kind", "_snapshot_id"])
            result = target.write(
                rows, commit_user=COMMIT_USER, commit_identifier=batch.snapshot_id
            )
            print(
                f"COMMIT {batch.snapshot_id} {result.snapshot_id} {int(result.was_duplicate)}",
                flush=True,
            )
            batch.ack()
            print(f"ACK {batch.snapshot_id}", flush=True)
    print("DONE", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
