"""Where the ranks ran (harness/measure/placement.py) and the launches that stand apart from
their replicas (``odd_launches``, harness/results/launches.py)."""

import json
import os

import pytest
from test_report import row

from harness.measure.placement import CellPlacement, current_cpu, ranges
from harness.results.launches import ODD, combine


def test_cpu_ranges_read_as_a_person_writes_them():
    assert ranges([0, 1, 2, 5]) == "0-2,5"
    assert ranges([3]) == "3"
    assert ranges([]) == ""
    assert ranges([7, 6, 0]) == "0,6-7"


def test_this_process_is_on_one_of_its_cpus():
    assert current_cpu() in os.sched_getaffinity(0)


class Gather:
    """A communicator of several ranks seen from rank 0: ``others`` are what they send."""

    def __init__(self, others, root=True):
        self.others, self.root = others, root

    def gather(self, mine, root=0):
        return [mine, *self.others(mine)] if self.root else None


def test_two_ranks_on_one_cpu_are_shared_and_switches_are_counted():
    placed = CellPlacement()
    sum(range(200_000))
    same = Gather(lambda mine: [("h", mine[1], mine[2], "0-1", 7, 2)])
    record = placed.finish(same, "h")
    assert record["shared_cpu"] is True
    assert record["involuntary_switches"][1] == 7 and record["voluntary_switches"][1] == 2
    assert record["involuntary_switches"][0] >= 0 and record["affinity"][1] == "0-1"
    # the same CPU number on another host is another CPU
    other_host = Gather(lambda mine: [("g", mine[1], mine[2], "0-1", 0, 0)])
    assert CellPlacement().finish(other_host, "h")["shared_cpu"] is False
    apart = Gather(lambda mine: [("h", 10_000, 10_001, "0-1", 0, 0)])
    assert CellPlacement().finish(apart, "h")["shared_cpu"] is False
    assert CellPlacement().finish(Gather(lambda mine: [], root=False), "h") is None


def launch(i, mean, shared=False, switches=3):
    return row("mpich", "native:auto", 2**20, mean, procs=2, launch=i, shared_cpu=shared,
               involuntary_switches=switches, median=mean, min=mean, max=mean,
               rel_halfwidth=0.01)


def test_a_launch_in_a_mode_of_its_own_is_named_with_where_its_ranks_ran():
    out = combine([launch(0, 836e-6, shared=True, switches=900), launch(1, 279e-6),
                   launch(2, 285e-6)])
    odd = json.loads(out["odd_launches"])
    assert odd == [{"launch": 0, "mean": pytest.approx(836e-6), "shared_cpu": True,
                    "involuntary_switches": 900}]
    assert out["launches_disagree"] and out["shared_cpu"] is True
    assert out["involuntary_switches"] == 900
    # replicas within ODD of their median: none odd
    near = combine([launch(i, m) for i, m in enumerate((279e-6, 290e-6, 279e-6 * (1 + ODD / 2)))])
    assert json.loads(near["odd_launches"]) == [] and near["shared_cpu"] is False
    # two launches: which of them is odd cannot be told
    assert combine([launch(0, 836e-6), launch(1, 279e-6)])["odd_launches"] is None
