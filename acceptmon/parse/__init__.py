"""Grammar files and text to records: the registry of record kinds, the parser and its fast lane (pure, but for ``load``)."""
