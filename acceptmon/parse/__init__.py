"""Grammar files and text to records: the record-kind registry, the parser and its fast lane (pure, but load)."""
