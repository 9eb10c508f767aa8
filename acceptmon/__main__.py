from __future__ import annotations

from acceptmon.cli import main

raise SystemExit(main())
