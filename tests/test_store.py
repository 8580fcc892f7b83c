"""The results store's reading of run documents (harness/results/store.py)."""

import pytest

from harness import fileio
from harness.errors import StoreError
from harness.results import store as results


def test_a_run_document_gone_since_listed_is_read_from_its_complete_journal(tmp_path):
    """Two workflows on one campaign: Snakemake removes a job's outputs before running it, so
    the second one's rerun of a finished run removes ``runs/<run>.json`` for a moment while
    the first one builds its summary. The complete journal holds the same document and is read
    instead (and not written: the rerun writes it); without a complete journal the error names
    the file and the way out."""
    store = results.CampaignStore(tmp_path, "c")
    journal = {"run_id": "r1", "status": "complete", "cells": [{"cell_id": "c1", "status": "ok"}]}
    fileio.write_json(store.progress("r1"), journal)
    assert results.load_run_doc(store, "r1") == journal
    assert not store.run_doc("r1").exists()
    fileio.write_json(store.progress("r1"), {**journal, "status": "running"})
    with pytest.raises(StoreError, match=r"r1\.json: missing.*harness retry c"):
        results.load_run_doc(store, "r1")
    store.progress("r1").unlink()
    with pytest.raises(StoreError, match="missing"):
        results.load_run_doc(store, "r1")
