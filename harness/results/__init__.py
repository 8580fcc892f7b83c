"""What a campaign has measured, on disk: the store of run documents, raw files and the
summary (``store``), the launch-level statistics a summary row combines (``launches``), the
consistency check (``check``) and the retry of failed runs (``retry``). Imports only the base
and domain layers (docs/design.md, "Layers")."""
