"""The fast lane of ``acceptmon parse``: table rows written straight from the logged text.

The general parser builds a typed record per line and a sink formats it; for the common
lines that is most of the time a million-line log takes. The fast lane compiles, from the
grammar files' own samples, one whole-line ``re`` pattern per message template (key order),
whose captures are constrained so that the captured bytes already are the output text
(``2.5`` for ``2.50`` is captured without the zero), and writes CSV/JSONL rows from them.
Lines it does not match, launch lines, and anything it cannot prove it counted right go to
the general parser, so output and tallies are byte-identical (``tests/test_fastlane.py``).

- :mod:`acceptmon.parse.fast.pieces`: what each value kind may look like, and output cells;
- :mod:`acceptmon.parse.fast.model`: what a template is; :mod:`acceptmon.parse.fast.bodies`: its head and body read;
- :mod:`acceptmon.parse.fast.templates`: templates from grammar samples and log lines, and the pattern;
- :mod:`acceptmon.parse.fast.lane`: :class:`~acceptmon.parse.fast.lane.FastLane`, a block at a time.
"""

from __future__ import annotations
