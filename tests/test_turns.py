"""Local launches taking turns (``harness/turns.py``, ``HARNESS_LAUNCH_LOCK``): a launch waits
while another harness process holds the turn and says so; inside a Slurm job, or with the
variable unset, nothing waits."""

import fcntl
import os
import signal
import subprocess
import sys
import time

from conftest import FAST, HARNESS, REPO

TAKE = ("from harness.turns import launch_turn\n"
        "with launch_turn('probe') as waited:\n"
        "    print(f'turn after {waited:.3f} s', flush=True)\n")


def _start(argv, lock, **extra):
    env = {k: v for k, v in os.environ.items()
           if k not in ("SLURM_JOB_ID", "HARNESS_LAUNCH_LOCK_IN_SLURM")}
    env.update(HARNESS_LAUNCH_LOCK=str(lock), **extra)
    return subprocess.Popen(argv, env=env, cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _held(lock):
    fh = open(lock, "a+")
    fcntl.flock(fh, fcntl.LOCK_EX)
    return fh


def test_a_second_process_waits_for_the_turn_and_says_so(tmp_path):
    lock = tmp_path / "launch.lock"
    holder = _held(lock)
    proc = _start([sys.executable, "-c", TAKE], lock)
    said = proc.stderr.readline()  # returns once the process found the turn taken
    assert said == f"probe: waiting for another launch on this machine to end " \
                   f"(HARNESS_LAUNCH_LOCK={lock})\n"
    time.sleep(0.5)
    assert proc.poll() is None  # cannot have its turn while it is held here
    holder.close()
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert float(out.split()[2]) >= 0.5


def test_nothing_waits_inside_a_slurm_job_unless_it_opts_in_or_without_the_variable(tmp_path):
    lock = tmp_path / "launch.lock"
    holder = _held(lock)
    try:
        in_job = _start([sys.executable, "-c", TAKE], lock, SLURM_JOB_ID="42")
        out, err = in_job.communicate(timeout=60)
        assert in_job.returncode == 0 and out.startswith("turn after 0.000 s"), (out, err)
        in_opted_job = _start([sys.executable, "-c", TAKE], lock, SLURM_JOB_ID="42",
                              HARNESS_LAUNCH_LOCK_IN_SLURM="1")
        assert "waiting for another launch" in in_opted_job.stderr.readline()
        assert in_opted_job.poll() is None  # a Slurm job that opted in waits its turn
        in_opted_job.kill()
        in_opted_job.communicate(timeout=60)
        env = {k: v for k, v in os.environ.items() if k != "HARNESS_LAUNCH_LOCK"}
        free = subprocess.run([sys.executable, "-c", TAKE], env=env, cwd=REPO,
                              capture_output=True, text=True, timeout=60)
        assert free.returncode == 0 and "waiting" not in free.stderr
    finally:
        holder.close()


def test_harness_run_waits_for_the_turn_then_measures(tmp_path):
    lock = tmp_path / "launch.lock"
    holder = _held(lock)
    proc = _start(HARNESS + ["run", "--library", "mpich", "--algorithm", "native:auto",
                             "--procs", "2", "--size", "64B", *FAST], lock,
                  HARNESS_RESULTS=str(tmp_path / "results"))
    said = proc.stderr.readline()
    assert said.startswith("run r") and "waiting for another launch" in said, said
    time.sleep(0.5)
    # the run waits for its turn: nothing was launched, nothing written
    assert proc.poll() is None and not list(tmp_path.glob("results/adhoc/runs/*.json"))
    holder.close()
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, out + err
    assert len(list(tmp_path.glob("results/adhoc/runs/*.json"))) == 1


NICE_PROBE = (
    "import os, subprocess, sys\n"
    "from harness.turns import launch_turn\n"
    "os.setpriority(os.PRIO_PROCESS, 0, 15)\n"
    "with launch_turn('probe'):\n"
    "    child = subprocess.run([sys.executable, '-c', 'import os; print(os.nice(0))'],\n"
    "                           capture_output=True, text=True).stdout.strip()\n"
    "    inside = os.getpriority(os.PRIO_PROCESS, 0)\n"
    "print(child, inside, os.getpriority(os.PRIO_PROCESS, 0))\n")


def test_a_turn_runs_at_the_launch_nice_value_then_goes_back(tmp_path):
    """HARNESS_LAUNCH_NICE: a process at nice 15 runs its turn, and what it starts in it, at
    nice 5 and is back at 15 after it, where it may raise a priority (root, or RLIMIT_NICE);
    without that right the turn stays at 15 and nothing fails."""
    import resource

    privileged = os.geteuid() == 0 or resource.getrlimit(resource.RLIMIT_NICE)[0] >= 15
    proc = _start([sys.executable, "-c", NICE_PROBE], tmp_path / "launch.lock", HARNESS_LAUNCH_NICE="5")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    child, inside, after = out.split()
    assert (int(child), int(inside), int(after)) == ((5, 5, 15) if privileged else (15, 15, 15))


def test_what_a_test_left_running_is_found_by_its_phase(tmp_path):
    """tests/conftest.py stops, when a test ends, the processes its call started and left
    running (a failed workflow test's launch would hold the turn above for every test after
    it); it finds them, children included, by their PYTEST_CURRENT_TEST."""
    from conftest import started_by

    phase = f"probe-{os.getpid()}-{time.monotonic_ns()} (call)"
    env = {**os.environ, "PYTEST_CURRENT_TEST": phase}
    parent = subprocess.Popen(["bash", "-c", "sleep 300 & wait"], env=env)
    try:
        deadline = time.monotonic() + 30
        while len(found := started_by(phase)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert parent.pid in found and len(found) == 2, found  # bash and its sleep
        assert started_by(phase.replace("(call)", "(setup)")) == []
        assert os.getpid() not in started_by(os.environ["PYTEST_CURRENT_TEST"])
    finally:
        for pid in started_by(phase):
            os.kill(pid, signal.SIGKILL)
        parent.wait()
