"""``python -m harness.report NAME ARGUMENTS...``: write one report (``registry.py``)."""

import sys

from .registry import main

sys.exit(main())
