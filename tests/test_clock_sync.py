"""The launch's common clock across hosts (``harness/measure/clocksync.py``): with a known
offset and drift injected into some ranks' host clocks (``HARNESS_CLOCK_SKEW``, the test hook),
every rank's estimate of rank 0's clock, and so the window's start, lands within the stated
error, and the launch records the residual it measured at its end."""

import json
import os

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import subprocess
import time

from conftest import HARNESS, REPO

from harness.measure.clocksync import fit, injected_skew, shown_error

# What the launch's clock may leave of a skew it corrects: 5 %. The error itself is this
# machine's to say (the ranks of an oversubscribed launch wait for the core as well as for the
# message, milliseconds on a busy machine, microseconds on hosts of their own); the launch
# records it, and what it records is checked against the skew it was given.
LEFT = 0.05
SKEWS = {1: (0.30, 2e-5), 2: (-0.45, -3e-5), 3: (1.25, 1e-5)}


def test_the_hook_names_what_it_cannot_read():
    assert injected_skew(1, "1:0.3:2e-5,2:-0.45") == (0.3, 2e-5)
    assert injected_skew(2, "1:0.3:2e-5,2:-0.45") == (-0.45, 0.0)
    assert injected_skew(0, "1:0.3") == (0.0, 0.0)
    with pytest.raises(ValueError, match=r"HARNESS_CLOCK_SKEW: 'x:1' is not rank:offset\[:drift\]"):
        injected_skew(1, "x:1")


def test_the_line_through_the_batches_recovers_offset_and_drift():
    t = np.linspace(1.7e9, 1.7e9 + 6, 7)
    noise = np.array([3, -2, 1, 0, -1, 2, -3]) * 1e-6
    slope, intercept = fit(list(zip(t, -0.25 - 4e-5 * (t - t[0]) + noise)))
    assert slope == pytest.approx(-4e-5, abs=2e-6)
    assert slope * t[-1] + intercept == pytest.approx(-0.25 - 4e-5 * 6, abs=1e-5)
    # batches milliseconds apart: their noise would pass for a drift; the median offset only
    close = t[0] + np.linspace(0, 0.05, 5)
    assert fit(list(zip(close, [-0.25 + 1e-4, -0.25, -0.25 - 1e-4, -0.25, -0.25]))) == (0.0, -0.25)


def test_a_loaded_hosts_noise_is_not_taken_for_a_drift():
    """Batches two seconds apart read over round trips of milliseconds (a loaded host): the
    ups and downs they show are within their own uncertainty, so no drift is fitted; the same
    batches read over microseconds show a real drift of 40 us/s."""
    t = np.linspace(1.7e9, 1.7e9 + 2, 6)
    bumps = np.array([1.5, -2, 2, -1, -1.5, 1]) * 1e-3
    loaded = [(ti, -0.2 + b, 8e-3) for ti, b in zip(t, bumps)]
    assert fit(loaded)[0] == 0.0
    quiet = [(ti, -0.2 + 4e-5 * (ti - t[0]) + b / 1000, 8e-6) for ti, b in zip(t, bumps)]
    assert fit(quiet)[0] == pytest.approx(4e-5, abs=3e-6)


def test_the_error_shown_is_the_gap_beyond_its_reading():
    assert shown_error({"residuals": [0.0, 3e-3, -6e-3], "half_round_trips": [0, 1e-3, 4e-3]}) \
        == pytest.approx(2e-3)
    assert shown_error({"residuals": [0.0, 1e-3], "half_round_trips": [0, 2e-3]}) == 0.0
    assert shown_error({"method": "host clock (one host)"}) == 0.0


def test_skewed_ranks_share_rank_0s_clock_within_the_stated_error(tmp_path):
    """P = 4 (two rounds of the tree), ranks 1-3 offset by 0.3 to 1.25 s and drifting 10 to
    30 us/s: a one-late cell with window synchronisation; the run document's clock record
    says HCA, each rank's estimated offset is the injected one within LEFT of it, and the
    residual measured at the launch's end is the error that leaves."""
    env = {**os.environ, "HARNESS_RESULTS": str(tmp_path / "results"),
           "HARNESS_CLOCK_SKEW": ",".join(f"{r}:{o}:{d}" for r, (o, d) in SKEWS.items()),
           "MPIR_CVAR_CH4_PROGRESS_THROTTLE": "1",
           "MPIR_CVAR_CH4_PROGRESS_THROTTLE_NO_PROGRESS_COUNT": "100"}
    began = time.monotonic()
    out = subprocess.run(HARNESS + ["run", "--library", "mpich", "--algorithm", "native:auto",
                             "--procs", "4", "--size", "4KiB", "--delay", "one-late",
                             "--max-delay", "20ms", "--sync", "window", "--min-reps", "5",
                             "--max-reps", "5", "--warmup", "1"],
                  capture_output=True, text=True, env=env, cwd=REPO, timeout=300)
    wall = time.monotonic() - began  # how long any rank's clock can have drifted
    assert out.returncode == 0, out.stdout + out.stderr[-3000:]
    store = tmp_path / "results" / "adhoc"
    (doc_path,) = (store / "runs").glob("*.json")
    clock = json.loads(doc_path.read_text())["clock"]
    assert clock["method"] == "hca" and clock["injected"] and clock["rounds"] == 2
    assert len(clock["half_round_trips"]) == 4 and clock["half_round_trips"][0] == 0.0
    for rank, (offset, drift) in SKEWS.items():
        # the correction each rank applies now: minus its injected offset and drift so far
        left = clock["offsets_now"][rank] + offset  # the error the known skew leaves
        assert abs(left) <= LEFT * abs(offset) + abs(drift) * wall, (rank, clock)
        # the residual the launch recorded is that error, within the half round trip it was
        # read over (and what the drifts, true and fitted, add over the launch; 1 us for Unix
        # times in doubles)
        fitted = clock["drifts"][rank]
        slack = abs(drift) * wall + abs(fitted) * (abs(offset) + abs(drift) * wall + wall)
        assert abs(clock["residuals"][rank] + left) <= \
            clock["half_round_trips"][rank] + slack + 1e-6, (rank, clock)
        # a drift misjudged moves the clock, over the whole launch, by less than that too
        assert abs(fitted + drift) * wall <= LEFT * abs(offset), (rank, clock)
    # the arrivals of the ranks that were not late, on the common clock: one window. Their
    # spread holds the scheduling of 4 ranks on 2 busy cores too (3.7 ms in one CI run), so
    # it is held against the skews it would show uncorrected (0.3 s and more), with a margin
    raw = pq.read_table(store / "raw" / f"{doc_path.stem}.parquet").to_pandas()
    spread = [np.ptp(np.delete(np.asarray(a), 1)) for a in raw.arrival]
    smallest_skew = min(abs(o) for o, _ in SKEWS.values())
    assert np.median(spread) < 0.05 * smallest_skew, spread
    row = pd.read_csv(store / "summary.csv").iloc[0]
    assert row.status in ("ok", "not-converged")


def test_one_host_keeps_the_host_clock(tmp_path):
    env = {**os.environ, "HARNESS_RESULTS": str(tmp_path / "results")}
    env.pop("HARNESS_CLOCK_SKEW", None)
    out = subprocess.run(HARNESS + ["run", "--library", "mpich", "--algorithm", "native:auto",
                             "--procs", "2", "--size", "64B", "--min-reps", "3", "--max-reps",
                             "3", "--warmup", "0"],
                  capture_output=True, text=True, env=env, cwd=REPO, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    (doc_path,) = (tmp_path / "results" / "adhoc" / "runs").glob("*.json")
    assert json.loads(doc_path.read_text())["clock"] == {"method": "host clock (one host)"}
