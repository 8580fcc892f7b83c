"""Every concept of the summary is defined once (docs/design.md, "Vocabulary"): the typed summary
(harness/results/summary.py) fills the defaults and holds the flags as booleans, each cell's
kind comes from harness/cells.py, what a row means (timed, comparable native cell,
oversubscribed, AUTO) from harness/analysis/vocabulary.py, BEST from harness/analysis/best.py.

The check greps the harness package for re-definitions of each concept and names every one as
file:line. A file may use a pattern for another reason than re-defining the concept; such files
are listed per concept in ``ALLOWED`` with the reason. The checker is tested on planted
re-definitions, so that it cannot pass by matching nothing."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest

HARNESS = Path(__file__).resolve().parent.parent / "harness"

# reasons shared by several files
CATALOGUE = "parses an algorithm name against the catalogue (native:<name> is forced by the library's variables)"
CONFIG = "reads the config's algorithm names and globs"
LABEL = "a name's label or colour: the prefix stripped for display"


@dataclass(frozen=True)
class Concept:
    name: str
    where: str  # its one definition
    pattern: re.Pattern
    allowed: dict = field(default_factory=dict)  # path relative to harness/ -> reason


CONCEPTS = (
    Concept("the timed statuses", "results/store.py: TIMED",
            re.compile(r"""[(\[{]\s*["']ok["']\s*,\s*["']not-converged["']\s*[)\]}]"""
                       r"""|[(\[{]\s*["']not-converged["']\s*,\s*["']ok["']\s*[)\]}]"""),
            {"results/store.py": "the definition (TIMED)",
             "results/launches.py": "USABLE: store.py imports launches.py, which cannot import "
                                    "TIMED back (test_launches_usable_is_timed holds them equal)"}),
    Concept("timed rows", "analysis/vocabulary.py: timed_mask, is_timed",
            re.compile(r"""\.isin\(\s*(?:\w+\.)?TIMED\s*\)"""
                       r"""|def\s+_?(?:is_)?timed(?:_(?:rows|mask|undelayed))?\s*\("""),
            {"analysis/vocabulary.py": "the definition"}),
    Concept("a flag read from text", "results/summary.py (FLAGS as booleans); "
            "analysis/vocabulary.py: oversubscribed_mask, is_oversubscribed",
            re.compile(r"""\.lower\(\)\s*(?:==|in\b|\.eq\()\s*\(?\s*["']true["']"""
                       r"""|==\s*["']True["']|["']True["']\s*:"""
                       r"""|def\s+_?(?:truthy|true|crowded)\s*\("""),
            {"results/summary.py": "the definition (_flag: the file's text to a boolean, once)",
             "analysis/vocabulary.py": "the definition (is_oversubscribed of one row or dict)",
             "report/findings.py": "reads the report's own CSV tables (tuned.csv's held_out), "
                                   "not the summary"}),
    Concept("a cell's kind from its algorithm's name", "cells.py: kind_of, SELECTORS, PROBES",
            re.compile(r"""startswith\(\s*["']native:["']\s*\)"""
                       r"""|["']native:tuned["']\s*,\s*["']native:autotuner["']"""
                       r"""|["']pingpong["']\s*,\s*["']reduce_local["']"""
                       r"""|isin\(\s*SELECT(?:ING|ORS)\s*\)"""),
            {"cells.py": "the definition (kind_of)",
             "libraries.py": CATALOGUE,
             "tuning/impi.py": "writes the library's own tuning file, which names the "
                               "catalogue entry without the prefix",
             "tuning/openmpi.py": "writes the library's own tuning file, which names the "
                                  "catalogue entry without the prefix",
             "algorithms/registry.py": CATALOGUE + ": a harness algorithm or the library's own",
             "algorithms/suara.py": CATALOGUE + ": SUARA2's sub-allreduce may be the library's",
             "campaign/config.py": CONFIG,
             "campaign/cutdown.py": CONFIG,
             "campaign/plan.py": CONFIG + ", expanded against the catalogue; a run's forcing "
                                 "environment",
             "measure/bench.py": "inside a launch: the library's allreduce, forced by the "
                                 "environment, or a harness algorithm",
             "measure/counting.py": "inside a launch: only a harness algorithm's messages "
                                    "are counted",
             "simulate/cell.py": "a simulation runs a harness algorithm; the library's own "
                                 "allreduce is simulated by SMPI",
             "cli/installation.py": "a command-line algorithm name checked against the catalogue",
             "cli/run.py": "a command-line algorithm name checked against the catalogue",
             "report/style.py": LABEL,
             "report/tables.py": LABEL}),
    Concept("a condition's default refilled", "results/summary.py: DEFAULTS",
            re.compile(r"""fillna\(\s*["'](?:reuse|percall|single|none|float64|sum|mean)["']\s*\)"""
                       r"""|["'](?:nodes|max_delay|late_rank|dtype|op|delay|metric|buffers|timing|"""
                       r"""thread_level)["']\]\.fillna\("""),
            {"results/auto_ran.py": "the store's layer: it builds the summary's auto_ran column "
                                    "from the raw rows, before any reader types them"}),
    Concept("AUTO", "cells.py: AUTO (with the selectors and probes; the vocabulary offers it)",
            re.compile(r"""^\s*AUTO\s*(?:,[^=\n]*)?=\s*["']native:auto["']"""),
            {"cells.py": "the definition, in the base layer every other layer may import"}),
)


def redefinitions(root: Path = HARNESS) -> list[str]:
    """``path:line: concept (defined in ...): the line`` for every line of a ``.py`` file under
    ``root`` that re-defines a concept outside the files ``ALLOWED`` for it; comment lines
    are skipped."""
    found = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if line.lstrip().startswith("#"):
                continue
            for concept in CONCEPTS:
                if rel not in concept.allowed and concept.pattern.search(line):
                    found.append(f"harness/{rel}:{number}: {concept.name} (defined in "
                                 f"harness/{concept.where}): {line.strip()}")
    return found


def test_every_concept_is_defined_once():
    found = redefinitions()
    assert not found, "re-definitions of the vocabulary:\n" + "\n".join(found)


def test_the_allowed_files_exist():
    """A whitelisted file that was renamed or removed leaves a stale reason behind."""
    stale = [f"{c.name}: {rel}" for c in CONCEPTS for rel in c.allowed
             if not (HARNESS / rel).is_file()]
    assert not stale, stale


PLANTED = {
    "the timed statuses": 'ok = d["status"].isin(["ok", "not-converged"])',
    "timed rows": "def timed_rows(d):",
    "a flag read from text": 'crowded = str(r.get("oversubscribed")).lower() == "true"',
    "a cell's kind from its algorithm's name": 'nat = d[d["algorithm"].str.startswith("native:")]',
    "a condition's default refilled": 'd = d[d["timing"].fillna("percall") == "percall"]',
    "AUTO": 'AUTO = "native:auto"',
}


def test_a_numeric_default_refilled_is_found(tmp_path):
    (tmp_path / "planted.py").write_text('n = d["nodes"].fillna(1)\n')
    assert [f.split(": ")[1] for f in redefinitions(tmp_path)] == ["a condition's default refilled (defined in harness/results/summary.py"]


@pytest.mark.parametrize("concept", sorted(PLANTED))
def test_a_planted_redefinition_is_named_by_file_and_line(tmp_path, concept):
    planted = tmp_path / "report" / "planted.py"
    planted.parent.mkdir()
    planted.write_text('"""A report."""\n\n# ' + PLANTED[concept] + "\n" + PLANTED[concept] + "\n")
    found = redefinitions(tmp_path)
    assert len(found) == 1 and found[0].startswith(f"harness/report/planted.py:4: {concept} "), found


def test_a_file_allowed_for_one_concept_is_checked_for_the_others(tmp_path):
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "store.py").write_text(
        'TIMED = ("ok", "not-converged")\nover = str(v).lower() == "true"\n')
    found = redefinitions(tmp_path)
    assert len(found) == 1 and found[0].startswith(
        "harness/results/store.py:2: a flag read from text "), found


def test_launches_usable_is_timed():
    from harness.results import launches, store

    assert launches.USABLE == store.TIMED
