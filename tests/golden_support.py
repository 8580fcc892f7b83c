"""The golden reports: every table the report stage builds from one fixed summary, to be
compared byte for byte with the copies under ``tests/data/golden/expected/``
(``tests/test_golden_reports.py``). The summary is the cut-down paper campaign (all four
paper configs, merged, on the local two-node Slurm); ``model_params.json`` is rule
``fit_params``'s fit of it. A change that moves code must leave these tables as they are.

A change meant to alter a table writes the new copies, to be reviewed in the diff::

    .venv/bin/python tests/golden_support.py --write
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA = HERE / "data" / "golden"
EXPECTED = DATA / "expected"
SUFFIXES = (".md", ".csv")  # the .tex copies carry the same numbers
REFERENCE_LIBRARY = "mpich"  # the config's report.reference_library (its default)


def build(root: Path) -> Path:
    """Copy the summary and model parameters to ``root/results/golden`` and run every report
    on them, as the workflow's report rules do; returns the tables directory."""
    sys.path.insert(0, str(HERE.parent))
    from harness import models
    from harness.report import castello_models, cross_library, figures, node_aware, pap, pingpong, projection, style, suara
    from harness.report.inputs import Inputs

    res, figs = root / "results" / "golden", root / "figures" / "golden"
    res.mkdir(parents=True)
    for name in ("summary.csv", "model_params.json"):
        shutil.copy(DATA / name, res / name)
    tables = res / "tables"
    # The summary has no reduce_local cells, so the SUARA and model reports time np.add on
    # this machine for gamma (models.measure_gamma): pinned to model_params.json's value.
    gamma = json.loads((DATA / "model_params.json").read_text())["gamma"]
    measure_gamma, models.measure_gamma = models.measure_gamma, lambda *a, **k: gamma
    # The tables are compared, not the figures: every figure is drawn (each plotting call
    # runs) but not rendered to PNG and PDF, which took 90 % of this build's CPU time. The
    # rendered figures of every report stage are test_report_faults' and the Slurm campaign's.
    save = style.save
    style.save = lambda fig, path: [Path(f"{path}.png"), Path(f"{path}.pdf")]
    # one Inputs, as the workflow's rules build it; AUTO vs BEST as made without the fit
    inputs = Inputs.load(res, tables, figs, params=res / "model_params.json",
                         reference=REFERENCE_LIBRARY)
    try:
        figures.make(inputs.but(params=None, params_path=None))
        for report in (suara, node_aware, pap, pingpong, cross_library, projection,
                       castello_models):
            report.make(inputs)
    finally:
        models.measure_gamma = measure_gamma
        style.save = save
    return tables


def tables_of(directory: Path, root: Path | None = None) -> dict[str, str]:
    """The tables in ``directory`` by file name; ``root`` (where they were built) written as
    ``<root>`` in their text (captions name the parameter file they read)."""
    out = {}
    for p in sorted(directory.iterdir()):
        if p.suffix in SUFFIXES:
            text = p.read_text()
            out[p.name] = text.replace(str(root), "<root>") if root else text
    return out


if __name__ == "__main__":
    import tempfile

    if sys.argv[1:] != ["--write"]:
        sys.exit(__doc__)
    with tempfile.TemporaryDirectory() as tmp:
        built = build(Path(tmp))
        shutil.rmtree(EXPECTED, ignore_errors=True)
        EXPECTED.mkdir(parents=True)
        for name, text in tables_of(built, Path(tmp)).items():
            (EXPECTED / name).write_text(text)
    print(f"wrote {len(list(EXPECTED.iterdir()))} tables to {EXPECTED}")
