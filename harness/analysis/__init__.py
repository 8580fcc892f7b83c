"""What a summary says, decided once: BEST (``best``), AUTO vs BEST (``auto_vs_best``), the
fits of a summary (``fit``). Read by the reports, the confirmation stage and ``harness tune``;
reads only the summary's rows."""
