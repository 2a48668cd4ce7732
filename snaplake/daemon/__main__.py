"""``python -m snaplake.daemon --config snaplake.toml [--check-config]``."""

from __future__ import annotations

import sys

from snaplake.daemon.main import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
