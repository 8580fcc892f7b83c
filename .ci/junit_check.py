"""Fail CI on what a green pytest exit could still hide: tests gone, or a skip.

Reads the JUnit report of `make test` and prints one closing line of counts. Exit 1 when the
report is missing, counts fewer tests than the floor kept in `.ci/test_floor` (tests that
stopped being collected would otherwise go unnoticed), or holds a failure, an error or a skip
(under CI=true the suite turns skips into failures already; this is the second guard)."""

import sys
import xml.etree.ElementTree as ET
from pathlib import Path

FLOOR = Path(__file__).resolve().parent / "test_floor"


def read_floor(path: Path = FLOOR) -> int:
    """The one integer of ``path``; lines starting with # are comments."""
    values = [line.strip() for line in path.read_text().splitlines()
              if line.strip() and not line.strip().startswith("#")]
    if len(values) != 1 or not values[0].isdigit() or int(values[0]) < 1:
        raise ValueError(f"{path}: expected one integer of at least 1 besides # comments, "
                         f"got {values!r}")
    return int(values[0])


def main(path: str, floor_path: Path = FLOOR) -> int:
    try:
        floor = read_floor(floor_path)
    except (OSError, ValueError) as exc:
        print(f"junit-check: no test floor: {exc}")
        return 1
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
    if total < floor:
        print(f"junit-check: {total} tests is below the floor of {floor} ({floor_path}): tests "
              f"were lost (not collected, or a module failed to import); lower the floor only "
              f"with the change that removes tests")
    print(f"junit-check: {counts['passed']} passed, {counts['failed'] + counts['error']} failed, "
          f"{counts['skipped']} skipped (floor {floor})")
    return 0 if counts["passed"] == total and total >= floor else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else ".test-report.xml"))
