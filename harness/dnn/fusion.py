"""How a training framework fuses a model's gradient tensors into allreduce calls.

``calls(numels, policy, precision)`` turns one iteration's gradient tensors (element counts,
in backward order) into the byte size of each allreduce call, in call order, under

* ``horovod``: Horovod's tensor fusion with its default 64 MiB fusion buffer;
* ``ddp``: PyTorch DistributedDataParallel's gradient buckets with its default caps
  (1 MiB for the first bucket, 25 MiB for the others).

Pure Python, no PyTorch: ``tests/test_dnn_traces.py`` checks ``ddp`` against torch's own
``torch.distributed._compute_bucket_assignment_by_size``.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = [
    "DDP_BUCKET_BYTES",
    "DDP_FIRST_BUCKET_BYTES",
    "HOROVOD_FUSION_THRESHOLD",
    "POLICIES",
    "PRECISIONS",
    "calls",
    "ddp_buckets",
    "horovod_buckets",
]

POLICIES = ("horovod", "ddp")
PRECISIONS = {"fp32": 4, "fp16": 2}  # bytes per element

MiB = 1024 * 1024
HOROVOD_FUSION_THRESHOLD = 64 * MiB  # Horovod's default HOROVOD_FUSION_THRESHOLD
DDP_FIRST_BUCKET_BYTES = 1 * MiB  # torch.distributed._DEFAULT_FIRST_BUCKET_BYTES
DDP_BUCKET_BYTES = 25 * MiB  # DDP's default bucket_cap_mb = 25


def _check(policy: str, precision: str) -> int:
    if policy not in POLICIES:
        raise ValueError(f"policy: unknown value {policy!r}; valid: {', '.join(POLICIES)}")
    if precision not in PRECISIONS:
        raise ValueError(
            f"precision: unknown value {precision!r}; valid: {', '.join(PRECISIONS)}")
    return PRECISIONS[precision]


def horovod_buckets(sizes: Iterable[int],
                    threshold: int = HOROVOD_FUSION_THRESHOLD) -> list[list[int]]:
    """Indices of the tensors in each fused response, in order, after Horovod's
    ``Controller::FuseResponses`` (horovod/common/controller.cc).

    The first waiting tensor starts a response; following tensors join it while the fused
    size stays ``<= threshold``; the first that would overflow ends it and starts the next
    response. A tensor larger than the threshold therefore goes alone. Horovod also looks past
    a tensor that cannot join, but only to skip tensors of another dtype or operation: for a
    tensor of the same dtype that does not fit, the skipped size already overflows and the
    look-ahead stops at once, so with one dtype the fusion is exactly this greedy packing.

    Assumes every tensor is ready in one fusion cycle (in a real run Horovod fuses, every
    ``HOROVOD_CYCLE_TIME`` = 1 ms by default, what has become ready since the last cycle, so
    buckets can be smaller than here, never larger). ``threshold`` is used as given: Horovod
    rounds it up to a multiple of ``8 * 64 * local_size`` bytes, which leaves 64 MiB unchanged
    for any power-of-two number of ranks per node.
    """
    buckets: list[list[int]] = []
    current: list[int] = []
    fused = 0
    for i, size in enumerate(sizes):
        if current and fused + size <= threshold:
            current.append(i)
            fused += size
            continue
        if current:
            buckets.append(current)
        current, fused = [i], size
    if current:
        buckets.append(current)
    return buckets


def ddp_buckets(sizes: Iterable[int], caps: tuple[int, ...] = (
        DDP_FIRST_BUCKET_BYTES, DDP_BUCKET_BYTES)) -> list[list[int]]:
    """Indices of the tensors in each DDP bucket, in order, after torch's C++
    ``compute_bucket_assignment_by_size`` (torch/csrc/distributed/c10d/reducer.cpp) as the
    Reducer calls it when it rebuilds its buckets after the first iteration: tensors in
    gradient-ready (backward) order, all of one dtype and device.

    A tensor is added to the open bucket first; the bucket closes as soon as its size reaches
    its cap (``size >= cap``), so a bucket may exceed its cap by its last tensor, and a tensor
    larger than the cap closes the bucket it lands in. The first bucket's cap is ``caps[0]``,
    each next bucket takes the next cap, the last cap repeating. The last, partly filled
    bucket is sent too. (DDP with ``bucket_cap_mb`` unset uses 1 MiB then 25 MiB; setting
    ``bucket_cap_mb`` explicitly, even to 25, makes the first cap equal to it.)
    """
    if not caps:
        raise ValueError("caps: need at least one bucket cap")
    buckets: list[list[int]] = []
    current: list[int] = []
    filled = 0
    for i, size in enumerate(sizes):
        current.append(i)
        filled += size
        cap = caps[min(len(buckets), len(caps) - 1)]
        if filled >= cap:
            buckets.append(current)
            current, filled = [], 0
    if current:
        buckets.append(current)
    return buckets


def calls(numels: Iterable[int], policy: str, precision: str) -> list[int]:
    """Byte size of each allreduce call of one training iteration, in call order.

    ``numels``: element counts of the gradient tensors in backward order (``Trace.numels``);
    ``policy``: one of ``POLICIES``; ``precision``: one of ``PRECISIONS`` (all gradients of
    that precision). Every tensor's bytes are in exactly one call.
    """
    itemsize = _check(policy, precision)
    sizes = [int(n) * itemsize for n in numels]
    if any(s < 0 for s in sizes):
        raise ValueError("numels: element counts must be >= 0")
    group = horovod_buckets if policy == "horovod" else ddp_buckets
    return [sum(sizes[i] for i in bucket) for bucket in group(sizes)]
