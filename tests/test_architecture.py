"""The core stays free of the UI, exporter and watcher libraries (they load only in their commands)."""

from __future__ import annotations

import subprocess
import sys


def test_core_and_cli_import_no_ui_exporter_or_watcher_library():
    code = (
        "import sys\n"
        "import acceptmon.records, acceptmon.grammar, acceptmon.parse, acceptmon.stats, acceptmon.live\n"
        "import acceptmon.dashboard, acceptmon.pipeline, acceptmon.source, acceptmon.follow, acceptmon.cli\n"
        "print(sorted(m for m in ('textual', 'textual_plotext', 'prometheus_client', 'watchfiles') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
