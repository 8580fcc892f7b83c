"""PRR's and SLT's plans (``harness/algorithms/pap.py``) without MPI: Fig. 7 lines 1-13
against by-hand evaluations, and a message-level simulation of the PRR loops (every send
matched by the receive the peer posts at that point, no deadlock, every segment reduced over
all ranks) for many arrival patterns."""

import itertools
import re

import numpy as np
import pytest

from harness.algorithms import REGISTRY
from harness.algorithms.pap import arrival_order, prestep_counts, prr_plan, prr_schedule, segment_ends


def test_fig8_example_one_process_two_tau_late():
    # Fig. 8b: P = 4, rank 0 arrives 2 tau after the others (tau = 1).
    # order: ranks 1, 2, 3 (tie, by rank), then rank 0; a = [0, 0, 0, 2].
    # line 1: k3 = 0
    # i=2: a3 - a3 = 0 >= (0+1)*1 ? no  -> k2 = 0
    # i=1: a3 - a2 = 2 >= (0+1)*1 ? yes -> k1 = 1
    # i=0: a3 - a1 = 2 >= (1+1)*1 ? yes -> k0 = 2
    # lines 7-13: i + k_i = 2, 2, 2, 3 -> segments 0,1,2 start at id 0, segment 3 at id 3
    plan = prr_plan([2.0, 0.0, 0.0, 0.0], 4, 1.0)
    assert plan["order"] == [1, 2, 3, 0]
    assert plan["k"] == [2, 1, 0, 0]
    assert plan["sp"] == [0, 0, 0, 3]
    assert plan["rp"] == [3, 3, 3, 2]
    assert plan["start"] == [2, 2, 2, 3]


def test_five_processes_spread_arrivals():
    # ranks arrive at 0, 10, 3, 1, 6 (tau = 2): order 0, 3, 2, 4, 1; a = [0, 1, 3, 6, 10]
    # i=3: 10-10 = 0 >= 2 ? no -> k3 = 0
    # i=2: 10-6  = 4 >= 2 ? yes -> k2 = 1
    # i=1: 10-3  = 7 >= 4 ? yes -> k1 = 2
    # i=0: 10-1  = 9 >= 6 ? yes -> k0 = 3
    # i + k_i = 3, 3, 3, 3, 4: segments 0..3 start at id 0, segment 4 at id 4
    plan = prr_plan([0, 10, 3, 1, 6], 5, 2.0)
    assert plan["order"] == [0, 3, 2, 4, 1]
    assert plan["k"] == [3, 2, 1, 0, 0]
    assert plan["sp"] == [0, 0, 0, 0, 4]
    assert plan["rp"] == [4, 4, 4, 4, 3]


def test_gap_that_is_not_a_prestep_and_ties():
    # ranks arrive at 5, 0, 9, 5, 0 (tau = 3): order 1, 4 (tie), 0, 3 (tie), 2; a = [0,0,5,5,9]
    # i=3: 9-9 = 0 >= 3 ? no  -> k3 = 0
    # i=2: 9-5 = 4 >= 3 ? yes -> k2 = 1
    # i=1: 9-5 = 4 >= 6 ? no  -> k1 = 1
    # i=0: 9-0 = 9 >= 6 ? yes -> k0 = 2
    # i + k_i = 2, 2, 3, 3, 4:
    # j=0,1,2: 0+2 >= j -> sp = 0
    # j=3: 0+2 < 3, 1+1 < 3, 2+1 >= 3 -> sp = 2
    # j=4: 2+1 < 4, 3+0 < 4, 4+0 >= 4 -> sp = 4;  rp = sp - 1 mod 5
    plan = prr_plan([5, 0, 9, 5, 0], 5, 3.0)
    assert plan["order"] == [1, 4, 0, 3, 2]
    assert plan["k"] == [2, 1, 1, 0, 0]
    assert plan["sp"] == [0, 0, 0, 2, 4]
    assert plan["rp"] == [4, 4, 4, 1, 3]
    assert plan["start"] == [2, 2, 3, 3, 4]


def test_balanced_arrivals_give_the_ring():
    for p in range(1, 10):
        plan = prr_plan([0.0] * p, p, 1e-3)
        assert plan["k"] == [0] * p
        assert plan["sp"] == list(range(p))
        assert plan["rp"] == [(j - 1) % p for j in range(p)]
    assert prr_plan(None, 3, 1.0)["order"] == [0, 1, 2]


def test_prestep_counts_threshold_is_inclusive():
    # a3 - a1 = 2 tau exactly: line 3's ">=" makes it a second pre-step
    assert prestep_counts([0.0, 0.0, 0.0, 2.0], 1.0) == [2, 1, 0, 0]
    assert prestep_counts([0.0, 0.0, 0.0, 1.999], 1.0) == [1, 1, 0, 0]


def test_segment_ends_of_explicit_counts():
    assert segment_ends([0, 0, 0]) == ([0, 1, 2], [2, 0, 1])
    assert segment_ends([1, 0, 0]) == ([0, 0, 2], [2, 2, 1])


def test_bad_arrival_and_tau_are_named():
    with pytest.raises(ValueError, match=r"arrival: expected 3 arrival times"):
        arrival_order([0.0, 1.0], 3)
    with pytest.raises(ValueError, match=r"arrival: expected finite times"):
        arrival_order([0.0, float("nan")], 2)
    with pytest.raises(ValueError, match=r"tau: expected a time > 0, got 0"):
        prr_plan([0.0, 1.0], 2, 0)


# ---------------------------------------------------------------------------------------------
# message-level simulation of the PRR loops

def simulate_prr(plan):
    """Run the per-id schedules with FIFO channels id -> id+1 per loop (tag), nonblocking
    sends and blocking receives. Returns each id's segments as sets of contributing ids."""
    p = len(plan["k"])
    sched = prr_schedule(plan)
    data = [[{me} for _ in range(p)] for me in range(p)]
    chan = {(me, tag): [] for me in range(p) for tag in ("R", "O")}  # messages into `me`
    steps = [[("R",) + s for s in red] + [("O",) + s for s in ovr] for red, ovr in sched]
    pos = [0] * p
    phase_recv = [False] * p  # receive of the current step done?
    while any(pos[me] < len(steps[me]) for me in range(p)):
        moved = False
        for me in range(p):
            while pos[me] < len(steps[me]):
                tag, seg, recv, send = steps[me][pos[me]]
                if recv and not phase_recv[me]:
                    queue = chan[(me, tag)]
                    if not queue:
                        break
                    got_seg, payload = queue.pop(0)
                    assert got_seg == seg, f"id {me} {tag}: expected segment {seg}, got {got_seg}"
                    if tag == "R":
                        data[me][seg] = data[me][seg] | payload
                    else:
                        data[me][seg] = set(payload)
                    phase_recv[me] = True
                if send:
                    chan[((me + 1) % p, tag)].append((seg, frozenset(data[me][seg])))
                pos[me] += 1
                phase_recv[me] = False
                moved = True
        assert moved, f"deadlock at steps {pos}"
    assert all(not q for q in chan.values()), "messages left unreceived"
    return data


def _patterns(p, rng):
    yield [0.0] * p
    for late in range(p):
        yield [10.0 if r == late else 0.0 for r in range(p)]
    yield list(np.arange(p, dtype=float))
    yield list(np.arange(p, dtype=float)[::-1])
    for _ in range(20):
        yield list(rng.uniform(0, 10, p))
    for _ in range(5):
        yield list(rng.integers(0, 3, p).astype(float))  # many ties


@pytest.mark.parametrize("procs", range(1, 13))
def test_prr_loops_match_and_reduce_everything(procs):
    rng = np.random.default_rng(procs)
    everyone = set(range(procs))
    for arrival, tau in itertools.product(_patterns(procs, rng), (0.3, 1.0, 4.0, 100.0)):
        plan = prr_plan(arrival, procs, tau)
        sends = sum(s for red, ovr in prr_schedule(plan) for _, _, s in red + ovr)
        assert sends == procs * (2 * procs - 2)  # as many messages as the ring (Sect. 4.2)
        for me, segs in enumerate(simulate_prr(plan)):
            assert all(s == everyone for s in segs), (arrival, tau, me, segs)


def test_pap_family_is_registered():
    pap = {n for n, a in REGISTRY.items() if a.family == "pap"}
    assert pap == {"prr", "slt"}
    for name in pap:
        fn = REGISTRY[name].fn
        assert fn.uses_arrival and REGISTRY[name].description
    assert callable(REGISTRY["prr"].fn.prepare) and not hasattr(REGISTRY["slt"].fn, "prepare")


@pytest.mark.parametrize("value, where", [("psychic", "params.knowledge"),
                                          (["oracle", "x"], "params.knowledge[1]")])
def test_config_rejects_an_unknown_knowledge(value, where):
    import yaml

    from harness.campaign import config
    from harness.paths import REPO_ROOT

    doc = yaml.safe_load((REPO_ROOT / "config" / "experiments.yaml").read_text())
    doc["experiments"]["pap"]["params"]["knowledge"] = value
    bad = value if isinstance(value, str) else value[1]
    with pytest.raises(config.ConfigError, match=re.escape(
            f"experiments.pap.{where}: {bad!r} is not one of none, oracle, online")) as info:
        config.validate(doc)
    assert f"experiments.pap.{where}: {bad!r} is not one of none, oracle, online" in str(info.value)
    doc["experiments"]["pap"]["params"]["knowledge"] = ["oracle", "online"]
    doc["experiments"]["pap"]["algorithms"] = ["slt", "prr"]
    assert config.validate(doc)
