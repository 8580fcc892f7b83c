"""Paper tables and figures built from a campaign's ``summary.csv`` (and, for a few, the raw
repetitions, ``model_params.json`` or the stages' documents): one module per paper or kind of
output, each with one function, ``make(inputs) -> list[Path]`` (``inputs.py``), which the
workflow's rules call. ``registry.py`` names them all; ``python -m harness.report NAME --store
results/<c>`` writes one (``__main__.py``; ``--list``, ``--help``). Shared: ``style`` (colours, markers, rcParams, atomic saving) and ``tables``
(formatting; the rows come from ``harness.analysis``)."""
