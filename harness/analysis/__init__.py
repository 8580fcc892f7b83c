"""What a summary says, decided once: BEST (``best``). Read by the reports, the
confirmation stage and ``harness tune``; reads only the summary's rows."""
