"""The aggregate stage builds the summary and checks it from one snapshot of the run
documents (``results.store.load_run_docs``): a second workflow on the same store may rewrite
a run's document between the two reads (tests/test_faults.py::test_two_workflows_on_one_campaign
showed it), and the check must not then find the summary it just wrote inconsistent."""

from __future__ import annotations

from conftest import execute_run

from harness import fileio
from harness.cells import Cell
from harness.results import check
from harness.results.store import load_run_docs, rebuild_summary


def test_summary_and_check_read_one_snapshot(tmp_path):
    cells = [Cell(library="mpich", algorithm="native:auto", procs=2, size=size)
             for size in (16, 64)]
    outcome, doc, store = execute_run(tmp_path / "results", "mpich", cells)
    assert outcome == "complete" and len(doc["cells"]) == 2
    runs = {doc["run_id"]}
    docs = load_run_docs(store, runs=runs)
    assert set(docs) == runs
    rebuild_summary(store, runs=runs, docs=docs)
    # another workflow rewrites the document with one cell so far (its own attempt)
    fileio.write_json(store.run_doc(doc["run_id"]), {**doc, "cells": doc["cells"][:1],
                                                     "status": "running"})
    found = check.check_store(store, runs=runs, docs=docs)
    assert found.ok, found.problems
    found = check.check_store(store, runs=runs)  # read again: the rewrite shows
    assert not found.ok
    assert any("has no result in the run documents" in p or "not in run document" in p
               for p in found.problems), found.problems
