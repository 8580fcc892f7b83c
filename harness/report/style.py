"""One look for every figure of the paper.

- ``color(name)`` / ``marker(name)``: a stable mapping from an algorithm name to a colour and a
  marker, the same in every figure. Known names have a fixed colour in ``COLORS`` (append-only);
  unknown names get a colour derived from a hash of the name (stable across runs and
  machines, but it may resemble another one). ``native:auto`` (AUTO) is always black.
- ``library_color(library)`` / ``library_marker(library)``: the same for the lines of a
  library (``LIBRARIES``).
- ``short(name)``: the abbreviation used in BEST labels (``native:ring`` -> ``RNG``).
- ``setup()``: paper-ready rcParams (readable sizes, no top/right spines, embedded TrueType).
- ``save(fig, path_without_ext)``: writes ``.png`` (150 dpi) and ``.pdf``, each atomically.
"""

from __future__ import annotations

import colorsys
import hashlib
import os
import re
import tempfile
from pathlib import Path

import matplotlib
import matplotlib.colors
import matplotlib.ticker

from ..analysis.best import AUTO
from ..libraries import family_of_version, split_name
from ..libraries import library_sort_key  # noqa: F401  (the reports sort by it)

AUTO_COLOR = "#000000"

# The colour of every known algorithm, fixed by hand so that the algorithms of one library are
# clearly distinct and dark enough for text; algorithms common to several libraries (RDB, RNG,
# RAB, RSA) share a colour, and harness implementations get a darker shade of their native
# namesake. Append-only: add new names at the end, never change an existing entry (that would
# recolour old figures). The order also fixes the marker of each name.
COLORS = {
    "native:auto": AUTO_COLOR,
    # common to several libraries
    "native:recursive_doubling": "#2ca02c", "native:ring": "#d62728",
    "native:rabenseifner": "#1f77b4", "native:reduce_scatter_allgather": "#9467bd",
    # MPICH
    "native:nb": "#7f7f7f", "native:smp": "#8c564b", "native:recursive_multiplying": "#ff7f0e",
    "native:tree": "#17becf", "native:recexch": "#bcbd22",
    "native:k_reduce_scatter_allgather": "#e377c2",
    # Open MPI
    "native:basic_linear": "#393b79", "native:nonoverlapping": "#e6ab02",
    "native:segmented_ring": "#e7298a",
    # Intel MPI
    "native:reduce_bcast": "#637939", "native:topo_reduce_bcast": "#1b9e77",
    "native:binomial_gather_scatter": "#d95f02", "native:topo_binomial_gather_scatter": "#a6761d",
    "native:shumilin_ring": "#843c39", "native:topo_shm_flat": "#7b4173",
    "native:nreduce": "#6b6ecf", "native:ring_alt": "#f28e7f",
    # harness algorithms
    "ring": "#a50f15", "recursive_doubling": "#006d2c", "rabenseifner": "#08519c",
    "reduce_scatter_allgather": "#54278f", "binomial": "#525252", "suara": "#cc4c02",
    "suara2": "#ce1256",
    # node-aware (Bienz et al.), PAP (Proficz), the tuned selection and Intel MPI's autotuner
    "smp": "#5b3a29", "nap": "#e6550d", "slt": "#7570b3", "prr": "#1b9e77",
    "native:tuned": "#c51b7d", "native:autotuner": "#6a3d9a",
}
KNOWN_ALGORITHMS = list(COLORS)

MARKERS = ["o", "s", "^", "D", "v", "P", "X", "<", ">", "h", "p", "*"]

# Abbreviations for BEST labels (Castelló et al. use RDB, RSA, RNG, SRG, ...).
_ABBREV = {
    "auto": "AUTO", "nb": "NB", "smp": "SMP", "recursive_doubling": "RDB",
    "recursive_multiplying": "RMU", "reduce_scatter_allgather": "RSA", "tree": "TRE",
    "recexch": "REX", "ring": "RNG", "k_reduce_scatter_allgather": "KRSA",
    "basic_linear": "LIN", "nonoverlapping": "NOV", "segmented_ring": "SRG",
    "rabenseifner": "RAB", "reduce_bcast": "RBC", "topo_reduce_bcast": "TRBC",
    "binomial_gather_scatter": "BGS", "topo_binomial_gather_scatter": "TBGS",
    "shumilin_ring": "SHR", "topo_shm_flat": "TSF", "nreduce": "NRD", "ring_alt": "RNA",
}

# per library: its title, its lines' colour and marker (ping-pong, cross-library, ...)
LIBRARIES = {"mpich": ("MPICH", "#1f77b4", "o"), "openmpi": ("Open MPI", "#d62728", "s"),
             "impi": ("Intel MPI", "#2ca02c", "D")}
# the node-aware comparison's harness algorithms as Bienz et al. name them
NODE_AWARE = {"recursive_doubling": "RD", "smp": "SMP", "nap": "NAP"}


def _index(name: str) -> int | None:
    try:
        return KNOWN_ALGORITHMS.index(name)
    except ValueError:
        return None


def _digest(name: str) -> int:
    return int.from_bytes(hashlib.sha1(name.encode()).digest()[:4], "big")


def color(name: str) -> str:
    """The colour of algorithm ``name`` (hex), identical in every figure."""
    if name in COLORS:
        return COLORS[name]
    h = _digest(name)
    r, g, b = colorsys.hsv_to_rgb((h % 360) / 360.0, 0.55 + (h >> 9) % 30 / 100, 0.55 + (h >> 17) % 25 / 100)
    return "#{:02x}{:02x}{:02x}".format(int(r * 255), int(g * 255), int(b * 255))


def text_color(name: str) -> str:
    """``color(name)`` darkened when it is light, for labels printed in that colour."""
    r, g, b = matplotlib.colors.to_rgb(color(name))
    lum = 0.2126 * r + 0.7152 * g + 0.0722 * b
    if lum <= 0.45:
        return color(name)
    k = 0.45 / lum
    return matplotlib.colors.to_hex((r * k, g * k, b * k))


def marker(name: str) -> str:
    """The marker of algorithm ``name``, identical in every figure."""
    i = _index(name)
    if i is None:
        i = _digest(name)
    return MARKERS[i % len(MARKERS)]


def algorithm_order(names) -> list[str]:
    """``names`` once each: the known ones in the order of ``COLORS``, then the others sorted."""
    return sorted(set(names), key=lambda n: (1, 0, n) if _index(n) is None else (0, _index(n), n))


def short(name: str) -> str:
    """Abbreviation of an algorithm name: ``native:ring`` -> ``RNG``; harness ones keep their
    own name (``suara2``), so a native and a harness algorithm never share a label."""
    if name.startswith("native:"):
        base = name.split(":", 1)[1]
        return _ABBREV.get(base, base.upper()[:6])
    return name


def long_label(name: str) -> str:
    """Legend text: ``RNG  ring`` for ``native:ring``; ``AUTO`` for ``native:auto``."""
    if name == AUTO:
        return "AUTO (library's choice)"
    if name.startswith("native:"):
        return f"{short(name)}: {name.split(':', 1)[1]}"
    return name


# the series that are neither algorithms nor libraries: the tuning policies (regret), the
# levels of a ping-pong pair, Castelló et al.'s model variants, the fusion policies (Fig. 7)
SERIES_COLORS = {"adaptive": "#d62728", "random": "#1f77b4", "grid": "#2ca02c",
                 "socket": "#1f77b4", "node": "#2ca02c", "network": "#d62728",
                 "THEO": "#000000", "REAL": "#d62728", "OVL": "#1f77b4", "NOVL": "#2ca02c",
                 "horovod": "#d62728", "ddp": "#1f77b4", "harness best": "#7a0019"}


def library_color(library: str) -> str:
    """The colour of a library's lines; another installation's is derived from its name."""
    return LIBRARIES[library][1] if library in LIBRARIES else color(f"library:{library}")


def library_marker(library: str) -> str:
    return LIBRARIES[library][2] if library in LIBRARIES else marker(f"library:{library}")


def library_title(library: str) -> str:
    return LIBRARIES[library][0] if library in LIBRARIES else library


def library_label(library: str, version) -> str:
    """``MPICH 5.0.2`` from the library and its raw version string (``MPICH Version: 5.0.2``);
    an installation of another name as ``ompi41 (Open MPI 4.1.4)``; a simulated one as
    ``openmpi@flat64 (simulated Open MPI 4.1.2)``."""
    text = "" if version is None or (isinstance(version, float) and version != version) else str(version)
    m = re.search(r"\d+(?:\.\d+)+(?:[a-z]+\d*)?", text)
    if library not in LIBRARIES:
        family = family_of_version(text)
        inner = f"{LIBRARIES[family][0]} {m.group(0) if m else ''}".strip() if family else (
            m.group(0) if m else " ".join(text.split()))
        if split_name(library)[1]:  # <family>@<platform>: SMPI's copy, never a measured library
            return f"{library} (simulated{' ' + inner if inner else ''})"
        return f"{library} ({inner})" if inner else library
    title = library_title(library)
    if m:
        return f"{title} {m.group(0)}"
    text = " ".join(text.split())
    return f"{title} {text}".strip()


def setup() -> None:
    """Paper-ready rcParams: sizes legible at print width, light grid, no chartjunk."""
    matplotlib.rcParams.update({
        "font.size": 9,
        "axes.titlesize": 9.5,
        "axes.labelsize": 9,
        "xtick.labelsize": 8,
        "ytick.labelsize": 8,
        "legend.fontsize": 8,
        "legend.frameon": False,
        "figure.titlesize": 10.5,
        "axes.spines.top": False,
        "axes.spines.right": False,
        "axes.grid": True,
        "axes.grid.which": "major",
        "grid.color": "#d9d9d9",
        "grid.linewidth": 0.5,
        "grid.alpha": 1.0,
        "axes.axisbelow": True,
        "lines.linewidth": 1.2,
        "lines.markersize": 4,
        "errorbar.capsize": 2,
        "savefig.dpi": 150,
        "savefig.bbox": "tight",
        "savefig.pad_inches": 0.03,
        "pdf.fonttype": 42,
        "ps.fonttype": 42,
        "svg.fonttype": "none",
    })


# tick labels as plain numbers (2, 4, 8 ... rather than 10^0.3): for axes of P and speedups
PLAIN_TICKS = matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}")


def save(fig, path_without_ext) -> list[Path]:
    """Write ``<path>.png`` (dpi 150) and ``<path>.pdf``; each goes to a temporary file in the
    same directory and is renamed into place. Returns the two paths."""
    base = Path(path_without_ext)
    base.parent.mkdir(parents=True, exist_ok=True)
    written = []
    for fmt in ("png", "pdf"):
        final = base.parent / f"{base.name}.{fmt}"
        fd, tmp = tempfile.mkstemp(prefix=f".{final.name}.", suffix=f".{fmt}", dir=base.parent)
        os.close(fd)
        try:
            # no creation date in the PDF: the same data give the same bytes
            meta = {"CreationDate": None} if fmt == "pdf" else {}
            fig.savefig(tmp, format=fmt, dpi=150, metadata=meta)
            os.replace(tmp, final)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
        written.append(final)
    return written


def placeholder(path_without_ext, title: str, text: str) -> list[Path]:
    """A figure that says why there is nothing to draw (``text``), under ``title``; written
    like ``save``. The report's declared files exist whatever the data."""
    from matplotlib.figure import Figure

    setup()
    fig = Figure(figsize=(6.0, 2.2), layout="constrained")
    ax = fig.subplots()
    ax.set_axis_off()
    ax.text(0.5, 0.5, text, ha="center", va="center", wrap=True, color="0.3")
    fig.suptitle(title)
    return save(fig, path_without_ext)
