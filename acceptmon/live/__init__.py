"""The one live state that ``serve`` and ``tail`` read: the latest record per file and rank, totals, the live doctor."""
