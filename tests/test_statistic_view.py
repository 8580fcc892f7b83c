"""``report.statistic`` (``harness/results/view.py``): the tables, BEST and the AUTO-vs-BEST
verdicts read the median and its order-statistics interval where the config says so; under the
mean, cells whose t-interval rests on assumptions their repetitions reject are flagged."""

import math
import shutil
import subprocess

import pandas as pd
import pytest
import yaml
from conftest import REPO
from test_report import row
from test_workflow import SNAKEMAKE, env_for

from harness.analysis.auto_vs_best import auto_vs_best
from harness.report import tables
from harness.results.store import SUMMARY_COLUMNS
from harness.results.view import statistic_view, t_flags


def skewed():
    """At 1 MiB the mean says ring beats AUTO, the median says AUTO is BEST: ring's mean is
    pulled down by a fast mode its median does not have (and AUTO's up by a slow tail)."""
    rows = [row("mpich", "native:auto", 2**20, 10e-3, median=6e-3, median_ci_low=5.9e-3,
                median_ci_high=6.1e-3, t_rejected="normality", procs=2),
            row("mpich", "native:ring", 2**20, 8e-3, median=9e-3, median_ci_low=8.8e-3,
                median_ci_high=9.2e-3, t_rejected="none", procs=2)]
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)


def test_the_median_view_puts_the_median_in_the_time_columns():
    d = statistic_view(skewed(), "median")
    auto = d[d.algorithm == "native:auto"].iloc[0]
    assert (auto["mean"], auto["ci_low"], auto["ci_high"]) == (6e-3, 5.9e-3, 6.1e-3)
    assert auto["sample_mean"] == 10e-3 and auto["statistic"] == "median"
    assert math.isclose(auto["rel_halfwidth"], 0.1e-3 / 6e-3)
    same = statistic_view(skewed(), "mean")
    assert same["mean"].tolist() == [10e-3, 8e-3] and set(same["statistic"]) == {"mean"}


def test_an_unknown_statistic_is_named():
    with pytest.raises(ValueError, match="statistic must be one of mean, median, got 'mode'"):
        statistic_view(skewed(), "mode")


def test_best_and_verdict_follow_the_statistic():
    by_mean = auto_vs_best(statistic_view(skewed(), "mean")).iloc[0]
    by_median = auto_vs_best(statistic_view(skewed(), "median")).iloc[0]
    assert (by_mean.best_algorithm, by_mean.verdict) == ("native:ring", "BEST faster")
    assert (by_median.best_algorithm, by_median.verdict) == ("native:auto", "AUTO is BEST")
    # the mean's verdict compared an interval whose data reject normality: flagged
    assert by_mean.t_assumptions == "AUTO: normality" and by_median.t_assumptions == ""


def test_tables_flag_rejected_t_intervals_and_name_the_statistic():
    md_mean = tables.to_markdown(auto_vs_best(statistic_view(skewed(), "mean")))
    md_median = tables.to_markdown(auto_vs_best(statistic_view(skewed(), "median")))
    assert "§" in md_mean and "a compared t-interval assumes what its repetitions" in md_mean
    assert "Times are means with their 95% CI" in md_mean
    assert "§" not in md_median and "Times are medians with their order-statistics" in md_median


def test_flags_need_a_rejection_and_the_mean():
    assert t_flags({"t_rejected": "normality, independence"}) == "normality, independence"
    assert t_flags({"t_rejected": "none"}) == t_flags({"t_rejected": float("nan")}) == ""
    assert t_flags({"t_rejected": "normality", "statistic": "median"}) == ""


def test_the_workflow_reports_on_the_median_when_configured(tmp_path):
    """report.statistic: median: the report rules read the summary's median view
    (``Inputs.load``; here AUTO-vs-BEST on a ready summary, nothing measured)."""
    res = tmp_path / "results" / "wf"
    res.mkdir(parents=True)
    skewed().assign(campaign="wf").to_csv(res / "summary.csv", index=False)
    cfg = tmp_path / "config.yaml"
    cfg.write_text(yaml.safe_dump({
        "campaign": "wf", "confirm": {"enabled": False}, "report": {"statistic": "median"},
        "experiments": {"e": {"libraries": ["mpich"], "procs": [2], "sizes": ["1MiB"],
                              "algorithms": ["native:auto", "native:ring"]}}}))
    out = subprocess.run(
        SNAKEMAKE + ["--snakefile", str(REPO / "Snakefile"), "--directory", str(tmp_path / "w"),
                     "--configfile", str(cfg), "--cores", "1",
                     "--allowed-rules", "report",
                     "--", str(res / "tables" / "auto_vs_best.csv")],
        env=env_for(tmp_path), capture_output=True, text=True, timeout=300, cwd=REPO)
    assert out.returncode == 0, out.stderr[-3000:]
    table = pd.read_csv(res / "tables" / "auto_vs_best.csv")
    assert table.loc[0, "best_algorithm"] == "native:auto"
    assert "Times are medians" in (res / "tables" / "auto_vs_best.md").read_text()
    shutil.rmtree(tmp_path / "w", ignore_errors=True)
