"""``harness tune <campaign>``: a campaign's BEST turned into each library's own tuning file.

Per library, one decision table over (P range, message-size range) -> algorithm
(``harness.tuning.Table``), built from the AUTO-vs-BEST table of the campaign's summary
(``harness/analysis/auto_vs_best.py``) and, where it exists, the confirmation stage's verdicts:

- an algorithm replaces AUTO at a measured (P, size) only with statistical support: the
  confirmation stage says ``BEST faster`` (its paired interval excludes 1), or, without a
  confirmation, the campaign's 95 % intervals of BEST and AUTO do not overlap; oversubscribed
  points and ties keep the library's default;
- neighbouring measured sizes with the same decision merge into one range; boundaries fall
  at the geometric mean of the neighbouring measured sizes (likewise for P); nothing is
  extrapolated beyond the smallest and largest measured size or P;
- a rule never covers a call for which the catalogue's ``applies`` condition fails (the
  library would silently run another algorithm): such a point keeps the default.

Outputs, under ``results/<c>/tuning/``: ``decisions.csv`` (every measured point: the
evidence and the decision), ``<library>.json`` (the table, the environment that loads it,
the files), the library's own files (``harness/tuning/<library>.py``), and ``<library>.env``
(the environment lines a site exports to deploy it).
"""

from __future__ import annotations

import hashlib
import importlib
import json
import math
from pathlib import Path

import pandas as pd

from .. import fileio
from ..analysis.auto_vs_best import auto_vs_best
from ..analysis.vocabulary import AUTO, comparable_mask, timed_mask
from ..cells import kind_of
from ..errors import TuneError
from ..libraries import family_of, get_library
from ..results import store as results
from ..results import summary
from ..results.summary import allreduce_rows
from ..results.view import statistic_view
from ..tuning import Rule, Table

ITEMSIZES = (1, 2, 4, 8)  # a rule must apply to calls of every common element size


def campaigns(root: Path) -> list[str]:
    return sorted(p.parent.name for p in Path(root).glob("*/summary.csv"))


def load(root: Path, campaign: str, statistic: str = "mean") -> pd.DataFrame:
    """The campaign's allreduce rows, their times read as ``statistic`` (results/view.py)."""
    path = Path(root) / campaign / "summary.csv"
    if not path.is_file():
        have = campaigns(root)
        raise TuneError(f"campaign {campaign!r} has no results ({path} not found); campaigns "
                        f"with results: {', '.join(have) if have else 'none'}")
    df = allreduce_rows(summary.load(path))
    return statistic_view(df, statistic)


def _main_condition(d: pd.DataFrame) -> dict:
    """The (nodes, dtype, op, timing, buffers) with the most native cells: the conditions
    tuned for."""
    keys = ["nodes", "dtype", "op", "timing", "metric", "buffers"]
    counts = d.groupby(keys, dropna=False).size().sort_values(ascending=False, kind="stable")
    return dict(zip(keys, counts.index[0]))


def _confirmed(store_dir: Path) -> dict:
    """(library, procs, size, dtype, op, buffers) -> the confirmation stage's entry."""
    out = {}
    for path in sorted((store_dir / "confirm").glob("*.json")):
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if not isinstance(doc, dict) or "entries" not in doc:
            continue
        for e in doc["entries"]:
            out[(e["library"], int(e["procs"]), int(e["size"]), e["dtype"], e["op"],
                 e.get("buffers", "reuse"))] = e
    return out


def evidence(df: pd.DataFrame, store_dir: Path) -> tuple[pd.DataFrame, dict]:
    """One row per (library, P, size) of the library's main condition: AUTO, BEST, where the
    verdict comes from, and the decision (``algorithm``: a catalogue name, or "" = AUTO
    kept). Also returns each library's main condition."""
    d = df[comparable_mask(df)]
    if d.empty:
        raise TuneError("the campaign has no native cells without delay: nothing to tune "
                        "(add native:auto and forced native:* algorithms to an experiment)")
    per_lib = d.groupby("library").algorithm.nunique()
    single = sorted(per_lib[per_lib < 2].index)
    if single:
        raise TuneError(f"library {single[0]} has a single native algorithm in the campaign "
                        f"({d[d.library == single[0]].algorithm.iloc[0]}): tuning needs AUTO "
                        f"and at least one forced algorithm")
    if not (d.status == "ok").any():
        raise TuneError("the campaign has no converged native cell (status ok): its numbers "
                        "cannot support a tuning decision")
    conds, parts = {}, []
    for library, dl in d.groupby("library"):
        cond = conds[library] = {k: (v.item() if hasattr(v, "item") else v)
                                 for k, v in _main_condition(dl).items()}
        for k, v in cond.items():
            dl = dl[dl[k].isna()] if pd.isna(v) else dl[dl[k] == v]
        parts.append(dl)
    d = pd.concat(parts)
    table = auto_vs_best(d)
    forced = d[(d.algorithm != AUTO) & timed_mask(d)].sort_values("mean", kind="stable")
    fastest = forced.groupby(["library", "procs", "size"]).head(1).set_index(
        ["library", "procs", "size"])
    confirmed = _confirmed(store_dir)
    rows = []
    for r in table.itertuples():
        cond = conds[r.library]
        lib = get_library(r.library)
        row = {"library": r.library, "procs": int(r.procs), "size": int(r.size),
               "auto_mean": r.auto_mean, "auto_ci_low": r.auto_ci_low,
               "auto_ci_high": r.auto_ci_high, "best": r.best_algorithm,
               "best_mean": r.best_mean, "best_ci_low": r.best_ci_low,
               "best_ci_high": r.best_ci_high, "campaign_verdict": r.verdict,
               "oversubscribed": bool(r.oversubscribed)}
        key = (r.library, int(r.procs), int(r.size))
        if key in fastest.index:  # the fastest forced algorithm, for libraries that need a fill
            f = fastest.loc[key]
            row.update(forced_best=f.algorithm, forced_best_mean=float(f["mean"]),
                       forced_best_ci_low=float(f.ci_low), forced_best_ci_high=float(f.ci_high))
        c = confirmed.get((r.library, int(r.procs), int(r.size), cond["dtype"], cond["op"],
                           cond["buffers"]))
        if c is not None and c.get("best") == row.get("forced_best") and "gain" in c:
            row["forced_best_verdict"] = c["verdict"]  # AUTO vs it, from fresh launches
        if c is not None and c.get("best") == r.best_algorithm and "gain" in c:
            row.update(source="confirmation", verdict=c["verdict"], gain=c["gain"],
                       gain_ci_low=c["gain_ci_low"], gain_ci_high=c["gain_ci_high"])
        else:
            row.update(source="campaign", verdict=r.verdict, gain=r.gain,
                       gain_ci_low=r.gain_low, gain_ci_high=r.gain_high)
        if row["oversubscribed"]:
            row["verdict"] = "oversubscribed"
        faster = row["verdict"] == "BEST faster" and kind_of(r.best_algorithm) == "native"
        row["algorithm"] = str(r.best_algorithm).split(":", 1)[1] if faster else ""
        row["reason"] = (f"{r.best_algorithm} faster ({row['source']})" if faster else
                         {"oversubscribed": "AUTO kept: oversubscribed, no claim",
                          "AUTO is BEST": "AUTO kept: AUTO is BEST",
                          "tie": "AUTO kept: no significant gap",
                          "AUTO faster": "AUTO kept: the confirmation found AUTO faster",
                          }.get(row["verdict"], f"AUTO kept: {row['verdict']}"))
        if faster and r.best_algorithm not in lib.native_names():
            row.update(algorithm="", reason=f"AUTO kept: {r.best_algorithm} not in the catalogue")
        rows.append(row)
    return pd.DataFrame(rows), conds


def _bounds(values: list[int], integer_step: int = 1) -> list[tuple[int, int | None]]:
    """[lo, hi) around each sorted measured value: boundaries at the geometric mean of
    neighbours (rounded up to ``integer_step``), the outer ones at the extremes (no
    extrapolation)."""
    def mid(a, b):
        m = math.sqrt(a * b)
        return int(math.ceil(m / integer_step) * integer_step)
    out = []
    for i, v in enumerate(values):
        lo = values[0] if i == 0 else max(mid(values[i - 1], v), values[i - 1] + 1)
        hi = values[-1] + 1 if i == len(values) - 1 else max(mid(v, values[i + 1]), v + 1)
        out.append((lo, hi))
    return out


def _applies(lib, algorithm: str, procs_range: tuple[int, int], size_lo: int) -> bool:
    """The catalogue's condition holds for every P in the range at the smallest call of the
    size range, whatever the element size (conditions grow with count)."""
    entry = lib.native(algorithm)
    for procs in range(procs_range[0], procs_range[1] + 1):
        for itemsize in ITEMSIZES:
            count = max(1, -(-size_lo // itemsize))
            if entry.not_applicable(count, procs, itemsize):
                return False
    return True


def build(ev: pd.DataFrame, library: str) -> tuple[Table, pd.DataFrame]:
    """The decision table of ``library`` from its evidence rows; returns the table and the
    rows with the rule ranges filled in (``procs_lo/hi``, ``size_lo/hi``)."""
    lib = get_library(library)
    e = ev[ev.library == library].sort_values(["procs", "size"]).copy()
    procs = sorted(int(x) for x in e.procs.unique())
    p_ranges = dict(zip(procs, [(lo, hi - 1) for lo, hi in _bounds(procs)]))
    per_p: dict[int, list[Rule]] = {}
    for p in procs:
        g = e[e.procs == p]
        sizes = [int(x) for x in g["size"]]
        for (idx, row), (lo, hi) in zip(g.iterrows(), _bounds(sizes)):
            alg = row["algorithm"]
            if alg and not _applies(lib, alg, p_ranges[p], lo):
                if _applies(lib, alg, p_ranges[p], int(row["size"])):
                    lo = int(row["size"])  # the measured size itself is safe; the gap below not
                else:
                    e.loc[idx, ["algorithm", "reason"]] = ["", "AUTO kept: the catalogue's "
                                                           "condition fails in the range"]
                    alg = ""
            e.loc[idx, ["size_lo", "size_hi", "procs_lo", "procs_hi"]] = [lo, hi, *p_ranges[p]]
        rules: list[Rule] = []
        for _, row in e[e.procs == p].iterrows():
            if not row["algorithm"]:
                continue
            lo, hi = int(row["size_lo"]), int(row["size_hi"])
            if rules and rules[-1].algorithm == row["algorithm"] and rules[-1].size_hi == lo:
                rules[-1] = Rule(rules[-1].procs_lo, rules[-1].procs_hi, rules[-1].size_lo, hi,
                                 row["algorithm"])
            else:
                rules.append(Rule(*p_ranges[p], lo, hi, row["algorithm"]))
        per_p[p] = rules
    # neighbouring P ranges with the same size rules become one P range
    merged: list[Rule] = []
    prev: list[Rule] | None = None
    for p in procs:
        rules = per_p[p]
        same = prev is not None and len(prev) == len(rules) and all(
            (a.size_lo, a.size_hi, a.algorithm) == (b.size_lo, b.size_hi, b.algorithm)
            for a, b in zip(prev, rules)) and rules and prev[0].procs_hi + 1 == rules[0].procs_lo
        if same and all(_applies(lib, r.algorithm, (prev[0].procs_lo, r.procs_hi), r.size_lo)
                        for r in rules):
            n = len(rules)
            merged[-n:] = [Rule(a.procs_lo, b.procs_hi, a.size_lo, a.size_hi, a.algorithm)
                           for a, b in zip(merged[-n:], rules)]
            prev = merged[-n:]
        else:
            merged.extend(rules)
            prev = rules
    merged.sort(key=lambda r: (r.procs_lo, r.size_lo))
    mod = writer(library)
    if merged and mod is not None and not getattr(mod, "KEEPS_DEFAULT", True):
        return _fill(lib, e, p_ranges)
    return Table(library, tuple(merged)), e


def _fill(lib, e: pd.DataFrame, p_ranges: dict) -> tuple[Table, pd.DataFrame]:
    """For a library whose tuning file cannot keep its default selection around a rule
    (Intel MPI runs its preset 0 there): every measured point without a rule takes its
    fastest forced algorithm, provided none of those is slower than AUTO beyond noise (the
    confirmation's verdict, else non-overlapping 95 % intervals); otherwise no rule at all,
    since the gain of the rules would cost a loss elsewhere."""
    keep = e.algorithm == ""
    slower = []
    for idx, row in e[keep].iterrows():
        alg = str(row.get("forced_best") or "")
        verdict = row.get("forced_best_verdict")
        worse = (verdict == "AUTO faster") if isinstance(verdict, str) and verdict else \
            not (float(row.get("forced_best_ci_low", math.inf)) <= float(row["auto_ci_high"]))
        if not alg or worse or bool(row["oversubscribed"]) \
                or not _applies(lib, alg.split(":", 1)[1], p_ranges[int(row.procs)],
                                int(row.size_lo)):
            slower.append(f"{alg or 'nothing'} at P={row.procs} {row['size']} B")
        else:
            e.loc[idx, ["algorithm", "reason"]] = [
                alg.split(":", 1)[1], f"{alg}: fills a gap (the library's file cannot keep its "
                                      f"default; not slower than AUTO beyond noise)"]
    if slower:
        e.loc[:, "algorithm"] = ""
        e.loc[:, "reason"] = ("AUTO kept everywhere: the library's file cannot keep its default "
                              "around a rule, and the fill would be slower than AUTO ("
                              + "; ".join(slower) + ")")
        return Table(lib.name, ()), e
    rules: list[Rule] = []
    for _, row in e.sort_values(["procs", "size"]).iterrows():
        lo, hi, p = int(row.size_lo), int(row.size_hi), p_ranges[int(row.procs)]
        if rules and rules[-1].algorithm == row.algorithm and rules[-1].size_hi == lo \
                and (rules[-1].procs_lo, rules[-1].procs_hi) == p:
            rules[-1] = Rule(*p, rules[-1].size_lo, hi, row.algorithm)
        else:
            rules.append(Rule(*p, lo, hi, row.algorithm))
    return Table(lib.name, tuple(rules)), e


def writer(library: str):
    """The module that writes the tuning files of ``library``'s family
    (``harness/tuning/<family>.py``); the files themselves go under the installation's name."""
    family = family_of(library)
    try:
        return importlib.import_module(f"harness.tuning.{family}")
    except ModuleNotFoundError as exc:  # a library without a writer; any other import error
        if exc.name != f"harness.tuning.{family}":  # is a bug and must show
            raise
        return None


def env_lines(env: dict) -> str:
    import shlex

    return "".join(f"export {k}={shlex.quote(str(v))}\n" for k, v in sorted(env.items()))


def refined_points(path: Path) -> list[tuple[int, int]]:
    """The held-out points an earlier verification found AUTO faster at, inside a rule: a
    later ``harness tune`` keeps the rules cut there."""
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return []
    return [(int(e["procs"]), int(e["size"])) for e in doc.get("refined") or []]


def exclude(table: Table, points, measured: dict) -> Table:
    """``table`` with no rule covering any (P, size) of ``points`` (held-out points where
    the verification found AUTO faster): a rule around such a point is cut at the geometric
    mean between it and the nearest measured size the rule keeps on either side."""
    rules = list(table.rules)
    for p, h in points:
        out = []
        for r in rules:
            if not r.matches(p, h):
                out.append(r)
                continue
            inside = [s for s in measured.get(p, []) if r.matches(p, s)]
            below, above = [s for s in inside if s < h], [s for s in inside if s > h]
            if below:
                out.append(Rule(r.procs_lo, r.procs_hi, r.size_lo,
                                max(int(math.ceil(math.sqrt(max(below) * h))), max(below) + 1),
                                r.algorithm))
            if above:
                out.append(Rule(r.procs_lo, r.procs_hi,
                                min(int(math.ceil(math.sqrt(min(above) * h))), min(above)),
                                r.size_hi, r.algorithm))
        rules = out
    return Table(table.library, tuple(rules))


def tune(root: Path, campaign: str, out_dir: Path | None = None, log=print,
         only: str | None = None, avoid=(), statistic: str = "mean") -> dict:
    """Build every library's table (``only``: one library's) and write its files; returns
    {library: document}. ``avoid``: (P, size) points no rule may cover (``exclude``);
    ``statistic``: the times the decisions compare (``report.statistic``)."""
    store_dir = Path(root) / campaign
    out_dir = Path(out_dir or store_dir / "tuning")
    ev, conds = evidence(load(root, campaign, statistic), store_dir)
    docs, frames = {}, []
    old = out_dir / "decisions.csv"
    if only and old.is_file():  # the other libraries' decisions stay as they are
        prev = pd.read_csv(old)
        frames.append(prev[prev.library != only])
    for library in sorted(ev.library.unique()):
        if only and library != only:
            continue
        table, rows = build(ev, library)
        avoid_here = list(avoid) if only else refined_points(out_dir / f"verify-{library}.json")
        if avoid_here:
            mod = writer(library)
            measured = {int(p): sorted(int(x) for x in g["size"]) for p, g in rows.groupby("procs")}
            if mod is not None and not getattr(mod, "KEEPS_DEFAULT", True):
                table = Table(library, ())  # a cut would leave a gap the library cannot keep
            else:
                table = exclude(table, avoid_here, measured)
            rows["avoided"] = "; ".join(f"P={p} {s} B" for p, s in avoid_here)
            for idx, r in rows.iterrows():
                if r.algorithm and table.lookup(int(r.procs), int(r["size"])) is None:
                    rows.loc[idx, ["algorithm", "reason"]] = [
                        "", "AUTO kept: the verification found AUTO faster inside the range"]
        frames.append(rows)
        mod = writer(library)
        lib_dir = out_dir / library
        lib_dir.mkdir(parents=True, exist_ok=True)
        lib = get_library(library)
        try:
            env = mod.write(table, lib, lib_dir) if mod else {}
            if mod and hasattr(mod, "write_json"):  # Intel MPI: also the tuning file
                mod.write_json(table, lib, lib_dir)
        except ValueError as exc:
            raise TuneError(f"{library}: cannot write its tuning files: {exc}") from None
        # a library that ignores a bad file silently (Open MPI) is asked what it loaded
        reason = mod.in_force(env, lib) if env and hasattr(mod, "in_force") else None
        if reason:
            raise TuneError(f"{library}: {reason}")
        notes = list(mod.notes(table, lib)) if hasattr(mod, "notes") else []
        files = sorted(str(p) for p in lib_dir.iterdir() if p.is_file())
        digest = hashlib.sha1(json.dumps([table.to_dict(), env]).encode()
                              + b"".join(Path(f).read_bytes() for f in files)).hexdigest()[:12]
        doc = {"campaign": campaign, "library": library, "condition": conds[library],
               "table": table.to_dict(), "env": env, "files": files, "notes": notes,
               "digest": digest,
               "kept_auto": int((rows.algorithm == "").sum()),
               "replaced": int((rows.algorithm != "").sum()), "made": results.now()}
        fileio.write_json(out_dir / f"{library}.json", doc)
        fileio.atomic_write_text(out_dir / f"{library}.env",
                                  f"# {library}: tuned allreduce selection from campaign "
                                  f"{campaign} (harness tune)\n" + env_lines(env))
        docs[library] = doc
        n = len(table.rules)
        log(f"{library}: {n} rule(s)" + (f" ({doc['replaced']} of {len(rows)} measured points)"
                                         if n else ": AUTO kept everywhere")
            + f" -> {out_dir / (library + '.env')}")
    fileio.atomic_write_text(out_dir / "decisions.csv",
                              pd.concat(frames, ignore_index=True).to_csv(index=False))
    return docs


def environment(root: Path, campaign: str, library: str) -> dict:
    """The environment that loads ``campaign``'s tuning for ``library`` (``native:tuned``);
    KeyError with the remedy when it was not made."""
    path = Path(root) / campaign / "tuning" / f"{library}.json"
    if not path.is_file():
        raise KeyError(f"no tuning of campaign {campaign!r} for {library} ({path} not found); "
                       f"run `harness tune {campaign}` first")
    doc = json.loads(path.read_text())
    # HARNESS_TUNING names the tuning a launch followed (provenance; a new table, a new run)
    return {**doc["env"], "HARNESS_TUNING": f"{campaign}@{doc.get('digest', '')}"}
