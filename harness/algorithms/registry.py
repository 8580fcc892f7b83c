"""The registry itself: ``REGISTRY``, ``@register``, ``Context``, plugin loading and
``resolve``. The algorithm families (one module each) import from here, and the package
(``harness/algorithms/__init__.py``) imports the families, so that they register."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from .native import native_allreduce

REGISTRY: dict[str, "Algorithm"] = {}


@dataclass(frozen=True)
class Algorithm:
    name: str
    fn: Callable
    family: str
    description: str = ""


@dataclass
class Context:
    """Per-cell state handed to an algorithm: parameters and reusable scratch buffers.
    An algorithm may leave ``scratch["record"]`` (a dict of plain values, e.g. the grid it
    chose); the bench stores it with the cell's result."""

    params: dict = field(default_factory=dict)
    scratch: dict = field(default_factory=dict)
    # ``[buffer, MPI datatype]`` of sendbuf and recvbuf, built once: mpi4py parses these
    # about half a microsecond faster than numpy arrays, which matters at 8 bytes
    sendspec: list | None = None
    recvspec: list | None = None


def register(name: str, *, family: str, description: str = ""):
    """Decorator adding ``fn`` to the registry under ``name``; a duplicate name is an error."""

    def deco(fn):
        if name in REGISTRY or name.startswith("native:"):
            raise ValueError(f"algorithm {name!r} is already registered")
        REGISTRY[name] = Algorithm(name, fn, family, description or (fn.__doc__ or "").strip())
        return fn

    return deco


_PLUGINS: set[str] = set()


def load_plugin(path: str | Path) -> None:
    """Import a Python file that registers algorithms (once per process)."""
    path = Path(path).resolve()
    if str(path) in _PLUGINS:
        return
    spec = importlib.util.spec_from_file_location(f"harness_plugin_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise ValueError(f"cannot import plugin {str(path)!r}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    _PLUGINS.add(str(path))


def harness_names() -> list[str]:
    return sorted(REGISTRY)


def resolve(name: str) -> Callable:
    """The callable behind ``name``: the native allreduce for ``native:*``, else the registry's."""

    if name.startswith("native:"):
        return native_allreduce
    if name not in REGISTRY:
        raise KeyError(f"unknown algorithm {name!r}; valid: {', '.join(harness_names())}")
    return REGISTRY[name].fn
