"""One pipeline, batch and live: bytes -> parser -> records handed to sinks.

:mod:`~acceptmon.pipeline.batch` reads whole files once (sequentially, or on several
processes for a large file); :mod:`~acceptmon.pipeline.live` follows files as they
grow. Both feed the same :class:`~acceptmon.parse.parser.Parser`.
"""
