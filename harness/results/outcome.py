"""How a campaign ended, in one line: the cells of its summary that should have given a time
and did not (``failed``, ``timeout``, ``wrong``), and the exit status that says so.

``harness status`` ends with this line and exits ``FAILED_EXIT`` when there are such cells,
unless the config sets ``allow_failures: true``; the Snakefile's ``onsuccess`` prints it at
the end of every workflow. ``not-applicable`` cells (the plan found the catalogue's
condition excluding them, never launched) and ``not-converged`` ones are not failures.
"""

from __future__ import annotations

from . import store as results

FAILED = ("failed", "timeout", "wrong")  # in this order in the line
FAILED_EXIT = 3  # harness status's exit status when the campaign has such cells


def counts(statuses) -> dict[str, int]:
    """Status -> number of cells, for every status of ``FAILED``."""
    statuses = list(statuses)
    return {s: statuses.count(s) for s in FAILED}


def line(statuses, campaign: str, allow_failures: bool = False) -> tuple[int, str]:
    """(cells failed, timed out or wrong; the campaign's last line) of the summary's
    ``status`` column ``statuses``."""
    statuses = [str(s) for s in statuses]
    found = counts(statuses)
    bad = sum(found.values())
    if not bad:
        return 0, (f"campaign {campaign}: no cell failed, timed out or was wrong "
                   f"({len(statuses)} cells)")
    said = ", ".join(f"{n} {s}" for s, n in found.items())
    ending = ("allow_failures: true, so this is not an error" if allow_failures else
              f"`harness retry {campaign}` measures the failed and timeout ones again; set "
              f"allow_failures: true in the config to accept them")
    return bad, (f"campaign {campaign}: {bad} of {len(statuses)} cells gave no result: {said} "
                 f"(why: the error column of the summary); {ending}")


def of_store(store: results.CampaignStore, allow_failures: bool = False) -> tuple[int, str] | None:
    """``line`` of the store's summary; None when it has no readable summary."""
    import pandas as pd

    try:
        df = pd.read_csv(store.summary, usecols=["status"])
    except (OSError, ValueError):
        return None
    return line(df["status"].fillna(""), store.campaign, allow_failures)
