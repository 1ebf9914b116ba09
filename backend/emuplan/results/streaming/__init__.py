"""The huge-file path: a file past ``EMUPLAN_STREAMED_IMPORT_ABOVE_BYTES`` of a format whose registry entry streams
(``formats.Streaming``) read a block at a time (``stream_blocks``) into Parquet on disk and summarised out of core
(``streamed``)."""
