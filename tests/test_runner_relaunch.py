"""When the runner launches a run again (harness/campaign/runner.py): a launch that died before
measuring, and a launcher fault after measuring began (Slurm's pmi2 plugin garbling a
request), are launched again and resume from the journal; any other death after measuring
began is recorded as failed, not hidden by a relaunch."""

import json

import pytest

from harness.campaign import runner
from harness.results import store as results

GARBLED = ("slurmstepd-n1: error: mpi/pmi2: value not properly terminated in client request | "
           "MPIDI_UCX_comm_addr_exchange(159): Shared memory error | srun: error: n1: task 0: "
           "Aborted")


@pytest.fixture(autouse=True)
def _short_pause(monkeypatch):
    monkeypatch.setattr(runner, "RELAUNCH_PAUSE", 0.01)  # its length is not checked here


def _spec(tmp_path):
    store = results.CampaignStore(tmp_path, "c")
    (store.dir / "logs").mkdir(parents=True)
    spec = {"run_id": "r000000000001", "outputs": {"progress": str(tmp_path / "journal.json"),
                                                   "run": str(tmp_path / "run.json")}}
    return store, spec


def _fake_launches(monkeypatch, outcomes, spec):
    calls = []

    def launch(store, spec_, timeout, stdout, stderr):
        rc, said, progressed, complete = outcomes[len(calls)]
        calls.append(rc)
        if progressed:  # the bench measured a cell: the journal changes
            with open(spec["outputs"]["progress"], "a") as fh:
                fh.write(json.dumps({"cell": len(calls)}) + "\n")
        if complete:
            with open(spec["outputs"]["run"], "w") as fh:
                json.dump({"status": "complete"}, fh)
        return rc, said

    monkeypatch.setattr(runner, "_launch", launch)
    unfinished = []
    monkeypatch.setattr(results, "mark_unfinished", lambda s, status, why: unfinished.append(why))
    return calls, unfinished


def test_a_garbled_pmi_exchange_after_measuring_began_is_launched_again(tmp_path, monkeypatch):
    store, spec = _spec(tmp_path)
    calls, unfinished = _fake_launches(monkeypatch, [(134, GARBLED, True, False),
                                                     (0, "", True, True)], spec)
    assert runner._execute(store, spec, None, None, None) == "complete"
    assert calls == [134, 0] and not unfinished
    log = store.log(spec["run_id"]).read_text()
    assert "the launcher failed after measuring began" in log and f"launching again (2 of {runner.START_RETRIES + 1})" in log
    assert json.loads((tmp_path / "run.json").read_text())["provenance"]["start_attempts"] == 2


def test_another_death_after_measuring_began_is_a_failure(tmp_path, monkeypatch):
    store, spec = _spec(tmp_path)
    calls, unfinished = _fake_launches(monkeypatch, [(139, "Segmentation fault", True, False)],
                                       spec)
    assert runner._execute(store, spec, None, None, None) == "failed"
    assert calls == [139] and "status 139" in unfinished[0]


def test_the_launcher_fault_is_retried_at_most_start_retries_times(tmp_path, monkeypatch):
    store, spec = _spec(tmp_path)
    n = runner.START_RETRIES + 1
    calls, unfinished = _fake_launches(monkeypatch, [(134, GARBLED, True, False)] * n, spec)
    assert runner._execute(store, spec, None, None, None) == "failed"
    assert len(calls) == n and len(unfinished) == 1


def _script(store, spec, body: str):
    path = store.job_script(spec["run_id"])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(body)


FAULT_LINE = "slurmstepd-n2: error: mpi/pmi2: request not begin with 'cmd='"


def test_a_launch_hung_after_a_launcher_fault_is_stopped_and_launched_again(tmp_path,
                                                                             monkeypatch):
    """The first launch says a pmi2 fault and then waits for ever, its journal standing still:
    it is stopped LAUNCHER_STUCK seconds later and launched again, which completes."""
    store, spec = _spec(tmp_path)
    monkeypatch.setattr(runner, "LAUNCHER_STUCK", 1.0)
    mark, run = tmp_path / "launched-once", tmp_path / "run.json"
    _script(store, spec, f"""
if [ -e {mark} ]; then echo '{{"status": "complete"}}' > {run}; exit 0; fi
touch {mark}
echo "{FAULT_LINE}" >&2
exec sleep 600
""")
    assert runner._execute(store, spec, 120, None, None) == "complete"
    log = store.log(spec["run_id"]).read_text()
    assert "the launch hung after a launcher fault" in log and f"launching again (2 of {runner.START_RETRIES + 1})" in log
    assert json.loads(run.read_text())["provenance"]["start_attempts"] == 2


def test_a_launch_that_goes_on_after_a_launcher_fault_is_left_alone(tmp_path, monkeypatch):
    """A fault line, then the journal changes (the bench measures, a cell every 0.1 s, for
    six times LAUNCHER_STUCK): the launch is not stopped although it outlives LAUNCHER_STUCK.
    A journal written once, 0.2 s after the fault, raced the runner's first look on a busy
    machine; one that keeps changing is seen changing whenever the runner looks."""
    store, spec = _spec(tmp_path)
    monkeypatch.setattr(runner, "LAUNCHER_STUCK", 0.5)
    journal, run = spec["outputs"]["progress"], tmp_path / "run.json"
    _script(store, spec, f"""
echo "{FAULT_LINE}" >&2
for cell in $(seq 30); do sleep 0.1; echo "{{\\"cells\\": $cell}}" > {journal}; done
echo '{{"status": "complete"}}' > {run}
""")
    assert runner._execute(store, spec, 120, None, None) == "complete"
    assert "launching again" not in store.log(spec["run_id"]).read_text()
    assert json.loads(run.read_text())["provenance"]["start_attempts"] == 1
