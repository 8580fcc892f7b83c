"""Bad input: a one-line error naming the option and the value, exit code 2, nothing written."""

import re

import pytest
from conftest import harness


def cli(capsys, *args):
    """``harness <args>`` in this process (no MPI runs before these errors): the exit code and
    what it printed, as a CompletedProcess-like object."""
    from types import SimpleNamespace

    from harness.cli import main

    try:
        code = main([str(a) for a in args])
    except SystemExit as exc:
        code = exc.code
    out = capsys.readouterr()
    return SimpleNamespace(returncode=code, stdout=out.out, stderr=out.err)


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
def test_bad_input(results_root, capsys, args, words):
    out = cli(capsys, "run", *args)
    assert out.returncode == 2, out
    assert out.stdout == ""
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    for w in words:
        assert w in lines[0], (w, lines[0])
    assert not results_root.exists()


def test_help_lists_every_dimension(capsys):
    out = cli(capsys, "run", "--help")
    assert out.returncode == 0
    for opt in ["--library", "--algorithm", "--procs", "--size", "--dtype", "--op", "--delay",
                "--max-delay", "--late-rank", "--campaign", "--dry-run", "--precision"]:
        assert opt in out.stdout


@pytest.mark.parametrize("command", ["check", "retry", "status"])
def test_campaign_commands_name_a_missing_campaign(results_root, capsys, command):
    out = cli(capsys, command, "nosuch")
    assert out.returncode == 2, out
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "campaign" in lines[0] and "nosuch" in lines[0], out.stderr


def test_retry_refuses_a_config_of_another_campaign(results_root, tmp_path, capsys):
    (results_root / "other").mkdir(parents=True)
    cfg = tmp_path / "c.yaml"
    cfg.write_text("campaign: mine\nexperiments:\n  a: {libraries: [mpich], algorithms: "
                   "['native:auto'], procs: [2], sizes: [8B]}\n")
    out = cli(capsys, "retry", "other", "--configfile", str(cfg))
    assert out.returncode == 2, out
    assert "--configfile" in out.stderr and "'mine'" in out.stderr and "'other'" in out.stderr
    assert list((results_root / "other").iterdir()) == []


def test_a_local_run_past_four_ranks_per_core_is_refused(results_root, capsys):
    import os

    big = 4 * (os.cpu_count() or 1) + 1
    out = cli(capsys, "run", "--procs", str(big))
    assert out.returncode == 2 and not results_root.exists()
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and f"--procs: {big} ranks" in lines[0] and "--oversubscribe" in lines[0]


# --- a 0-byte message: a valid MPI call, measured; no bandwidth to print (config alike)

def test_a_zero_byte_allreduce_is_measured_and_its_bandwidth_is_na(results_root):
    import pandas as pd
    from conftest import FAST

    out = harness("run", "--procs", "2", "--size", "0B", "--library", "mpich", *FAST)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Traceback" not in out.stderr, out.stderr
    assert "algbw n/a, busbw n/a" in out.stdout, out.stdout
    row = pd.read_csv(results_root / "adhoc" / "summary.csv").iloc[0]
    assert row["size"] == 0 and row["count"] == 0
    assert row.status in ("ok", "not-converged") and row["mean"] > 0


def test_the_config_takes_a_zero_byte_size_as_the_command_line_does(tmp_path, capsys):
    from harness.cli import main

    cfg = tmp_path / "c.yaml"
    cfg.write_text("campaign: z\nexperiments:\n  a: {libraries: [mpich], algorithms: "
                   "['native:auto'], procs: [2], sizes: [0B, 8B]}\n")
    assert main(["plan", "--config", str(cfg)]) == 0
    assert "2 cells" in capsys.readouterr().out


# --- a cell whose buffers do not fit in this machine's memory is refused before launch

def test_a_cell_larger_than_the_memory_is_refused_before_launch(results_root):
    from harness import memory

    need = memory.cell_bytes(64 * 2**30, 2)
    have, _ = memory.available_bytes()
    assert need > have, "this machine has room for 3 x 64 GiB x 2 ranks: the test needs less"
    out = harness("run", "--procs", "2", "--size", "64GiB")
    assert out.returncode == 2, out
    assert out.stdout == "" and not results_root.exists()
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    for w in ["argument --size: 64GiB per rank on P=2", f"needs at least {memory.human(need)}",
              "3 buffers"]:
        assert w in lines[0], (w, lines[0])
    # what is available moves with the other processes here: a number below the need
    found = re.search(r"more than the ([0-9.]+) ([KMGT]iB) available \(MemAvailable in "
                      r"/proc/meminfo\)", lines[0])
    assert found, lines[0]
    assert 0 < float(found[1]) * 2 ** (10 * "KMGT".index(found[2][0]) + 10) < need


def _available(monkeypatch, nbytes):
    from harness import memory

    monkeypatch.setattr(memory, "available_bytes", lambda: (nbytes, "test"))


def test_the_memory_check_counts_three_buffers_per_rank(results_root, monkeypatch, capsys):
    from harness.cli import main

    _available(monkeypatch, 3 * 2**20 * 2)  # exactly send, receive, expected of 1 MiB, P=2
    assert main(["run", "--procs", "2", "--size", "1MiB", "--dry-run"]) == 0
    assert "#!" in capsys.readouterr().out
    _available(monkeypatch, 3 * 2**20 * 2 - 1)
    with pytest.raises(SystemExit, match=r"^2$") as exc:
        main(["run", "--procs", "2", "--size", "1MiB", "--dry-run"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "argument --size: 1MiB per rank on P=2 needs at least 6.0 MiB" in err, err
    assert not results_root.exists()


def _campaign(tmp_path, launch):
    from harness.campaign import config, plan

    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"campaign: m\nlaunch: {launch}\nexperiments:\n  a: {{libraries: [mpich], "
                   "algorithms: ['native:auto'], procs: [2], sizes: [1MiB]}\n")
    cell = plan.expand(config.load(cfg))[0].cells[0]
    return cfg, cell.cell_id


def test_a_campaign_cell_run_again_here_is_checked_too(results_root, tmp_path, monkeypatch,
                                                       capsys):
    from harness.cli import main

    cfg, cell = _campaign(tmp_path, "local")
    _available(monkeypatch, 2**20)
    with pytest.raises(SystemExit, match=r"^2$") as exc:
        main(["run", "--campaign", "m", "--cell", cell, "--configfile", str(cfg)])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert f"argument --cell: {cell}: 1MiB per rank on P=2 needs at least 6.0 MiB" in err, err
    assert not results_root.exists()


def test_a_slurm_campaign_cell_is_not_checked_against_this_machine(results_root, tmp_path,
                                                                   monkeypatch, capsys):
    from harness.cli import main

    cfg, cell = _campaign(tmp_path, "srun")
    _available(monkeypatch, 2**20)
    with pytest.raises(SystemExit, match=r"^2$") as exc:  # it gets past the memory check to the campaign's
        main(["run", "--campaign", "m", "--cell", cell, "--configfile", str(cfg)])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "has not run yet" in err and "memory" not in err, err
