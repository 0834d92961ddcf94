"""``python -m prism_tools``: the same command as ``prism-tools``."""

from __future__ import annotations

from prism_tools.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
