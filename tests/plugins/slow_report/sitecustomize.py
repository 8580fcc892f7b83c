"""Test-only delay of the report stage, on PYTHONPATH of a workflow (never part of the harness).

With HARNESS_TEST_REPORT_STARTED=<path>, the AUTO-vs-BEST report (``harness.report.figures.
make``, what the workflow's ``report`` rule calls) first writes its process id to <path>,
then sleeps HARNESS_TEST_SLOW_REPORT seconds (default 20) before drawing anything: a test can
see that the stage has started and interrupt the workflow while the stage's outputs are
provably not written yet. Every other process and module is untouched."""

import importlib.abc
import importlib.util
import os
import sys
import time

MODULE = "harness.report.figures"
STARTED = os.environ.get("HARNESS_TEST_REPORT_STARTED")


class _DelayReport(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != MODULE:
            return None
        sys.meta_path.remove(self)  # find the real module; patch it once
        spec = importlib.util.find_spec(name)
        load = spec.loader.exec_module

        def exec_module(module):
            load(module)
            real = module.make

            def make(*args, **kwargs):
                with open(STARTED, "w") as fh:
                    fh.write(str(os.getpid()))
                time.sleep(float(os.environ.get("HARNESS_TEST_SLOW_REPORT", "20")))
                return real(*args, **kwargs)

            module.make = make

        spec.loader.exec_module = exec_module
        return spec


if STARTED:
    sys.meta_path.insert(0, _DelayReport())
