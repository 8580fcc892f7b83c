"""The typed summary (harness/results/summary.py) and the plan's side of the vocabulary: a
cell's kind, the comparable native cell, and the tuned-selection stage that reads it."""

import math

import pandas as pd
import pytest

from harness.analysis.vocabulary import (comparable_mask, is_comparable, is_oversubscribed,
                                         is_timed, oversubscribed_mask, timed_mask)
from harness.campaign.workflow import Campaign
from harness.cells import Cell, kind_of
from harness.results import summary


@pytest.mark.parametrize("algorithm, params, kind", [
    ("native:auto", {}, "native"), ("native:ring", {}, "native"),
    ("native:tuned", {"tuning": "x"}, "selector"), ("native:autotuner", {}, "selector"),
    ("ring", {}, "harness"), ("suara2", {}, "harness"), ("pingpong", {}, "probe"),
    ("reduce_local", {}, "probe"), ("native:auto", {"workload": "resnet50"}, "workload"),
])
def test_kind_of_a_cell_and_of_a_row(algorithm, params, kind):
    assert kind_of(algorithm, params) == kind
    cell = Cell(library="mpich", algorithm=algorithm, procs=2, size=8,
                params=tuple(sorted(params.items())))
    assert cell.kind == kind
    row = pd.DataFrame([{"algorithm": algorithm, "params": pd.io.json.ujson_dumps(params),
                         "status": "ok", "mean": 1.0}])
    assert summary.load(row)["kind"].tolist() == [kind]


def _raw(rows):
    return pd.DataFrame(rows)


def test_load_fills_conditions_types_flags_and_versions():
    raw = _raw([
        {"library": "mpich", "library_version": "MPICH 5", "algorithm": "native:auto", "procs": 2,
         "size": 8, "status": "ok", "mean": 1e-6, "oversubscribed": "True", "delay": "none",
         "nodes": 1, "buffers": "rotate", "finished": "b"},
        {"library": "mpich", "library_version": None, "algorithm": "native:ring", "procs": "2",
         "size": 8, "status": "failed", "mean": None, "oversubscribed": None, "delay": None,
         "nodes": None, "buffers": None},
    ])
    d = summary.load(raw)
    assert d["oversubscribed"].tolist() == [True, False]
    assert d["oversubscribed"].dtype == bool and d["converged"].dtype == bool
    assert str(d["status"].dtype) == "category"
    assert set(d["status"].cat.categories) >= {"ok", "failed", "not-applicable"}
    # a cell that never ran takes the conditions the measured ones share
    assert d.loc[1, "buffers"] == "rotate" and d.loc[1, "delay"] == "none"
    assert d.loc[1, "nodes"] == 1 and d.loc[1, "procs"] == 2
    # and its library's only version
    assert d.loc[1, "library_version"] == "MPICH 5"
    # conditions the file lacks entirely take the cell's defaults
    assert d.loc[0, "timing"] == "percall" and d.loc[0, "thread_level"] == "single"
    assert d["params"].tolist() == ["{}", "{}"] and d.loc[0, "finished"] == "b"
    assert summary.typed(d) is d  # a typed summary is not loaded again


def test_vocabulary_over_a_typed_summary():
    d = summary.load(_raw([
        {"algorithm": "native:auto", "status": "ok", "mean": 2.0, "delay": "none"},
        {"algorithm": "native:ring", "status": "not-converged", "mean": 1.0, "delay": "none"},
        {"algorithm": "native:ring", "status": "wrong", "mean": 1.0, "delay": "none"},
        {"algorithm": "native:tuned", "status": "ok", "mean": 1.0, "delay": "none",
         "params": '{"tuning": "t"}'},
        {"algorithm": "native:nb", "status": "ok", "mean": 1.0, "delay": "one-late"},
        {"algorithm": "ring", "status": "ok", "mean": float("inf"), "delay": "none",
         "oversubscribed": True},
    ]))
    assert timed_mask(d).tolist() == [True, True, False, True, True, False]
    assert comparable_mask(d).tolist() == [True, True, True, False, False, False]
    assert oversubscribed_mask(d).tolist() == [False] * 5 + [True]
    assert [is_timed(r) for _, r in d.iterrows()] == timed_mask(d).tolist()
    assert is_oversubscribed({"oversubscribed": "True"}) and not is_oversubscribed(None)
    assert not is_timed({"status": "ok", "mean": math.nan})


def _campaign(monkeypatch, tmp_path, algorithms):
    monkeypatch.setenv("HARNESS_RESULTS", str(tmp_path / "results"))
    # the tuning native:tuned follows (what `harness tune` writes for the library)
    tuning = tmp_path / "results" / "earlier" / "tuning"
    tuning.mkdir(parents=True, exist_ok=True)
    (tuning / "mpich.json").write_text('{"env": {"MPIR_CVAR_X": "1"}, "digest": "d"}')
    doc = {"campaign": "tuned-only", "tune": {"enabled": True},
           "experiments": {"e": {"libraries": ["mpich"], "algorithms": algorithms,
                                 "procs": [2], "sizes": ["8B"],
                                 "params": {"tuning": "earlier"}}}}
    return Campaign(doc, source="test")


def test_a_selector_beside_auto_does_not_make_a_library_tunable(monkeypatch, tmp_path):
    tuned = _campaign(monkeypatch, tmp_path, ["native:auto", "native:tuned"])
    tuned_cells = [c for r in tuned.runs.values() for c in r.cells]
    assert {c.kind for c in tuned_cells} == {"native", "selector"}
    assert [is_comparable(c) for c in tuned_cells if c.algorithm == "native:tuned"] == [False]
    assert tuned.tune_libraries() == []
    forced = _campaign(monkeypatch, tmp_path, ["native:auto", "native:ring"])
    assert forced.tune_libraries() == ["mpich"]
