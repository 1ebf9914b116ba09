"""Containers a result file comes in, read under the import's budget (``results.budget``): gzip, Arrow IPC/Feather,
Parquet (its pages checked before any is decompressed). A zip or tar of a training job's files is
``formats.observed``'s."""
