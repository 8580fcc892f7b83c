import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
HARNESS = [sys.executable, "-m", "harness.cli"]
PLUGIN = str(REPO / "tests" / "plugins" / "broken.py")
FAST = ["--min-reps", "3", "--max-reps", "6", "--warmup", "1", "--precision", "0.5"]

# The test processes (pytest-xdist workers) and every harness they start take turns for their
# MPI launches (harness.turns): on two cores, two oversubscribed launches side by side each
# took several times as long as one alone (their waiting ranks spin), which more than undid
# the gain of running tests in parallel. What is not a launch (Snakemake, reports, Python
# start-up) still overlaps.
# The jobs of the local two-node Slurm (.ci/slurm: both nodes on this host) take turns too.
os.environ.setdefault("HARNESS_LAUNCH_LOCK", str(REPO / ".test-launch.lock"))
os.environ.setdefault("HARNESS_LAUNCH_LOCK_IN_SLURM", "1")


def _launches_first(lower_by: int = 10) -> None:
    """Run the session at a nice value ``lower_by`` above its own and its launches' turns at
    the original (HARNESS_LAUNCH_NICE), when this process may raise a priority again (root, or
    an RLIMIT_NICE that reaches it): an oversubscribed launch beside busy test workers took 80 s
    at equal priority, 7 s ahead of them. Once per session: the workers inherit both."""
    import resource

    if "HARNESS_LAUNCH_NICE" in os.environ:
        return
    now = os.getpriority(os.PRIO_PROCESS, 0)
    if os.geteuid() != 0 and 20 - resource.getrlimit(resource.RLIMIT_NICE)[0] > now:
        return
    os.environ["HARNESS_LAUNCH_NICE"] = str(now)
    os.setpriority(os.PRIO_PROCESS, 0, min(19, now + lower_by))


_launches_first()


def run_mpi(cmd, **kwargs):
    """``subprocess.run`` of an MPI launch (mpiexec ...), in this machine's turn for launches."""
    from harness.turns import launch_turn

    script = next((str(a) for a in reversed(cmd) if str(a).endswith(".py")), str(cmd[0]))
    with launch_turn(f"test launch {Path(script).name}"):
        return subprocess.run(cmd, **kwargs)


# Under CI (CI=true) a skip is a failure: a missing MPI library, torch, browser or Slurm must
# not pass unseen. Outside CI a skip stays a skip (a laptop without Slurm can still run the
# rest). .ci/run also fails on any skip the JUnit report shows.
IN_CI = os.environ.get("CI", "").lower() == "true"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if IN_CI and report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = (f"skipped under CI=true, where every test must run: {reason}")
    return report


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector):
    report = yield
    if IN_CI and report.skipped:  # a module-level skip (importorskip) would hide every test
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = f"{collector.nodeid} skipped under CI=true: {reason}"
    return report


# What a test started and left running is stopped when the test ends: a test that failed or
# timed out in the middle of a workflow (pytest-timeout ends the test, not the processes it
# started) otherwise leaves its Snakemake, launches and ranks running, and a launch left
# holding the machine's launch turn (HARNESS_LAUNCH_LOCK) stalls every test after it (one
# hung launch would have held it to its 30-minute wall time). Every process a test starts inherits
# PYTEST_CURRENT_TEST ("<test> (call)"), which finds them; what a module's fixture started (in
# a test's set-up, such as the local Slurm) is not touched.


def started_by(phase: str) -> list[int]:
    """The processes (not this one) whose environment says ``PYTEST_CURRENT_TEST=<phase>``."""
    marker = f"PYTEST_CURRENT_TEST={phase}".encode()
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            env = (entry / "environ").read_bytes()
        except OSError:  # gone, or not ours to read
            continue
        if marker in env.split(b"\0") and int(entry.name) != os.getpid():
            found.append(int(entry.name))
    return found


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    import signal
    import time

    try:
        return (yield)
    finally:
        stopped: set = set()
        for _ in range(20):  # again until none is left: one may be forking as it is stopped
            left = set(started_by(f"{item.nodeid} (call)"))
            if not left:
                break
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            stopped |= left
            time.sleep(0.1)
        if stopped:
            print(f"\n{item.nodeid}: stopped {len(stopped)} process(es) it left running",
                  file=sys.stderr)


# HARNESS_TEST_CPU_TRACE (a file): one line per test with its wall time and the CPU seconds
# it took, its own and its children's (the launches, Snakemake and harness commands it
# waited for): on two cores the suite's wall time follows its CPU time, not its durations.
CPU_TRACE = os.environ.get("HARNESS_TEST_CPU_TRACE")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    if not CPU_TRACE:
        return (yield)
    import json
    import resource
    import time

    def cpu(who):
        u = resource.getrusage(who)
        return u.ru_utime + u.ru_stime

    began = (time.monotonic(), cpu(resource.RUSAGE_SELF), cpu(resource.RUSAGE_CHILDREN))
    try:
        return (yield)
    finally:
        line = {"test": item.nodeid, "worker": os.environ.get("PYTEST_XDIST_WORKER", "-"),
                "ended": round(time.time(), 1), "wall": round(time.monotonic() - began[0], 2),
                "cpu_self": round(cpu(resource.RUSAGE_SELF) - began[1], 2),
                "cpu_children": round(cpu(resource.RUSAGE_CHILDREN) - began[2], 2)}
        with open(CPU_TRACE, "a") as fh:
            fh.write(json.dumps(line) + "\n")


@pytest.fixture
def results_root(tmp_path, monkeypatch):
    root = tmp_path / "results"
    monkeypatch.setenv("HARNESS_RESULTS", str(root))
    return root


def harness(*args, timeout=600):
    """Run the ``harness`` command; returns the CompletedProcess (text)."""
    return subprocess.run(HARNESS + [str(a) for a in args], capture_output=True, text=True,
                          timeout=timeout, env=os.environ.copy(), cwd=REPO)


def fast_settings(**over):
    s = {"confidence": 0.95, "precision": 0.5, "min_reps": 3, "max_reps": 6, "time_budget": 30.0,
         "warmup": 1, "base_compute": 0.0, "metric": "mean"}
    s.update(over)
    return s


def execute_run(results_root, library, cells, settings=None, campaign="t", plugins=(),
                timeout=300, algorithm_env=None):
    """Render, write and execute one run of ``cells`` through the same path as the workflow.
    Returns (outcome, run document, store)."""
    from harness import fileio, libraries
    from harness.campaign import runner
    from harness.cells import Run
    from harness.results import store as results

    lib = libraries.get_library(library)
    env = algorithm_env
    if env is None:
        alg = cells[0].algorithm
        env = lib.native(alg).env if alg.startswith("native:") else {}
    from harness.cells import THREAD_LEVELS, needed_thread_level

    level = max((max(c.thread_level, needed_thread_level(c.algorithm, c.params),
                     key=THREAD_LEVELS.index) for c in cells), key=THREAD_LEVELS.index)
    run = Run(library=library, env=tuple(sorted(env.items())), procs=cells[0].procs,
              nodes=1, cells=tuple(cells), thread_level=level)
    store = results.CampaignStore(results_root, campaign)
    script, spec = runner.prepare(run, lib, store, settings or fast_settings(), plugins=plugins)
    runner.write(store, script, spec)
    outcome = runner.execute(store, spec, timeout=timeout)
    doc = fileio.read_json(store.run_doc(run.run_id))
    return outcome, doc, store


# --- the local two-node Slurm of .ci/slurm (tests/test_slurm.py, tests/test_paper_configs.py)

SNAKEMAKE = [str(Path(sys.executable).parent / "snakemake")]
FAST_STOP = {"min_reps": 3, "max_reps": 6, "precision": 0.5, "warmup": 1, "time_budget": "20s"}
SITE_VARS = ("HARNESS_SLURM_ACCOUNT", "HARNESS_SLURM_PARTITION", "HARNESS_SLURM_QOS")


@pytest.fixture(scope="module")
def local_slurm_cluster():
    """Opt-in (HARNESS_SLURM_TESTS=1, as CI sets it): bring the local Slurm up with
    `bash .ci/slurm/up.sh` (Debian packages, root) and fail if that fails; skip otherwise."""
    if os.environ.get("HARNESS_SLURM_TESTS") != "1":
        pytest.skip("real Slurm tests are opt-in: set HARNESS_SLURM_TESTS=1 to run them (they "
                    "install and start a local two-node Slurm with .ci/slurm/up.sh, as root)")
    try:
        up = subprocess.run(["bash", str(REPO / ".ci" / "slurm" / "up.sh")], cwd=REPO,
                            capture_output=True, text=True, timeout=900)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f".ci/slurm/up.sh did not finish in {exc.timeout} s", pytrace=False)
    if up.returncode != 0:
        pytest.fail(f".ci/slurm/up.sh failed ({up.returncode}):\n{up.stdout[-3000:]}\n"
                    f"{up.stderr[-3000:]}", pytrace=False)


def snakemake_slurm(base, cfg, *extra, site=None, timeout=600):
    """`snakemake --profile slurm` from the repository root (where ./slurm names the profile),
    with the work directory, results and figures under ``base``."""
    env = {k: v for k, v in os.environ.items() if k not in SITE_VARS}
    env.update(site or {})
    env["HARNESS_RESULTS"] = str(base / "results")
    env["HARNESS_FIGURES"] = str(base / "figures")
    return subprocess.run(
        SNAKEMAKE + ["--profile", "slurm", "--snakefile", str(REPO / "Snakefile"),
                     "--directory", str(base / "work"), "--configfile", str(cfg),
                     "--slurm-init-seconds-before-status-checks", "2", *extra],
        env=env, capture_output=True, text=True, timeout=timeout, cwd=REPO)
