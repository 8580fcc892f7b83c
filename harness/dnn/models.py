"""The four CNNs of Castelló et al. (Sect. 5), built from their library's own code.

AlexNet, ResNet-50 and VGG-11 come from ``torchvision.models`` (``weights=None``: nothing is
downloaded); ResNet-110 for CIFAR-10 is defined here after He et al. 2016, Sect. 4.2, since
torchvision has no CIFAR ResNets. Needs the ``[dnn]`` extra (PyTorch, torchvision).

``gradient_tensors(model)`` gives the gradients in backward order, the order in which they
become ready and in which Horovod and PyTorch DDP hand them to allreduce: the reverse of the
registration order of ``model.parameters()``.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import torch
from torch import nn

__all__ = ["BUILDERS", "build", "gradient_tensors", "resnet110", "torchvision_version"]

# The torchvision wheel on PyPI is a CUDA build. Its C++ extension (_C.so) cannot load beside
# the CPU build of torch that the [dnn] extra installs, so torchvision's ops (nms, roi_align,
# ...) are never registered. ``import torchvision`` nevertheless registers fake (meta)
# kernels for ``torchvision::nms`` and ``torchvision::qnms`` unconditionally
# (torchvision/_meta_registrations.py), and that fails with "operator torchvision::nms does
# not exist". The models use none of these ops, so it is enough to define the two schemas,
# exactly as torchvision's csrc declares them, before the import. The Library object must stay
# alive (a module global): when it is garbage-collected its definitions are removed again.
_TORCHVISION_SCHEMA_LIB: torch.library.Library | None = None


def _import_torchvision():
    global _TORCHVISION_SCHEMA_LIB
    if not hasattr(torch.ops.torchvision, "nms") and _TORCHVISION_SCHEMA_LIB is None:
        lib = torch.library.Library("torchvision", "FRAGMENT")
        lib.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
        lib.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
        _TORCHVISION_SCHEMA_LIB = lib
    with warnings.catch_warnings():
        # Without its extensions torchvision may warn that its image/video extension failed to
        # load; the models need neither.
        warnings.filterwarnings("ignore", message=".*(extension|image\\.so|libjpeg|libpng).*")
        warnings.filterwarnings("ignore", category=UserWarning, module="torchvision.*")
        import torchvision
        import torchvision.models
    return torchvision


def torchvision_version() -> str:
    """torchvision's version without the local build tag (``0.28.0``, not ``0.28.0+cu130``):
    the architectures do not depend on the build."""
    return _import_torchvision().__version__.split("+")[0]


# --- ResNet-110 for CIFAR-10 (He et al. 2016, Sect. 4.2) ------------------------------------


class _ShortcutA(nn.Module):
    """Option A: identity shortcut; where the shape changes, subsample by 2 and pad the new
    channels with zeros. Parameter-free."""

    def __init__(self, in_planes: int, planes: int, stride: int) -> None:
        super().__init__()
        self.stride = stride
        self.pad = planes - in_planes

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.stride != 1:
            x = x[:, :, :: self.stride, :: self.stride]
        if self.pad:
            half = self.pad // 2
            x = nn.functional.pad(x, (0, 0, 0, 0, half, self.pad - half))
        return x


class _BasicBlock(nn.Module):
    def __init__(self, in_planes: int, planes: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.shortcut = _ShortcutA(in_planes, planes, stride)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return torch.relu(out + self.shortcut(x))


class CifarResNet(nn.Module):
    """The 6n+2-layer CIFAR ResNet: a 3x3 convolution with 16 filters, three stages of n basic
    blocks (two 3x3 convolutions each) with 16, 32 and 64 filters on 32x32, 16x16 and 8x8 maps
    (the first block of stages 2 and 3 has stride 2), global average pooling and a 10-way fully
    connected layer. Convolutions have no bias (batch normalisation follows each)."""

    def __init__(self, n: int, num_classes: int = 10) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, stride=1, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        stages = []
        in_planes = 16
        for i, planes in enumerate((16, 32, 64)):
            blocks = []
            for j in range(n):
                stride = 2 if (i > 0 and j == 0) else 1
                blocks.append(_BasicBlock(in_planes, planes, stride))
                in_planes = planes
            stages.append(nn.Sequential(*blocks))
        self.layer1, self.layer2, self.layer3 = stages
        self.fc = nn.Linear(64, num_classes)
        for m in self.modules():
            if isinstance(m, (nn.Conv2d, nn.Linear)):
                nn.init.kaiming_normal_(m.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.relu(self.bn1(self.conv1(x)))
        out = self.layer3(self.layer2(self.layer1(out)))
        out = nn.functional.adaptive_avg_pool2d(out, 1).flatten(1)
        return self.fc(out)


def resnet110(num_classes: int = 10) -> CifarResNet:
    """ResNet-110 (n = 18): 1,727,962 parameters (He et al. 2016, Table 6: 1.7M).

    The figure 1,730,714 often quoted for ResNet-110 is 2,752 more: it is what projection
    shortcuts (a 1x1 convolution and batch normalisation, option B) at the two stage
    transitions add (16*32 + 2*32 + 32*64 + 2*64). He et al. use option A on CIFAR-10."""
    return CifarResNet(18, num_classes)


# --- registry --------------------------------------------------------------------------------


def _tv(name: str) -> Callable[[], nn.Module]:
    def builder() -> nn.Module:
        tv = _import_torchvision()
        return getattr(tv.models, name)(weights=None)

    builder.__name__ = name
    return builder


BUILDERS: dict[str, Callable[[], nn.Module]] = {
    "alexnet": _tv("alexnet"),
    "resnet50": _tv("resnet50"),
    "vgg11": _tv("vgg11"),
    "resnet110": resnet110,
}


def build(model: str, device: str = "meta") -> nn.Module:
    """Build ``model`` (a key of ``BUILDERS``). On the default ``meta`` device no memory is
    allocated and no initialisation is computed: enough for shapes and counts."""
    if model not in BUILDERS:
        raise ValueError(f"model: unknown value {model!r}; valid: {', '.join(BUILDERS)}")
    with torch.device(device):
        return BUILDERS[model]()


def source(model: str) -> str:
    """Where the architecture comes from, for the trace's provenance."""
    if model == "resnet110":
        return "harness.dnn.models.resnet110 (He et al. 2016, Sect. 4.2: n=18, option A)"
    return f"torchvision {torchvision_version()} models.{model}"


def gradient_tensors(model: nn.Module) -> list[tuple[str, int]]:
    """The model's gradient tensors as ``(name, numel)`` in backward order: the reverse of
    ``model.named_parameters()`` (registration order), the order in which the gradients become
    ready in back-propagation and in which Horovod and PyTorch DDP see them. Parameters that
    do not require a gradient are left out."""
    params = [(n, p.numel()) for n, p in model.named_parameters() if p.requires_grad]
    return params[::-1]
