"""Paper tables and figures built from a campaign's ``summary.csv`` (and, for a few, the raw
repetitions, ``model_params.json`` or the stages' documents): one module per paper or kind of
output, each with a ``make_*`` function the workflow's rules call. ``registry.py`` names them
all and gives them one command line, ``python -m harness.report NAME ARGUMENTS...``
(``--list``). Shared: ``style`` (colours, markers, rcParams, atomic saving) and ``tables``
(formatting; the rows come from ``harness.analysis``)."""
