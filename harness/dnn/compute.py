"""The compute side of a training iteration, measured on this CPU: forward, backward and the
SGD step of a model at a batch size, with PyTorch (the ``[dnn]`` extra), single-threaded as
each MPI rank of a data-parallel run would be. Gives the ``workload.compute`` time that the
workload report adds to the measured communication (``harness dnn compute``)."""

from __future__ import annotations

import time

import numpy as np

from . import traces


def iteration_times(model: str, batch: int, iterations: int = 3, warmup: int = 1,
                    threads: int = 1, seed: int = 0) -> list[float]:
    """Seconds of each timed iteration (forward, loss, backward, optimizer step) of ``model``
    on random input of its dataset's shape, after ``warmup`` untimed ones."""
    import torch

    from . import models  # torch

    if batch < 1 or iterations < 1 or warmup < 0:
        raise ValueError(f"batch, iterations: expected >= 1 (warmup >= 0), got {batch}, "
                         f"{iterations}, {warmup}")
    torch.set_num_threads(threads)
    torch.manual_seed(seed)
    net = models.build(model, device="cpu")
    net.train()
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    shape = traces.INFO[model].input_shape
    classes = net(torch.zeros(1, *shape)).shape[1]
    x = torch.randn(batch, *shape)
    y = torch.randint(0, classes, (batch,))
    loss_fn = torch.nn.CrossEntropyLoss()
    out = []
    for i in range(warmup + iterations):
        t = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss_fn(net(x), y).backward()
        opt.step()
        if i >= warmup:
            out.append(time.perf_counter() - t)
    return out


def iteration_time(model: str, batch: int, **kw) -> float:
    """The median of ``iteration_times``."""
    return float(np.median(iteration_times(model, batch, **kw)))
