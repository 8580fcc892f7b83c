"""From a run to its job script, and executing it: shared by ``harness run`` and the workflow.

``prepare`` renders the job script and the run spec; ``write`` stores both under
``results/<campaign>/jobs/``; ``execute`` runs the script with a wall-time limit and records
cells the run did not finish as ``failed`` or ``timeout``.
"""

from __future__ import annotations

import collections
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from .. import __version__, fileio, paths, templates
from ..cells import Run
from ..libraries import Library
from ..results import store as results
from ..simulate.platform import Platform
from ..turns import launch_turn

TEMPLATE = "run.sh.j2"


def git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(paths.REPO_ROOT), "rev-parse", "HEAD"],
                             capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "-C", str(paths.REPO_ROOT), "status", "--porcelain",
                                "--untracked-files=no"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    return out.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


def prepare(run: Run, lib: Library, store: results.CampaignStore, settings: dict, *,
            seed: int = 0, plugins=(), config_hash: str | None = None,
            python: str | None = None, launches: int = 1,
            experiments: dict | None = None, platform: dict | None = None) -> tuple[str, dict]:
    """The job script text and the run spec of ``run``; ``experiments``: cell id -> the names
    of the config's experiments that ask for it, recorded per cell of the run (the report
    page counts the cells of each experiment from the specs). ``platform``: a simulated run's
    platform (``platforms.SimulatedPlatform.to_dict``): its script runs the simulation
    (``harness.simulate.bench``) in one process, no MPI launch."""
    run_id = run.run_id
    spec = {
        "run_id": run_id,
        "campaign": store.campaign,
        "library": lib.name,
        "family": lib.family,
        "procs": run.procs,
        "nodes": run.nodes,
        "thread_level": run.thread_level,
        "launch": run.launch,
        "launches": launches,  # how many launches of these cells the batch has
        "env": dict(run.env),
        "settings": settings,
        "seed": seed,
        "plugins": [str(Path(p).resolve()) for p in plugins],
        "cells": [c.to_dict() for c in run.cells],
        "outputs": {"run": str(store.run_doc(run_id)), "progress": str(store.progress(run_id)),
                    "raw": str(store.raw(run_id))},
        "jobscript": str(store.job_script(run_id)),
        "git_commit": git_commit(),
        "config_hash": config_hash,
    }
    if experiments is not None:
        spec["experiments"] = {c.cell_id: list(experiments.get(c.cell_id, ())) for c in run.cells}
    if platform is not None:
        spec["platform"] = platform
        script = templates.render(
            TEMPLATE, title=(f"Job script of run {run_id} in campaign {store.campaign}: "
                             f"{lib.name} simulated on platform {platform['name']} "
                             f"({platform['id']}), P={run.procs}, {len(run.cells)} cell(s)."),
            rerun="rerun with `harness run`", harness_version=__version__, setup=[], env={},
            prepend={}, workdir=str(paths.REPO_ROOT), launch=[], python=python or sys.executable,
            module="harness.simulate.bench", spec=str(store.job_spec(run_id)))
        return script, spec
    env = {**lib.run_env(), **dict(run.env)}
    script = job_script(
        lib, run.procs, run.nodes, env, "harness.measure.bench", store.job_spec(run_id), python=python,
        title=(f"Job script of run {run_id} in campaign {store.campaign}: library {lib.name}, "
               f"P={run.procs}, {len(run.cells)} cell(s)."),
        rerun="rerun with `harness run`")
    return script, spec


def job_script(lib: Library, procs: int, nodes: int, env: dict, module: str, spec: Path, *,
               title: str, rerun: str, python: str | None = None) -> str:
    """The job script (slurm_templates/run.sh.j2) that launches ``python -m <module> <spec>``
    on ``procs`` ranks of ``lib`` with ``env`` exported: a run's (``harness.measure.bench``) and an SGD
    execution's (``harness.measure.sgd``)."""
    return templates.render(
        TEMPLATE, title=title, rerun=rerun, harness_version=__version__,
        setup=list(lib.setup), env=env, prepend=lib.prepend(), workdir=str(paths.REPO_ROOT),
        launch=lib.launch_argv(procs, nodes), python=python or sys.executable, module=module,
        spec=str(spec))


def write(store: results.CampaignStore, script: str, spec: dict) -> Path:
    """Write the run's spec and job script (and a simulated run's platform file, under
    ``results/<c>/platforms/``, named by its digest)."""
    if spec.get("platform"):
        Platform(**spec["platform"]["platform"]).write(store.dir / "platforms")
    path = store.job_script(spec["run_id"])
    fileio.write_json(store.job_spec(spec["run_id"]), spec)
    fileio.atomic_write_text(path, script)
    path.chmod(0o755)
    return path


def _interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def _exclusive(store: results.CampaignStore, run_id: str):
    """An exclusive lock on the run (``progress/<run>.lock``), held until the returned file
    is closed: two attempts of one run (two workflows on one store, or an attempt left
    running by a workflow that was killed) take turns, and the second resumes from the
    first's journal instead of measuring the same cells beside it."""
    import fcntl

    path = store.progress(run_id).with_suffix(".lock")
    path.parent.mkdir(parents=True, exist_ok=True)
    fh = open(path, "a+")
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        print(f"run {run_id}: another attempt is running; waiting for it to end", flush=True)
        fcntl.flock(fh, fcntl.LOCK_EX)
    return fh


def execute(store: results.CampaignStore, spec: dict, timeout: float | None = None,
            stdout=None, stderr=None) -> str:
    """Run the job script; returns ``complete``, ``failed`` or ``timeout``. On a failure or a
    timeout, the cells without a result are recorded with that status. One attempt of a run
    at a time (``_exclusive``); with ``HARNESS_LAUNCH_LOCK`` set, one local launch at a time
    on the machine (``harness.turns``), taken before the wall-time clock starts."""
    with _exclusive(store, spec["run_id"]), launch_turn(f"run {spec['run_id']}"):
        return _execute(store, spec, timeout, stdout, stderr)


START_RETRIES = 4  # launches that died before the bench began, launched again this many times
# seconds before the k-th relaunch: RELAUNCH_PAUSE * 2**(k-1) (a garbled PMI exchange struck
# three launches of one run in a row, 0.7 s apart, on the CI's two slurmd on one host)
RELAUNCH_PAUSE = 1.0
# The launcher's own faults after the bench began: Slurm's pmi2 plugin receiving a garbled
# request (seen with two slurmd on one host under load) kills the launch in the middle of a
# communicator's creation. The journal keeps every finished cell, so a launch again resumes
# from it and measures only the rest.
LAUNCHER_FAULTS = ("mpi/pmi2: value not properly terminated", "mpi/pmi2: request not begin with")
BENCH_REFUSED = 3  # harness.measure.bench's exit status when the launch cannot run the spec
# A launch can also hang after such a fault (its ranks wait for ever on the PMI exchange the
# fault garbled): once a launcher fault is said and the launch's journal has not changed for
# LAUNCHER_STUCK seconds, it is stopped and launched again like one that died of the fault.
LAUNCHER_STUCK = 30.0
LAUNCHER_HUNG = 125  # the status recorded for a launch stopped that way


def _execute(store, spec, timeout, stdout, stderr) -> str:
    if threading.current_thread() is threading.main_thread():  # a Snakemake `run:` block is not
        signal.signal(signal.SIGTERM, _interrupt)
    deadline = None if timeout is None else time.monotonic() + timeout
    for attempt in range(START_RETRIES + 1):
        if attempt:
            time.sleep(RELAUNCH_PAUSE * 2 ** (attempt - 1))
        left = None if deadline is None else max(1.0, deadline - time.monotonic())
        journal = _stamp(Path(spec["outputs"]["progress"]))
        rc, said = _launch(store, spec, left, stdout, stderr)
        if rc is None:
            results.mark_unfinished(spec, "timeout",
                                    f"run exceeded its wall-time limit of {timeout:g} s")
            _record_start_attempts(spec, attempt + 1)
            return "timeout"
        # A launch that failed before the bench wrote its journal died in the launcher or in
        # MPI's start-up (a transient fault of the kind clusters have, e.g. a rank killed, a
        # PMI exchange garbled): it measured nothing, so it is launched again. The bench's
        # own refusals (thread level, rank count) exit BENCH_REFUSED and are not retried.
        if rc == LAUNCHER_HUNG and attempt < START_RETRIES:
            _say_relaunch(store, spec, f"the launch hung after a launcher fault (its journal "
                                       f"stood still {LAUNCHER_STUCK:g} s after it); stopped; the "
                                       f"finished cells are kept; launching again "
                                       f"({attempt + 2} of {START_RETRIES + 1})")
            continue
        if rc not in (0, BENCH_REFUSED) and attempt < START_RETRIES:
            if _stamp(Path(spec["outputs"]["progress"])) == journal:
                _say_relaunch(store, spec, f"the launch died before measuring (status {rc}); "
                                           f"launching again ({attempt + 2} of "
                                           f"{START_RETRIES + 1})")
                continue
            fault = next((f for f in LAUNCHER_FAULTS if f in said), None)
            if fault:
                _say_relaunch(store, spec, f"the launcher failed after measuring began ({fault!r},"
                                           f" status {rc}); the finished cells are kept; "
                                           f"launching again ({attempt + 2} of "
                                           f"{START_RETRIES + 1})")
                continue
        break
    if rc != 0:
        results.mark_unfinished(spec, "failed", f"job script exited with status {rc}"
                                + (f"; its error output ({store.log(spec['run_id'])}): {said}"
                                   if said else ""))
        _record_start_attempts(spec, attempt + 1)
        return "failed"
    final = Path(spec["outputs"]["run"])
    if not final.is_file() or fileio.read_json(final).get("status") != "complete":
        results.mark_unfinished(spec, "failed", "job script exited 0 but did not finish the run")
        _record_start_attempts(spec, attempt + 1)
        return "failed"
    _record_start_attempts(spec, attempt + 1)
    return "complete"


def _say_relaunch(store, spec, why: str) -> None:
    """Tell stderr and the run's log (``results/<campaign>/logs/<run>.log``) that the run is
    launched again."""
    line = f"harness: run {spec['run_id']}: {why}"
    print(line, file=sys.stderr, flush=True)
    try:
        with open(store.log(spec["run_id"]), "a", encoding="utf-8") as fh:
            fh.write(line + "\n")
    except OSError:
        pass


def _record_start_attempts(spec: dict, attempts: int) -> None:
    """The number of launches this attempt of the run took (1 unless a launch died before
    measuring and was launched again) in the run document's provenance: ``start_attempts``."""
    final = Path(spec["outputs"]["run"])
    try:
        doc = fileio.read_json(final)
    except (OSError, ValueError):
        return  # no readable run document: harness check reports that
    doc.setdefault("provenance", {})["start_attempts"] = attempts
    fileio.write_json(final, doc)


def _stamp(path: Path):
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_mtime_ns, st.st_ino


def _launch(store, spec, timeout, stdout, stderr) -> tuple[int | None, str]:
    """One launch of the job script: (exit status or None past ``timeout``, what its error
    output says)."""
    tail = None
    if stderr is None:  # pass the script's stderr through, and keep its last lines for the record
        stderr, tail = subprocess.PIPE, _Tail(sys.stderr, store.log(spec["run_id"]),
                                              Path(spec["outputs"]["progress"]))
    proc = subprocess.Popen(["bash", str(store.job_script(spec["run_id"]))], stdout=stdout,
                            stderr=stderr, start_new_session=True)
    if tail:
        tail.follow(proc.stderr)
    try:
        rc = _wait(proc, timeout, tail, Path(spec["outputs"]["progress"]))
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        rc = None
    except KeyboardInterrupt:
        # interrupted from outside (Ctrl-C, the workflow stopping): not a result of the run;
        # the journal stays, and the next attempt resumes from it
        _kill_group(proc)
        raise
    finally:
        if tail:
            tail.join()
    return rc, (tail.text() if tail else "")


def _wait(proc, timeout, tail, journal: Path) -> int:
    """The launch's exit status; TimeoutExpired past ``timeout``; ``LAUNCHER_HUNG`` (the launch
    stopped) when the launcher said a fault and the journal stood still ``LAUNCHER_STUCK``
    seconds after it."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        step = 1.0 if deadline is None else min(1.0, deadline - time.monotonic())
        try:
            return proc.wait(timeout=max(step, 0.01))
        except subprocess.TimeoutExpired:
            if deadline is not None and time.monotonic() >= deadline:
                raise
        said = tail.fault if tail else None
        if said is None:
            continue
        seen, stamp = said
        if _stamp(journal) != stamp:  # measuring went on after the fault
            tail.fault = None
        elif time.monotonic() - seen >= LAUNCHER_STUCK:
            _kill_group(proc)
            proc.wait()
            return LAUNCHER_HUNG


# What says why a launch failed, put first in its cells' error, before the launcher's
# boilerplate (Open MPI's "prterun detected that one or more processes exited ..."): the last
# exception line(s) of a Python traceback, and the loader's and mpi4py's words on a library
# that would not load.
DECISIVE = ("cannot load MPI library", "error while loading shared libraries",
            "cannot open shared object file") + LAUNCHER_FAULTS
_EXCEPTION = re.compile(r"(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt|Fault)"
                        r"(?::\s.*)?")
_TAG = re.compile(r"^\[[^\]]*\](?:<\w+>)?:?\s?")  # a launcher's tag, e.g. Open MPI's [1,0]<stderr>:


class _Decisive:
    """The decisive lines of a launch's error output, fed line by line (``add``): the
    exception line that ends a traceback (the first unindented line after its frames) or
    reads ``SomethingError: message``, and lines with a ``DECISIVE`` phrase; repeats (every
    rank says the same) kept once, the ``KEEP`` latest, in the order last said."""

    KEEP = 4

    def __init__(self):
        self.kept: dict[str, None] = {}
        self.traceback = False

    def add(self, line: str) -> None:
        body = _TAG.sub("", line.rstrip())
        if body.startswith("Traceback (most recent call last)"):
            self.traceback = True
        elif self.traceback and body and not body[0].isspace():
            self.traceback = False  # the first unindented line after the frames
            self._keep(body)
        elif not self.traceback and (_EXCEPTION.fullmatch(body.strip())
                                     or any(p in body for p in DECISIVE)):
            self._keep(body.strip())

    def _keep(self, line: str) -> None:
        self.kept.pop(line, None)
        self.kept[line] = None
        while len(self.kept) > self.KEEP:
            del self.kept[next(iter(self.kept))]

    def lines(self) -> list[str]:
        return list(self.kept)


def decisive(text: str) -> list[str]:
    """The decisive lines (``_Decisive``) of a launch's error output ``text``."""
    found = _Decisive()
    for line in text.splitlines():
        found.add(line)
    return found.lines()


class _Tail:
    """Copies a child's stderr to ``sink`` and to ``log`` line by line, and keeps what a failed
    run's record should say: the decisive lines (``_Decisive``), then the first lines that
    look like an error and the last lines (the launcher's last words)."""

    FIRST, LAST, CHARS = 3, 6, 900
    ERRORISH = ("error", "fatal", "abort", "traceback", "exception", "assert", "killed", "signal")

    def __init__(self, sink, log: Path, journal: Path | None = None):
        self.sink, self.log, self.thread, self.journal = sink, log, None, journal
        self.fault = None  # (when, journal stamp then) of the last launcher fault said
        self.first: list[str] = []
        self.last: collections.deque = collections.deque(maxlen=self.LAST)
        self.decisive = _Decisive()

    def follow(self, stream) -> None:
        self.thread = threading.Thread(target=self._copy, args=(stream,), daemon=True)
        self.thread.start()

    def _copy(self, stream) -> None:
        try:
            self.log.parent.mkdir(parents=True, exist_ok=True)
            log = open(self.log, "a", encoding="utf-8")
            log.write(f"== attempt started {results.now()} ==\n")
        except OSError:
            log = None
        with stream:
            for raw in iter(stream.readline, b""):
                line = raw.decode(errors="replace")
                for out in (self.sink, log):
                    try:
                        if out is not None:
                            out.write(line)
                            out.flush()
                    except (OSError, ValueError):
                        pass
                self.decisive.add(line)
                line = line.strip()
                if not line:
                    continue
                if self.journal is not None and any(f in line for f in LAUNCHER_FAULTS):
                    self.fault = (time.monotonic(), _stamp(self.journal))
                if len(self.first) < self.FIRST and any(w in line.lower() for w in self.ERRORISH):
                    self.first.append(line)
                self.last.append(line)
        if log is not None:
            log.close()

    def join(self) -> None:
        if self.thread:
            self.thread.join(timeout=10)

    def text(self) -> str:
        """The decisive lines, then the first error-like and the last lines, each once
        (separator lines such as ``-----`` left out), at most ``CHARS`` characters."""
        lines: list[str] = []
        for line in self.decisive.lines() + self.first + list(self.last):
            if line not in lines and any(c.isalnum() for c in line):
                lines.append(line)
        said = " | ".join(lines)
        return said if len(said) <= self.CHARS else said[:self.CHARS] + "..."


def fresh(spec: dict) -> None:
    """Forget earlier attempts of this run, so it is measured anew (``harness run``)."""
    Path(spec["outputs"]["progress"]).unlink(missing_ok=True)


def _kill_group(proc: subprocess.Popen) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=5)
            return
        except subprocess.TimeoutExpired:
            continue
