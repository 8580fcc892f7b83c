"""The CI guard on the JUnit report (`.ci/junit_check.py`): a run with fewer tests than the
floor kept in `.ci/test_floor` fails, as does a skip or a missing report; the closing line
names the floor."""

import importlib.util

import pytest

from conftest import REPO

_spec = importlib.util.spec_from_file_location("junit_check", REPO / ".ci" / "junit_check.py")
junit_check = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(junit_check)


def report(tmp_path, passed=0, skipped=0, failed=0):
    cases = ([f'<testcase classname="t" name="p{i}"/>' for i in range(passed)]
             + [f'<testcase classname="t" name="s{i}"><skipped/></testcase>' for i in range(skipped)]
             + [f'<testcase classname="t" name="f{i}"><failure/></testcase>' for i in range(failed)])
    path = tmp_path / "report.xml"
    path.write_text(f'<testsuites><testsuite>{"".join(cases)}</testsuite></testsuites>')
    return str(path)


def floor(tmp_path, text):
    path = tmp_path / "floor"
    path.write_text(text)
    return path


def test_the_repositorys_floor_is_one_integer():
    assert junit_check.read_floor() >= 1


def test_at_the_floor_passes_and_one_below_fails(tmp_path, capsys):
    f = floor(tmp_path, "# raise me\n5\n")
    assert junit_check.main(report(tmp_path, passed=5), f) == 0
    assert capsys.readouterr().out.splitlines()[-1] == \
        "junit-check: 5 passed, 0 failed, 0 skipped (floor 5)"
    assert junit_check.main(report(tmp_path, passed=4), f) == 1
    out = capsys.readouterr().out
    assert "junit-check: 4 tests is below the floor of 5" in out
    assert out.splitlines()[-1] == "junit-check: 4 passed, 0 failed, 0 skipped (floor 5)"


def test_a_skip_or_a_failure_fails_above_the_floor(tmp_path, capsys):
    f = floor(tmp_path, "2\n")
    assert junit_check.main(report(tmp_path, passed=3, skipped=1), f) == 1
    assert "junit-check: unexpected skip: t::s0" in capsys.readouterr().out
    assert junit_check.main(report(tmp_path, passed=3, failed=1), f) == 1


def test_no_report_or_no_floor_fails(tmp_path, capsys):
    assert junit_check.main(str(tmp_path / "none.xml"), floor(tmp_path, "1\n")) == 1
    assert "no JUnit report" in capsys.readouterr().out
    assert junit_check.main(report(tmp_path, passed=3), tmp_path / "missing") == 1
    assert "junit-check: no test floor:" in capsys.readouterr().out


@pytest.mark.parametrize("text", ["", "# only a comment\n", "0\n", "12\n13\n", "many\n"])
def test_a_floor_file_without_one_positive_integer_is_refused(tmp_path, text):
    with pytest.raises(ValueError, match=r"floor: expected one integer of at least 1"):
        junit_check.read_floor(floor(tmp_path, text))
