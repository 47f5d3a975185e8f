"""PySpark connector for epochlog: the source (streaming and batch, truncation-aware,
see ``epochlog.spark.stream_reader``) and the sinks. Spark finds it as
``format("epochlog")`` through the top-level ``pyspark_epochlog.DefaultSource``."""
