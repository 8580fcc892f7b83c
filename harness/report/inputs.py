"""What every report is made from: ``make(inputs) -> list[Path]`` (``registry.py``).

``Inputs.load`` reads a campaign's typed summary once (``harness.results.summary.load``) under
the campaign's statistic (``harness.results.view.statistic_view``: the time columns hold the
mean or the median), and ``model_params.json`` when it is given; the reports read nothing
else of the summary. The store directory (``results/<c>/``) is there for the reports that read
more than the summary: the PAP cells' arrivals in ``raw/``, the confirmation's
``confirm/<group>.json``, the tuning's ``tuning/verify-<library>.json``, an SGD experiment's
``sgd/<experiment>/*.json``. ``documents`` names those stage documents: the workflow's rules pass their inputs, the
command line what the store holds (the registry's ``reads``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

import pandas as pd

from .. import paths
from ..results.store import SUMMARY_COLUMNS
from ..results.summary import load as typed_summary
from ..results.view import statistic_view


@dataclass(frozen=True, eq=False)
class Inputs:
    summary: pd.DataFrame  # the typed summary under the statistic view (no rows: none yet)
    tables: Path  # results/<c>/tables
    figures: Path  # figures/<c>
    store: Path  # results/<c>: raw/, confirm/, tuning/, sgd/
    params: dict | None = None  # model_params.json, when given
    params_path: Path | None = None
    statistic: str = "mean"  # what the time columns hold (report.statistic)
    reference: str | None = None  # the library the cross-library report divides by
    libraries: tuple[str, ...] = ()  # the libraries whose figures must exist
    models: tuple[str, ...] = ()  # the workloads' models (Fig. 7)
    experiment: str | None = None  # the SGD experiment
    documents: tuple[Path, ...] = ()  # the stage documents read (see above)

    @classmethod
    def load(cls, store, tables=None, figures=None, *, summary=None, params=None,
             statistic: str = "mean", **options) -> Inputs:
        """The inputs of a campaign's reports: ``store`` its directory; ``summary`` a path or a
        frame (default ``<store>/summary.csv``; none there: no rows); ``params`` the path of
        ``model_params.json`` (None: not read); ``tables`` and ``figures`` default to
        ``<store>/tables`` and ``figures/<c>``; ``options``: the other fields."""
        store = Path(store)
        source = store / "summary.csv" if summary is None else summary
        if isinstance(source, pd.DataFrame) or Path(source).is_file():
            frame = typed_summary(source)
        else:
            frame = typed_summary(pd.DataFrame(columns=SUMMARY_COLUMNS))
        path = Path(params) if params is not None else None
        if path is not None and not path.is_file():
            raise ValueError(f"model parameters {path}: no such file")
        doc = json.loads(path.read_text()) if path is not None else None
        for key in ("libraries", "models", "documents"):
            if options.get(key) is not None:
                options[key] = tuple(options[key])
        return cls(summary=statistic_view(frame, statistic),
                   tables=Path(tables or store / "tables"),
                   figures=Path(figures or paths.figures_root() / store.name),
                   store=store, params=doc, params_path=path,
                   statistic=statistic, **{k: v for k, v in options.items() if v is not None})

    @classmethod
    def of(cls, summary_csv, tables, figures, **options) -> Inputs:
        """``load`` of a summary file, its directory as the store."""
        return cls.load(Path(summary_csv).parent, tables, figures, summary=summary_csv,
                        **options)

    def but(self, **changes) -> Inputs:
        """These inputs with some fields changed (``dataclasses.replace``)."""
        return replace(self, **changes)

