"""A campaign from its config to its results: the config and its validation (``config``), the
runs it plans (``plan``), their job scripts and launches (``runner``), the Snakemake glue
(``workflow``), the confirmation, tuning and verification stages (``confirm``, ``tune``,
``tune_verify``), a cell measured again (``rerun``), the cut-down of a paper config
(``cutdown``) and the SGD stage (``sgd_stage``).
Imports the layers below it, never the reports or the command line (docs/design.md,
"Layers")."""
