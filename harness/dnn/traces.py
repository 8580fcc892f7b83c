"""Gradient traces of the four CNNs of Castelló et al. (Sect. 5, Fig. 7).

A trace is the list of a model's gradient tensors, ``(name, numel)``, in backward order (the
order they become ready, in which Horovod and PyTorch DDP hand them to allreduce). The traces
are committed as ``harness/data/traces/<model>.json``, so replaying one needs no PyTorch;
``generate`` rebuilds one from the model code (``harness.dnn.models``, needs the ``[dnn]``
extra) and ``python -m harness.dnn.traces`` rewrites all four files.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "INFO",
    "MODELS",
    "TRACES_DIR",
    "ModelInfo",
    "Trace",
    "generate",
    "load",
    "matches_published",
    "regenerate_all",
    "write",
]

TRACES_DIR = Path(__file__).resolve().parent.parent / "data" / "traces"

MODELS = ("alexnet", "resnet50", "vgg11", "resnet110")


@dataclass(frozen=True)
class ModelInfo:
    """What a model is trained on, and its parameter count as published.

    ``published_rounding`` is the unit the published figure is rounded to (1 for an exact
    count, 100,000 for "25.6M"): a count matches when it rounds to the published figure."""

    dataset: str
    input_shape: tuple[int, int, int]
    published_parameters: int
    published_rounding: int
    published_source: str


INFO: dict[str, ModelInfo] = {
    "alexnet": ModelInfo(
        "imagenet", (3, 224, 224), 61_100_840, 1,
        "torchvision model card (num_params 61,100,840; ~61M). Krizhevsky et al. 2012 give "
        "60M for the original two-GPU network; torchvision follows Krizhevsky 2014"),
    "resnet50": ModelInfo(
        "imagenet", (3, 224, 224), 25_557_032, 1,
        "torchvision model card (num_params 25,557,032; the usual 25.6M)"),
    "vgg11": ModelInfo(
        "imagenet", (3, 224, 224), 133_000_000, 1_000_000,
        "Simonyan & Zisserman 2015, Table 2 (configuration A: 133M)"),
    "resnet110": ModelInfo(
        "cifar10", (3, 32, 32), 1_700_000, 100_000,
        "He et al. 2016, Table 6 (110 layers: 1.7M)"),
}


@dataclass(frozen=True)
class Trace:
    """One model's gradient tensors in backward order."""

    model: str
    dataset: str
    source: str
    tensors: tuple[tuple[str, int], ...]
    published_parameters: int
    published_source: str

    @property
    def numels(self) -> tuple[int, ...]:
        return tuple(n for _, n in self.tensors)

    @property
    def parameters(self) -> int:
        return sum(self.numels)


def _check_model(model: str) -> str:
    if model not in MODELS:
        raise ValueError(f"model: unknown value {model!r}; valid: {', '.join(MODELS)}")
    return model


def matches_published(trace: Trace) -> bool:
    """True when the trace's parameter count rounds to the published figure (to the unit
    ``INFO[model].published_rounding``; exact for the torchvision counts)."""
    unit = INFO[trace.model].published_rounding
    return abs(trace.parameters - trace.published_parameters) * 2 <= unit


def path_of(model: str) -> Path:
    return TRACES_DIR / f"{_check_model(model)}.json"


def load(model: str) -> Trace:
    """The committed trace of ``model`` (one of ``MODELS``); no PyTorch needed."""
    doc = json.loads(path_of(model).read_text())
    return Trace(
        model=doc["model"],
        dataset=doc["dataset"],
        source=doc["source"],
        tensors=tuple((str(name), int(numel)) for name, numel in doc["tensors"]),
        published_parameters=int(doc["published_parameters"]),
        published_source=doc["published_source"],
    )


def generate(model: str) -> Trace:
    """Build ``model`` from its code (on the meta device, no weights) and read its gradient
    tensors in backward order. Needs the ``[dnn]`` extra."""
    _check_model(model)
    from harness.dnn import models  # needs torch; imported only here

    info = INFO[model]
    tensors = models.gradient_tensors(models.build(model))
    return Trace(
        model=model,
        dataset=info.dataset,
        source=models.source(model),
        tensors=tuple((name, int(n)) for name, n in tensors),
        published_parameters=info.published_parameters,
        published_source=info.published_source,
    )


def write(trace: Trace, path: Path | str) -> Path:
    """Write ``trace`` as JSON, one tensor a line (atomically)."""
    path = Path(path)
    head = {
        "model": trace.model,
        "dataset": trace.dataset,
        "input_shape": list(INFO[trace.model].input_shape) if trace.model in INFO else None,
        "source": trace.source,
        "order": "backward (reverse of model.parameters() registration order)",
        "parameters": trace.parameters,
        "published_parameters": trace.published_parameters,
        "published_source": trace.published_source,
    }
    lines = ["{"]
    lines += [f"  {json.dumps(k)}: {json.dumps(v)}," for k, v in head.items()]
    lines.append('  "tensors": [')
    rows = [f"    {json.dumps([name, n])}" for name, n in trace.tensors]
    lines.append(",\n".join(rows))
    lines += ["  ]", "}"]
    text = "\n".join(lines) + "\n"
    json.loads(text)  # well-formed
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)
    return path


def regenerate_all(directory: Path | str = TRACES_DIR) -> list[Path]:
    """Rebuild every model's trace from its code and rewrite ``<directory>/<model>.json``."""
    return [write(generate(m), Path(directory) / f"{m}.json") for m in MODELS]


def main() -> int:
    for path in regenerate_all():
        trace = load(path.stem)
        print(f"{path}: {len(trace.tensors)} tensors, {trace.parameters:,} parameters")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
