"""The communication of the four CNNs of Castelló et al. 2021 (Sect. 5, Fig. 7).

``make_fig7(models, tables_dir, figures_dir)`` writes

- ``<tables_dir>/dnn_models.{md,tex,csv}``: per model its dataset, gradient tensors,
  parameters against the published count, and per fusion policy x precision the number of
  allreduce calls of one iteration and the largest of them, plus the bytes per iteration;
- ``<figures_dir>/dnn_fig7.{png,pdf}``: the paper's Fig. 7, one panel per model: the size of
  each raw per-tensor message (no fusion, fp32, as in the paper) and how many messages have
  that size; the sizes of the fused calls (Horovod and DDP, fp32) are marked above.

The traces are the committed ones (``harness.dnn.traces.load``): no PyTorch needed.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.ticker
import matplotlib.transforms
import pandas as pd
from matplotlib.figure import Figure

from ..analysis.dnn_traces import COMBOS, messages, model_table
from ..dnn import traces
from . import facets, style, tables

__all__ = ["COMBOS", "make_fig7", "model_table", "table_rows"]

TITLES = {"alexnet": "AlexNet + ImageNet", "resnet50": "ResNet-50 + ImageNet",
          "vgg11": "VGG-11 + ImageNet", "resnet110": "ResNet-110 + CIFAR-10"}
DATASETS = {"imagenet": "ImageNet", "cifar10": "CIFAR-10"}
POLICY_LABEL = {"horovod": "Horovod", "ddp": "DDP"}
KiB, MiB, GiB = 1024, 1024**2, 1024**3


def human_bytes(n: float) -> str:
    """``150994944`` -> ``144.0 MiB``; bytes below 1 KiB stay in B."""
    n = float(n)
    for unit, factor in (("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if n >= factor:
            return f"{n / factor:.1f} {unit}"
    return f"{int(n)} B"


def published_label(count: int, rounding: int) -> str:
    """The published figure as published: exact (``61,100,840``) or in millions (``1.7M``)."""
    if rounding <= 1:
        return f"{count:,}"
    decimals = max(0, len(str(1_000_000 // rounding)) - 1)
    return f"{count / 1e6:.{decimals}f}M"


def table_rows(df: pd.DataFrame) -> tuple[list[str], list[list[str]]]:
    """Header and formatted rows of the presentation table (Markdown and LaTeX)."""
    header = ["Model", "Dataset", "Tensors", "Parameters", "Published", "Matches"]
    header += [f"{POLICY_LABEL[p]} {q}: calls / largest" for p, q in COMBOS]
    header.append("Bytes / iteration (fp32)")
    rows = []
    for r in df.to_dict("records"):
        row = [TITLES.get(r["model"], r["model"]).split(" + ")[0],
               DATASETS.get(r["dataset"], r["dataset"]), str(r["tensors"]),
               f"{r['parameters']:,}",
               published_label(r["published_parameters"], r["published_rounding"]),
               "yes" if r["matches"] else "NO"]
        for p, q in COMBOS:
            row.append(f"{r[f'{p}_{q}_calls']} / {human_bytes(r[f'{p}_{q}_largest_bytes'])}")
        row.append(human_bytes(r["bytes_per_iteration_fp32"]))
        rows.append(row)
    return header, rows


CAPTION = (
    "CNNs of Castelló et al. (Sect. 5): gradient tensors (one per parameter tensor, "
    "backward order), parameters against the published count, and the allreduce calls of one "
    "training iteration under Horovod tensor fusion (64 MiB buffer) and PyTorch DDP buckets "
    "(1 MiB, then 25 MiB), in fp32 and fp16: number of calls / the largest call.")


def _sources_note(df: pd.DataFrame) -> str:
    lines = ["Published counts:"]
    lines += [f"- {TITLES.get(r['model'], r['model'])}: {r['published_source']}."
              for r in df.to_dict("records")]
    return "\n".join(lines) + "\n"


def fig7(models, path_without_ext) -> list[Path]:
    """The figure (see the module doc); returns the PNG and PDF paths."""
    style.setup()
    models = list(models)
    cols = 2 if len(models) > 1 else 1
    nrows = (len(models) + cols - 1) // cols
    fig = Figure(figsize=(3.5 * cols + 0.4, 2.5 * nrows + 0.8), layout="constrained")
    axes = fig.subplots(nrows, cols, squeeze=False)
    marks = (("horovod", "v", style.SERIES_COLORS["horovod"], 0.97),
             ("ddp", "d", style.SERIES_COLORS["ddp"], 0.90))
    for ax in axes.flat[len(models):]:
        ax.set_axis_off()
    for ax, m in zip(axes.flat, models):
        msg = messages(m)
        sizes, ys = msg["sizes"], msg["counts"]
        top = max(ys) * 1.3
        ax.vlines(sizes, 0, ys, color="0.25", lw=1.0)
        ax.plot(sizes, ys, "o", color="0.15", ms=3.5, label="per-tensor message")
        ax.set_ylim(0, top)
        ax.yaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
        trans = matplotlib.transforms.blended_transform_factory(ax.transData, ax.transAxes)
        for policy, marker, color, y in marks:
            c = msg["calls"][policy]
            ax.plot(c, [y] * len(c), marker, color=color, ms=4.5, transform=trans, ls="none",
                    clip_on=False, label=f"{POLICY_LABEL[policy]} fused call")
        facets.size_axis(ax, [], label="message size (fp32)", limits=(2**3, 2**30))
        ax.set_title(f"{TITLES.get(m, m)}: {msg['tensors']} tensors, {human_bytes(msg['bytes'])}")
        ax.set_ylabel("number of messages")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=3)
    fig.suptitle("Gradient messages per training iteration (cf. Castelló et al. 2021, Fig. 7)")
    return style.save(fig, path_without_ext)


def make_fig7(models, tables_dir, figures_dir) -> list[Path]:
    """Write ``dnn_models.{md,tex,csv}`` in ``tables_dir`` and ``dnn_fig7.{png,pdf}`` in
    ``figures_dir`` for ``models`` (names of ``harness.dnn.traces.MODELS``; ValueError for
    another). Returns the five paths: the three tables, then the two figures."""
    models = list(models) if models else list(traces.MODELS)
    for m in models:
        traces.path_of(m)  # ValueError naming an unknown model
    df = model_table(models)
    header, rows = table_rows(df)
    written = tables.write_table(df, Path(tables_dir) / "dnn_models", CAPTION, header=header,
                                 rows=rows, layout=tables.Layout(bold_caption=True,
                                                                md_note=_sources_note(df)))
    written += fig7(models, Path(figures_dir) / "dnn_fig7")
    return written
