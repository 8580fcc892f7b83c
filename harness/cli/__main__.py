"""``python -m harness.cli``: the ``harness`` command (the workflow's measure rule runs
``python -m harness.cli exec``)."""

import sys

from . import main

sys.exit(main())
