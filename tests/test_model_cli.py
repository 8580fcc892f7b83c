"""`harness model suara2` prints the model's choice."""

import pytest
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


def test_fit_bad_input_and_missing_campaign(results_root):
    out = harness("fit", "nosuch")
    assert out.returncode == 2 and "no summary at" in out.stderr
    out = harness("fit", "nosuch", "--gamma", "-1")
    assert out.returncode == 2 and "--gamma: expected a number > 0, got '-1'" in out.stderr


def test_fit_writes_parameters_the_model_reads(results_root, tmp_path):
    import json

    from test_report_suara import TRUE, synthetic

    camp = results_root / "syn"
    camp.mkdir(parents=True)
    synthetic(tmp_path).rename(camp / "summary.csv")
    out = harness("fit", "syn", "--gamma", str(TRUE.gamma))
    assert out.returncode == 0, out.stderr
    doc = json.loads((camp / "model_params.json").read_text())
    assert doc["ab"]["rs"]["alpha"] == pytest.approx(TRUE.ab["rs"][0], rel=1e-6)
    assert doc["provenance"]["fits"]["rab"]["n"] > 10
    out = harness("model", "suara2", "--procs", "16", "--size", "4MiB", "--params",
                  camp / "model_params.json")
    assert out.returncode == 0 and "grid P_r x P_c" in out.stdout
