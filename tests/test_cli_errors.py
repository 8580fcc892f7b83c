"""Bad input: a one-line error naming the option and the value, exit code 2, nothing written."""

import pytest

from conftest import harness


@pytest.mark.parametrize("args,words", [
    (["--library", "lam"], ["--library", "'lam'", "mpich"]),
    (["--algorithm", "native:bogus"], ["--algorithm", "native:bogus", "native:auto"]),
    (["--algorithm", "bogus"], ["--algorithm", "bogus", "native:auto"]),
    (["--procs", "0"], ["--procs", "0"]),
    (["--size", "12 parsecs"], ["--size", "12 parsecs"]),
    (["--size", "12B"], ["--size", "12", "float64"]),
    (["--max-delay=-5ms", "--delay", "one-late"], ["--max-delay", "-5ms"]),
    (["--delay", "one-late", "--max-delay", "10ms", "--procs", "4", "--late-rank", "4"],
     ["--late-rank", "4"]),
    (["--precision", "0"], ["--precision", "0"]),
    (["--precision", "-1"], ["--precision", "-1"]),
    (["--min-reps", "50", "--max-reps", "10"], ["--min-reps", "50", "10"]),
    (["--delay", "sideways"], ["--delay", "sideways"]),
    (["--dtype", "complex64"], ["--dtype", "complex64"]),
    (["--campaign", "../escape"], ["--campaign", "../escape"]),
    (["--plugin", "/nonexistent.py"], ["--plugin", "/nonexistent.py"]),
])
def test_bad_input(results_root, args, words):
    out = harness("run", *args)
    assert out.returncode == 2, out
    assert out.stdout == ""
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    for w in words:
        assert w in lines[0], (w, lines[0])
    assert not results_root.exists()


def test_help_lists_every_dimension():
    out = harness("run", "--help")
    assert out.returncode == 0
    for opt in ["--library", "--algorithm", "--procs", "--size", "--dtype", "--op", "--delay",
                "--max-delay", "--late-rank", "--campaign", "--dry-run", "--precision"]:
        assert opt in out.stdout


@pytest.mark.parametrize("command", ["check", "retry", "status"])
def test_campaign_commands_name_a_missing_campaign(results_root, command):
    out = harness(command, "nosuch")
    assert out.returncode == 2, out
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "campaign" in lines[0] and "nosuch" in lines[0], out.stderr


def test_retry_refuses_a_config_of_another_campaign(results_root, tmp_path):
    (results_root / "other").mkdir(parents=True)
    cfg = tmp_path / "c.yaml"
    cfg.write_text("campaign: mine\nexperiments:\n  a: {libraries: [mpich], algorithms: "
                   "['native:auto'], procs: [2], sizes: [8B]}\n")
    out = harness("retry", "other", "--configfile", str(cfg))
    assert out.returncode == 2, out
    assert "--configfile" in out.stderr and "'mine'" in out.stderr and "'other'" in out.stderr
    assert list((results_root / "other").iterdir()) == []


def test_a_local_run_past_four_ranks_per_core_is_refused(results_root):
    import os

    big = 4 * (os.cpu_count() or 1) + 1
    out = harness("run", "--procs", str(big))
    assert out.returncode == 2 and not results_root.exists()
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and f"--procs: {big} ranks" in lines[0] and "--oversubscribe" in lines[0]
