"""Paper tables and figures built from a campaign's ``summary.csv`` (AUTO vs BEST, after
Castelló et al. 2021, Figs. 5-6): ``style`` (colours, markers, rcParams, atomic saving),
``tables`` (``auto_vs_best``, ``write_table``) and ``figures`` (``auto_vs_best_figure``,
``make_all``; ``python -m harness.report.figures SUMMARY_CSV TABLES_DIR FIGURES_DIR``)."""
