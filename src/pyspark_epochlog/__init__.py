"""Spark looks up ``format("epochlog")`` as the module ``pyspark_epochlog`` and uses its
``DefaultSource``: no ``spark.dataSource.register`` call is needed."""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from epochlog.spark.columns import schema_ddl
from epochlog.spark.options import parse_options


class DefaultSource(DataSource):
    """epochlog as a Spark data source: ``spark.readStream.format("epochlog")`` and
    ``spark.read.format("epochlog")``."""

    @classmethod
    def name(cls) -> str:
        return "epochlog"

    def schema(self) -> str:
        value = str(self.options.get("includeHeaders", "false")).strip().lower()
        return schema_ddl(value == "true")

    def reader(self, schema: StructType) -> DataSourceReader:
        from epochlog.spark.batch_reader import EpochlogBatchReader

        return EpochlogBatchReader(parse_options(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        from epochlog.spark.stream_reader import EpochlogStreamReader

        return EpochlogStreamReader(parse_options(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from epochlog.spark.sink import batch_writer

        return batch_writer(self.options, schema, overwrite)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from epochlog.spark.sink import stream_writer

        return stream_writer(self.options, schema)
