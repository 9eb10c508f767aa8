"""Batch outputs: the parse table (CSV/JSONL), the per-launch runs table, and atomic output files."""
