"""Spark edge: an exactly-once ``foreachBatch`` sink, batch writes, reads and maintenance.

The only package that imports pyspark (install the ``spark`` extra)::

    from snaplake.spark import SnaplakeSink, read, write

    query = (
        df.writeStream.foreachBatch(SnaplakeSink("demo.flights", warehouse="./warehouse"))
        .option("checkpointLocation", "./checkpoints/flights")
        .start()
    )
    flights = read(spark, "demo.flights", warehouse="./warehouse", filter={"month": 7})
    compact(spark, "demo.flights", warehouse="./warehouse")  # rewrites on the executors

    register_data_source(spark)  # format("snaplake"): batch reads and a changelog stream
    df = spark.read.format("snaplake").option("warehouse", "./warehouse").load("demo.flights")
    changes = spark.readStream.format("snaplake").option("warehouse", "./warehouse").load(
        "demo.flights"
    )

Executors write and read data files through the table's picklable FileIO,
so local disk and S3 work without Hadoop connectors; nothing assumes local
mode.

Classic sessions and Spark Connect sessions (``SparkSession.builder.remote(...)``,
no ``sparkContext``) both work; Connect needs pyspark's Connect dependencies
(part of the ``spark`` extra) and, for the sink, an explicit ``commit_user``.
Importing this package never imports the Connect client.
"""

from snaplake.spark.maintenance import compact, remove_orphan_files
from snaplake.spark.read import read
from snaplake.spark.sink import BatchOutcome, SinkBatchResult, SnaplakeSink
from snaplake.spark.source import SnaplakeDataSource, register_data_source
from snaplake.spark.write import write

__all__ = [
    "BatchOutcome",
    "SinkBatchResult",
    "SnaplakeDataSource",
    "SnaplakeSink",
    "compact",
    "read",
    "register_data_source",
    "remove_orphan_files",
    "write",
]
