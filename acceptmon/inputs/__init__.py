"""Bytes in: files, streams and live follows, cut into blocks of whole lines; nothing here parses."""
