"""Fail CI on what a green pytest exit could still hide: no test run, or a skip.

Reads the JUnit report of `make test` and prints one closing line of counts. Exit 1 when the
report is missing, counts no test, or holds a failure, an error or a skip (under CI=true the
suite turns skips into failures already; this is the second guard)."""

import sys
import xml.etree.ElementTree as ET
from pathlib import Path


def main(path: str) -> int:
    if not Path(path).is_file():
        print(f"junit-check: {path}: no JUnit report (did the tests start?)")
        return 1
    cases = ET.parse(path).getroot().iter("testcase")
    counts = {"passed": 0, "failed": 0, "error": 0, "skipped": 0}
    skipped = []
    for case in cases:
        kinds = {child.tag for child in case}
        if "failure" in kinds:
            counts["failed"] += 1
        elif "error" in kinds:
            counts["error"] += 1
        elif "skipped" in kinds:
            counts["skipped"] += 1
            skipped.append(f"{case.get('classname')}::{case.get('name')}")
        else:
            counts["passed"] += 1
    for name in skipped:
        print(f"junit-check: unexpected skip: {name}")
    total = sum(counts.values())
    print(f"junit-check: {total} tests, {counts['error']} of them errors")
    print(f"junit-check: {counts['passed']} passed, {counts['failed'] + counts['error']} failed, "
          f"{counts['skipped']} skipped")
    if total == 0:
        print("junit-check: the report counts no test")
        return 1
    return 0 if counts["passed"] == total else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else ".test-report.xml"))
