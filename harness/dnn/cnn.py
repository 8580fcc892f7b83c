"""The CIFAR-10 network of Proficz 2018, Sect. 6, in PyTorch.

The paper names 8 layers — 3 convolutions, 3 average poolings, 2 fully connected — and
145,578 float parameters, trained with tiny-dnn. tiny-dnn's own CIFAR-10 example has exactly
that shape; its layer sizes give the paper's count once the poolings carry no parameters (as
PyTorch's ``AvgPool2d``; tiny-dnn's ``average_pooling_layer`` has a trainable scale and bias
per channel, 256 parameters here, which the paper's count leaves out):

=========================================  =========  ==========
layer                                      output     parameters
=========================================  =========  ==========
conv 5×5, 3 → 32, padding 2 (same), tanh   32×32×32   2,432
average pool 2×2                           16×16×32   0
conv 5×5, 32 → 32, padding 2, tanh         16×16×32   25,632
average pool 2×2                           8×8×32     0
conv 5×5, 32 → 64, padding 2, tanh         8×8×64     51,264
average pool 2×2                           4×4×64     0
fully connected 1024 → 64, tanh            64         65,600
fully connected 64 → 10 (softmax in loss)  10         650
=========================================  =========  ==========

Total 145,578. The last layer (``fc2``) is where the paper calls ``edge()``: just before it is
processed.
"""

from __future__ import annotations

import torch
from torch import nn

PAPER_PARAMETERS = 145_578
CLASSES = 10
IMAGE_SHAPE = (3, 32, 32)


class PapCNN(nn.Module):
    """3 convolutions, 3 average poolings, 2 dense layers; 145,578 parameters."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 32, 5, padding=2)
        self.pool1 = nn.AvgPool2d(2)
        self.conv2 = nn.Conv2d(32, 32, 5, padding=2)
        self.pool2 = nn.AvgPool2d(2)
        self.conv3 = nn.Conv2d(32, 64, 5, padding=2)
        self.pool3 = nn.AvgPool2d(2)
        self.fc1 = nn.Linear(4 * 4 * 64, 64)
        self.fc2 = nn.Linear(64, CLASSES)

    @property
    def last_layer(self) -> nn.Module:
        """The layer before which the paper calls ``edge()``."""
        return self.fc2

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool1(torch.tanh(self.conv1(x)))
        x = self.pool2(torch.tanh(self.conv2(x)))
        x = self.pool3(torch.tanh(self.conv3(x)))
        x = torch.tanh(self.fc1(x.flatten(1)))
        return self.fc2(x)  # logits; the softmax is in the cross-entropy loss


def parameter_count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
