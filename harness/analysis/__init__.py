"""What a summary says, decided once: BEST (``best``), AUTO vs BEST (``auto_vs_best``), the
fits of a summary (``fit``) and the network parameters fitted from its ping-pong and
local-reduction cells (``netparams``, ``model_params.json``). Read by the reports, the
confirmation stage and ``harness tune``; reads only the summary's rows."""
