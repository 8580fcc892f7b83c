"""`harness model suara2` prints the model's choice."""

from conftest import harness


def test_paper_parameters_at_1024():
    out = harness("model", "suara2", "--procs", "1024", "--size", "4MiB", "--params", "paper")
    assert out.returncode == 0, out.stderr
    assert "grid P_r x P_c = 32 x 32, combination (rs, rs)" in out.stdout
    assert "predicted speedup over rs" in out.stdout


def test_prime_has_no_grid():
    out = harness("model", "suara2", "--procs", "13", "--size", "4MiB")
    assert out.returncode == 0 and "no grid" in out.stdout


def test_bad_size_is_one_line():
    out = harness("model", "suara2", "--procs", "16", "--size", "12 parsecs")
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "--size" in out.stderr
