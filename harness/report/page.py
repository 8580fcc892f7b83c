"""The campaign's report page, ``results/<c>/report/index.html``: one self-contained HTML file
(figures inline as PNG data, a few lines of plain JavaScript, no network) that reads like a
paper: contents; the campaign (config, commit, libraries, hosts, cores, dates, the store
check, what the times are, a warning when a run was oversubscribed); the findings
(``findings.py``); one section per report of ``registry.py`` in its order (what it
reproduces, its claims, figures, then tables as ``tables.py`` rendered them to HTML: the
page parses no table); the cells by status per experiment (from the store's run specs and
not-applicable run documents) with the reasons of the unfinished ones; the cells, sortable
and filtered, and how to measure one again; links to the raw files.

``make_page(inputs, out, config, configfile)`` takes the campaign's ``inputs.Inputs``.
"""

from __future__ import annotations

import base64
import html
import io
import os
from pathlib import Path

import pandas as pd

from ..analysis.status import status_counts, unfinished_reasons
from ..fileio import atomic_write_text, read_json
from ..results.store import CampaignStore, load_run_docs, oversubscribed
from ..results.view import STATISTIC_LABEL
from ..units import format_rate, format_time
from .findings import Finding, findings
from .registry import REPORTS, Report, caption_of, report_of

COLUMNS = ["cell_id", "experiment", "library", "algorithm", "params", "procs", "nodes", "size",
           "dtype", "op", "delay", "max_delay", "status", "n", "mean", "ci_low", "ci_high",
           "median", "t_rejected", "oversubscribed", "error"]
WIDTH = 1100  # figures wider than the page are scaled down to it (the files keep theirs)

STYLE = """
body{font:15px/1.5 Georgia,serif;margin:0 auto;max-width:1100px;padding:1em 2em;color:#222}
h1{font-size:1.6em}h2{font-size:1.25em;border-bottom:1px solid #ccc;margin-top:2.2em}
.toc{list-style:none;padding-left:1em}.warn{background:#fff3cd;border:1px solid #e0c36c;padding:.5em}
table{border-collapse:collapse;font:12px/1.3 system-ui,sans-serif}td,th{border:1px solid #ddd;padding:2px 6px}
th{background:#f4f4f4;position:sticky;top:0}th[data-sort]{cursor:pointer}td.num{text-align:right}
figure{margin:1.2em 0}figure img{max-width:100%;border:1px solid #eee}
.figures{display:grid;grid-template-columns:1fr 1fr;grid-auto-flow:dense;gap:0 1.5em}.figures figure{margin:.6em 0}
.figures .wide{grid-column:span 2}
figcaption,.tcap,.note{color:#444;font-size:13px}.claims li{margin:.3em 0}.evidence{color:#555}
details{margin:.4em 0}summary{cursor:pointer;color:#555;font-size:13px}
.status-failed,.status-wrong,.status-timeout{color:#a00}.status-not-converged{color:#a60}
code{font-size:12px}.scroll{max-height:45vh;overflow:auto}
"""

SCRIPT = """
function sortBy(th){
  const table=th.closest('table'), body=table.tBodies[0];
  const i=[...th.parentNode.children].indexOf(th);
  const asc=th.dataset.dir!=='asc'; th.dataset.dir=asc?'asc':'desc';
  const key=r=>{const c=r.children[i];const v=c.dataset.v??c.textContent;
    const x=parseFloat(v);return isNaN(x)?v:x};
  const rows=[...body.rows].sort((a,b)=>{const x=key(a),y=key(b);
    const c=(typeof x===typeof y)?(x<y?-1:x>y?1:0):(typeof x==='number'?-1:1);
    return asc?c:-c});
  rows.forEach(r=>body.appendChild(r));
}
function filterCells(box){
  const q=box.value.toLowerCase();
  for(const r of document.getElementById('cells').tBodies[0].rows)
    r.style.display=r.textContent.toLowerCase().includes(q)?'':'none';
}
document.querySelectorAll('th[data-sort]').forEach(th=>th.addEventListener('click',()=>sortBy(th)));
"""


def _e(x) -> str:
    return html.escape("" if x is None or (isinstance(x, float) and x != x) else str(x))


def _rel(path: Path, base: Path) -> str:
    return os.path.relpath(path, base)


def _table(head, rows, attrs: str = "", th: str = "<th>") -> str:
    """An HTML table: the ``head`` cells (text) and ``rows`` (each its cells' HTML)."""
    heads = "".join(f"{th}{_e(h)}</th>" for h in head)
    return (f"<table{attrs}><thead><tr>{heads}</tr></thead><tbody>"
            + "\n".join(f"<tr>{r}</tr>" for r in rows) + "</tbody></table>")


def _documents(store: Path) -> tuple[list[dict], dict[str, list[str]]]:
    """The run documents (read as the summary reads them: a damaged one rebuilt from its
    journal), and each cell's experiments as the run specs and the not-applicable run
    documents record them."""
    docs = list(load_run_docs(CampaignStore(store.parent, store.name)).values())
    specs = []
    for p in sorted((store / "jobs").glob("*.json")):
        try:
            specs.append(read_json(p))
        except (OSError, ValueError):
            continue
    experiments: dict[str, list[str]] = {}
    for doc in [*docs, *specs]:
        for cell, names in (doc.get("experiments") or {}).items():
            experiments.setdefault(cell, list(names))
    return docs, experiments


def _header(name: str, config: str, cells: int, docs: list[dict]) -> str:
    provs = [d.get("provenance") or {} for d in docs]

    def listed(values) -> str:  # every value once, sorted
        return ", ".join(map(str, sorted({v for v in values if v}))) or "unknown"

    libs = sorted({(d.get("library"), p.get("library_version")) for d, p in zip(docs, provs)
                   if p.get("library_version")})
    started = sorted(d.get("started") for d in docs if d.get("started"))
    finished = sorted(d.get("finished") for d in docs if d.get("finished"))
    rows = [("campaign", name),
            ("config", config or listed(p.get("config_hash") for p in provs)),
            ("git commit", listed(p.get("git_commit") for p in provs)),
            ("libraries", "; ".join(f"{lib}: {v}" for lib, v in libs) or "no run yet"),
            ("hosts", listed(h for p in provs for h in (p.get("nodes") or p.get("hosts") or []))),
            ("cores per node", listed(c for p in provs for c in (p.get("cores") or []))),
            ("measured", f"{started[0] if started else '?'} to {finished[-1] if finished else '?'}"),
            ("cells", str(cells))]
    simulated = {p["platform"]["id"]: p for p in provs if p.get("simulated") and p.get("platform")}
    if simulated:
        rows.insert(4, ("simulated on", "; ".join(_platform_line(p) for p in simulated.values())))
    out = ["<table>"] + [f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in rows]
    out.append("</table>")
    if simulated:
        out.append('<p class="warn">Some numbers are simulated, not measured: the cells of the '
                   "installations named &lt;family&gt;@&lt;platform&gt;, labelled "
                   "\u201csimulated\u201d in every table and figure, run on a SimGrid platform "
                   "(the harness's algorithms unchanged, each library's through SMPI's copy). "
                   "No claim sets them beside measured numbers.</p>")
    if any(oversubscribed(p) for p in provs):
        out.append('<p class="warn">Some runs had more ranks than cores (oversubscribed): '
                   "their times are not comparable, and no win or loss is drawn from them "
                   "(marked ‡; their rows are folded under each table).</p>")
    return "\n".join(out)


def _platform_line(prov: dict) -> str:
    """One simulated platform in words: its name and id, shape, network, reduction rate,
    calibration and simulator."""
    info = prov["platform"]
    p = info.get("platform") or {}
    rate = info.get("reduce_rate")
    cal = info.get("calibration") or {}
    return (f"{info.get('name')} ({info.get('id')}): {p.get('nodes')} nodes x "
            f"{p.get('cores_per_node')} cores, {p.get('topology', 'cluster')}, latency "
            f"{format_time(p.get('latency', 0))}, {format_rate(p.get('bandwidth', 0))} per link; "
            f"reductions {format_rate(rate) if rate else 'free'}"
            + (f"; calibrated from campaign {cal.get('campaign')}" if cal.get("campaign") else "")
            + f"; {prov.get('simulator') or 'SimGrid'}")


def _check(store: Path) -> str:
    try:
        verdict = read_json(store / "check.json")
        said = (f"consistent ({verdict['cells']} cells, {verdict['repetitions']} repetitions "
                "checked)" if verdict.get("ok")
                else f"{len(verdict['problems'])} problem(s): see check.json")
    except (OSError, ValueError, KeyError):
        said = "not run"
    return f"<p>Store check (<code>harness check</code>): {_e(said)}.</p>"


def _statistic(statistic: str) -> str:
    """What the tables' and figures' times are (``report.statistic``)."""
    other = "median" if statistic == "mean" else "mean"
    return (f"<p>Times, BEST and the AUTO-vs-BEST verdicts are built on the "
            f"{_e(STATISTIC_LABEL[statistic])} (<code>report.statistic: {_e(statistic)}</code>; "
            f"<code>{other}</code> builds them on the {_e(STATISTIC_LABEL[other])}). The cells "
            "table gives both, and <code>t_rejected</code>: which assumption of the t-interval "
            "(normality, independence) a cell's repetitions reject.</p>")


def _claim(c: Finding, page_dir: Path) -> str:
    return (f'<li>{_e(c.text)} <span class="evidence">({_e(c.evidence)}; '
            f'<a href="{_e(_rel(c.table, page_dir))}">{_e(c.table.stem)}</a>)</span></li>')


def _findings(claims: list[Finding], ties: int, page_dir: Path) -> str:
    """The claims of the campaign's tables (``findings.py``), one line each with its evidence
    and a link to its table; ``ties`` counted."""
    tie_text = f" {ties} comparison(s) showed no difference (ties, not listed)." if ties else ""
    if not claims:
        return (f'<p id="findings-list">No claim: no comparison of this campaign shows a '
                f"difference with statistical support.{_e(tie_text)}</p>")
    items = "".join(_claim(c, page_dir) for c in claims)
    return f'<ul id="findings-list" class="claims">{items}</ul><p>{_e(tie_text.strip())}</p>'


def _outputs(tables_dir: Path, figures_dir: Path) -> dict[str, dict[str, list[Path]]]:
    """report name ('' for none) -> {"figures": [...], "tables": [...]} present on disk, each
    in its report's declared order."""
    out: dict = {}
    for kind, paths in (("tables", tables_dir.glob("*.csv")), ("figures", figures_dir.glob("*.png"))):
        for p in sorted(paths):
            report = report_of(p.stem)
            out.setdefault(report.name if report else "", {"tables": [], "figures": []})[kind].append(p)
    for name, files in out.items():
        order = [s.replace("{library}", "").replace("{experiment}", "")
                 for s in (REPORTS[name].tables + REPORTS[name].figures if name else ())]
        for kind in files:
            files[kind].sort(key=lambda p: next((i for i, s in enumerate(order)
                                                 if p.stem.startswith(s)), 99))
    return out


def _files(path: Path, page_dir: Path) -> str:
    return ", ".join(f'<a href="{_e(_rel(q, page_dir))}">{_e(q.suffix[1:])}</a>'
                     for q in sorted(path.parent.glob(path.stem + ".*")))


def _png(path: Path) -> tuple[str, bool]:
    """The figure as PNG data for the page: scaled down to ``WIDTH`` when it is wider, in 256
    colours (a third of the bytes for line plots and maps), unless the file is smaller; and
    whether it is wide (drawn across both columns of the page's figures)."""
    data, wide = path.read_bytes(), False
    try:
        from PIL import Image

        with Image.open(io.BytesIO(data)) as img:
            small, wide = img.convert("RGB"), img.width > 1.6 * img.height
            if small.width > WIDTH:
                small = small.resize((WIDTH, round(small.height * WIDTH / small.width)),
                                     Image.LANCZOS)
            buf = io.BytesIO()
            small.quantize(colors=256, method=Image.Quantize.MEDIANCUT,
                           dither=Image.Dither.NONE).save(buf, format="PNG", optimize=True)
            data = min(data, buf.getvalue(), key=len)
    except (ImportError, OSError):
        pass
    return base64.b64encode(data).decode(), wide


def _figure(report: Report | None, path: Path, page_dir: Path) -> str:
    _, what, read = caption_of(report, path.stem) if report else ("", path.stem, "")
    cap = (f"<figcaption><b>{_e(what)}</b> ({_e(path.name)}). {_e(read)}. Files: "
           f"{_files(path, page_dir)}</figcaption>")
    if path.suffix == ".png":
        data, wide = _png(path)
        return (f'<figure{" class=wide" if wide else ""}><img alt="{_e(path.stem)}" '
                f'src="data:image/png;base64,{data}">{cap}</figure>')
    fragment = path.with_suffix(".html")
    if fragment.is_file():
        body = fragment.read_text()
    else:  # a table written before tables had their HTML: the numbers
        try:
            body = pd.read_csv(path).to_html(index=False, border=0, na_rep="")
        except (ValueError, pd.errors.EmptyDataError):
            body = "<p>(empty)</p>"
    return f'<figure class="table">{cap}<div class="scroll">{body}</div></figure>'


def _title(name: str) -> str:
    about = REPORTS[name].about if name in REPORTS else "Other outputs"
    return about[:1].upper() + about[1:]


def _report(name: str, files: dict, claims: list[Finding], page_dir: Path) -> str:
    """What the report reproduces, its claims, its figures, then its tables."""
    report, out = REPORTS.get(name), []
    if report:
        papers = "; ".join(sorted({cap[0] for cap in report.captions.values() if cap[0]}))
        out.append(f"<p>Reproduces: {_e(papers.rstrip('.') or report.about)}. Made by rule "
                   f"<code>{_e(report.rule_name)}</code> (<code>python -m harness.report "
                   f"{_e(name)}</code>).</p>")
    if claims:
        out.append('<ul class="claims">' + "".join(_claim(c, page_dir) for c in claims)
                   + "</ul>")
    if files["figures"]:  # two columns, a wide one across both
        out.append('<div class="figures">' + "".join(
            _figure(report, p, page_dir) for p in files["figures"]) + "</div>")
    out += [_figure(report, p, page_dir) for p in files["tables"]]
    return "\n".join(out)


def _status_counts(summary: pd.DataFrame, experiments: dict[str, list[str]]) -> str:
    """Cells per experiment and status (a cell of two experiments counts in both), and all
    cells once; the reasons of the unfinished ones."""
    if summary.empty:
        return "<p>No cell has a result yet.</p>"
    counts, reasons = status_counts(summary, experiments), unfinished_reasons(summary)
    out = [_table(["experiment", *counts.columns],
                  [f"<td>{_e(i)}</td>" + "".join(f'<td class="num">{n or ""}</td>'
                                                   for n in counts.loc[i]) for i in counts.index],
                  ' class="counts"')]
    if len(reasons):
        out += ["<h3>Why cells did not finish</h3>", _table(
            ["status", "reason", "cells"],
            [f"<td class='status-{_e(s)}'>{_e(s)}</td><td>{_e(r)}</td><td class='num'>{n}</td>"
             for (s, r), n in reasons.items()])]
    return "\n".join(out)


def _cell(column: str, v) -> str:
    cls = f' class="status-{_e(v)}"' if column == "status" else (
        ' class="num"' if isinstance(v, (int, float)) and not isinstance(v, bool) else "")
    timed = column in ("mean", "ci_low", "ci_high", "median")
    shown = f"{v:.4g}" if isinstance(v, float) and timed and v == v else v
    data = f' data-v="{_e(v)}"' if isinstance(v, (int, float)) else ""
    return f"<td{cls}{data}>{_e(shown)}</td>"


def _cells(summary: pd.DataFrame, campaign: str, configfile: str | None) -> str:
    rows = ["".join(_cell(c, r.get(c)) for c in COLUMNS) for r in summary.to_dict("records")]
    table = _table(COLUMNS, rows, ' id="cells"', '<th data-sort="1">')
    cfg = f" --configfile {configfile}" if configfile else ""
    again = f"harness run --campaign {campaign} --cell CELL_ID{cfg}"
    return (f"<p>Measure a cell again: <code>{_e(again)}</code>; the failed, wrong and timed "
            f"out ones: <code>harness retry {_e(campaign)}</code>.</p>"
            '<p><input id="filter" placeholder="filter cells" oninput="filterCells(this)"> '
            "Click a column header to sort.</p>"
            f'<div class="scroll">{table}</div>')


def _raw(store: Path, inputs, page_dir: Path) -> str:
    links = [("summary.csv", store / "summary.csv"), ("check.json", store / "check.json"),
             ("run documents", store / "runs"), ("raw repetitions", store / "raw"),
             ("job scripts", store / "jobs"), ("tables", inputs.tables),
             ("figures", inputs.figures)]
    return "<ul>" + "".join(f'<li><a href="{_e(_rel(p, page_dir))}">{_e(n)}</a></li>'
                            for n, p in links) + "</ul>"


def make_page(inputs, out, config: str = "", configfile: str | None = None) -> Path:
    """Write the page of the campaign whose ``inputs`` (``inputs.Inputs``) are given to
    ``out``; ``config``: the config's path and hash as the header shows them;
    ``configfile``: the config given to the workflow, named in the command that measures a
    cell again."""
    store, name, out = inputs.store, inputs.store.name, Path(out)
    page_dir = out.parent
    docs, experiments = _documents(store)
    summary = inputs.summary.assign(experiment=[", ".join(experiments.get(c) or [])
                                                for c in inputs.summary["cell_id"]])
    claims, ties = findings(inputs.tables)
    by_report: dict = {}
    for c in claims:
        report = report_of(c.table.stem)
        by_report.setdefault(report.name if report else "", []).append(c)
    outputs = _outputs(inputs.tables, inputs.figures)
    sections = [("campaign", "The campaign", "\n".join([
                    _header(name, config, len(summary), docs), _check(store),
                    _statistic(inputs.statistic)])),
                ("findings", "Findings", _findings(claims, ties, page_dir))]
    sections += [(f"r-{n or 'other'}", _title(n), _report(n, outputs[n], by_report.get(n, []),
                                                          page_dir))
                 for n in [*(n for n in REPORTS if n in outputs), *([""] if "" in outputs else [])]]
    sections += [("status", "Cells by status", _status_counts(summary, experiments)),
                 ("all-cells", "Cells", _cells(summary, name, configfile)),
                 ("raw", "Raw files", _raw(store, inputs, page_dir))]
    toc = "".join(f'<li><a href="#{_e(a)}">{i}. {_e(t)}</a></li>'
                  for i, (a, t, _) in enumerate(sections, start=1))
    body = [f"<h1>Allreduce campaign <code>{_e(name)}</code></h1>",
            f'<nav id="contents"><h2>Contents</h2><ul class="toc">{toc}</ul></nav>']
    body += [f'<section id="{_e(a)}"><h2>{i}. {_e(t)}</h2>\n{b}\n</section>'
             for i, (a, t, b) in enumerate(sections, start=1)]
    text = ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{_e(name)}: allreduce campaign</title>"
            f"<style>{STYLE}</style></head><body>\n" + "\n".join(body)
            + f"\n<script>{SCRIPT}</script></body></html>\n")
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out, text)
    return out

