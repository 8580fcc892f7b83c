"""Files written so that a crash never leaves half of one: every write goes to a temporary file
in the same directory, is flushed, then renamed into place. JSON (NaN and infinities written as
null, numpy scalars as numbers) and Parquet.

``arrow_table`` builds the Arrow table of a dict of columns from Arrow buffers directly:
``pyarrow.array`` and ``pyarrow.table`` import pandas (about half a second) at their first
call, which rank 0 of every launch would otherwise pay while the other ranks wait.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path


def atomic_write_bytes(path: Path, data: bytes) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode())


def _json_default(obj):
    if hasattr(obj, "item"):
        return obj.item()
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def _clean(obj):
    """NaN and infinities become null, so the JSON is standard."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    return obj


def write_json(path: Path, doc) -> None:
    atomic_write_text(path, json.dumps(_clean(doc), indent=1, default=_json_default) + "\n")


def read_json(path: Path):
    with open(path) as fh:
        return json.load(fh)


def write_parquet(path: Path, table) -> None:
    import pyarrow.parquet as pq

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    os.close(fd)
    try:
        pq.write_table(table, tmp)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _arrow_array(values):
    """One column: strings, or numbers (int64, double), or equal-or-ragged lists of
    numbers (``list<...>``), as ``pyarrow.array`` would type them."""
    import numpy as np
    import pyarrow as pa

    n = len(values)
    if n and isinstance(values[0], str):
        data = [v.encode() for v in values]
        offsets = np.zeros(n + 1, dtype=np.int32)
        np.cumsum([len(b) for b in data], out=offsets[1:])
        return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets),
                                                      pa.py_buffer(b"".join(data))])
    if n and isinstance(values[0], (list, tuple, np.ndarray)):
        offsets = np.zeros(n + 1, dtype=np.int32)
        np.cumsum([len(v) for v in values], out=offsets[1:])
        flat = [x for v in values for x in v]
        items = _arrow_array(flat) if flat else _numbers(np.zeros(0))
        return pa.ListArray.from_arrays(_numbers(offsets), items)
    return _numbers(np.asarray(values))


def _numbers(arr):
    import numpy as np
    import pyarrow as pa

    if arr.dtype.kind in "iu":
        arr = arr.astype(np.int32 if arr.dtype == np.int32 else np.int64, copy=False)
    elif arr.dtype.kind == "f":
        arr = arr.astype(np.float64, copy=False)
    else:
        raise TypeError(f"arrow_table: unsupported column values of dtype {arr.dtype}")
    arr = np.ascontiguousarray(arr)
    return pa.Array.from_buffers(pa.from_numpy_dtype(arr.dtype), len(arr),
                                 [None, pa.py_buffer(arr)])


def arrow_table(columns: dict):
    """The Arrow table of ``{name: values}`` (every column as long as the others), typed as
    ``pyarrow.table`` types Python lists: str -> string, int -> int64, float -> double,
    lists -> list<...>."""
    import pyarrow as pa

    return pa.Table.from_arrays([_arrow_array(v) for v in columns.values()],
                                names=list(columns))
