"""The campaign's report page, ``results/<c>/report/index.html``: one self-contained HTML file
(figures inline as PNG data, a few lines of plain JavaScript, no network) with

- first, the campaign's findings: one line per claim of its tables (confirmed AUTO vs BEST,
  performance-guideline violations, tuned gains) with its evidence and a link to the table,
  ties counted, nothing from an oversubscribed launch (``findings.py``);
- a header: campaign, config hash, git commit, libraries and their version strings, hosts,
  cores, dates, and a warning when some run had more ranks than cores;
- the cells by status, overall and per experiment, with the reasons of the unfinished ones;
- every table and figure the campaign produced, grouped by paper, each with a caption naming
  what it reproduces and how to read it;
- a cells table, sortable by any column and filtered by a text box, one row per cell, with
  the command that measures it again;
- links to the raw files.

``make_page(campaign, out)`` takes a ``harness.campaign.workflow.Campaign``.
"""

from __future__ import annotations

import base64
import html
from pathlib import Path

import pandas as pd

from ..fileio import atomic_write_text, read_json
from ..results.store import oversubscribed
from ..results.view import STATISTIC_LABEL
from .findings import findings
from .registry import captions

# file stem (or prefix_*) -> (paper, what it reproduces, how to read it), from every report's
# entry in the registry; the order is the page's order
OUTPUTS = captions()
UNFINISHED = ("failed", "wrong", "timeout")
COLUMNS = ["cell_id", "experiment", "library", "algorithm", "params", "procs", "nodes", "size",
           "dtype", "op", "delay", "max_delay", "status", "n", "mean", "ci_low", "ci_high",
           "median", "t_rejected", "oversubscribed", "error"]

STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:0 auto;max-width:1200px;padding:1em;color:#222}
h1{font-size:1.5em}h2{font-size:1.2em;border-bottom:1px solid #ccc;margin-top:2em}
h3{font-size:1.05em}.warn{background:#fff3cd;border:1px solid #e0c36c;padding:.5em}
table{border-collapse:collapse;font-size:12px}td,th{border:1px solid #ddd;padding:2px 6px}
th{background:#f4f4f4;cursor:pointer;position:sticky;top:0}td.num{text-align:right}
figure{margin:1em 0}figure img{max-width:100%;border:1px solid #eee}
figcaption{color:#444;font-size:13px}.status-failed,.status-wrong,.status-timeout{color:#a00}
.status-not-converged{color:#a60}code{font-size:12px}.scroll{max-height:70vh;overflow:auto}
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


def _key(stem: str) -> str:
    if stem in OUTPUTS:
        return stem
    for key in OUTPUTS:  # a file per library: auto_vs_best_*, tuned_*
        if key.endswith("*") and stem.startswith(key[:-1]):
            return key
    return stem


def _provenance(store) -> tuple[list[dict], bool]:
    docs, over = [], False
    for p in sorted((store.dir / "runs").glob("*.json")):
        try:
            doc = read_json(p)
        except ValueError:
            continue
        docs.append(doc)

    over = any(oversubscribed(d.get("provenance") or {}) for d in docs)
    return docs, over


def _header(campaign, summary: pd.DataFrame, docs: list[dict], over: bool) -> str:
    provs = [d.get("provenance") or {} for d in docs]
    libs = sorted({(d.get("library"), p.get("library_version")) for d, p in zip(docs, provs)
                   if p.get("library_version")})
    hosts = sorted({h for p in provs for h in (p.get("nodes") or p.get("hosts") or [])})
    cores = sorted({c for p in provs for c in (p.get("cores") or []) if c})
    commits = sorted({p.get("git_commit") for p in provs if p.get("git_commit")})
    started = sorted(d.get("started") for d in docs if d.get("started"))
    finished = sorted(d.get("finished") for d in docs if d.get("finished"))
    rows = [("campaign", campaign.cfg.campaign), ("config", f"{campaign.cfg.source} "
             f"(hash {campaign.cfg.digest})"), ("git commit", ", ".join(commits) or "unknown"),
            ("libraries", "; ".join(f"{lib}: {v}" for lib, v in libs) or "no run yet"),
            ("hosts", ", ".join(hosts) or "unknown"),
            ("cores per node", ", ".join(map(str, cores)) or "unknown"),
            ("measured", f"{started[0] if started else '?'} to {finished[-1] if finished else '?'}"),
            ("cells", str(len(summary)))]
    out = ["<table>"] + [f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in rows]
    out.append("</table>")
    if over:
        out.append('<p class="warn">Some runs had more ranks than cores (oversubscribed): '
                   "their times are not comparable, and no win or loss is drawn from them "
                   "(marked ‡ in the tables).</p>")
    return "\n".join(out)


def _status_counts(summary: pd.DataFrame) -> str:
    if summary.empty:
        return "<p>No cell has a result yet.</p>"
    t = pd.crosstab(summary["experiment"], summary["status"], margins=True, margins_name="all")
    out = [t.to_html(classes="counts", border=0)]
    bad = summary[summary["status"].isin(UNFINISHED)]
    if len(bad):
        reasons = bad.groupby(["status", bad["error"].fillna("(no message)")]).size()
        out.append("<h3>Why cells did not finish</h3><table><tr><th>status</th><th>reason</th>"
                   "<th>cells</th></tr>")
        out += [f"<tr><td class='status-{_e(s)}'>{_e(s)}</td><td>{_e(r)}</td>"
                f"<td class='num'>{n}</td></tr>" for (s, r), n in reasons.items()]
        out.append("</table><p>Measure them again: <code>harness retry "
                   f"{_e(summary['campaign'].iloc[0])}</code>.</p>")
    return "\n".join(out)


def _outputs(tables_dir: Path, figures_dir: Path, page_dir: Path) -> str:
    items: dict = {}
    for p in sorted(tables_dir.glob("*.csv")):
        items.setdefault(_key(p.stem), []).append(("table", p))
    for p in sorted(figures_dir.glob("*.png")):
        items.setdefault(_key(p.stem), []).append(("figure", p))
    if not items:
        return "<p>No table or figure yet.</p>"
    by_paper: dict = {}
    for key in list(OUTPUTS) + sorted(set(items) - set(OUTPUTS)):
        if key in items:
            paper = OUTPUTS.get(key, ("Other", "", ""))[0]
            by_paper.setdefault(paper, []).append(key)
    out = []
    for paper, keys in by_paper.items():
        out.append(f"<h3>{_e(paper)}</h3>")
        for key in keys:
            _, what, read = OUTPUTS.get(key, ("", key, ""))
            for kind, path in items[key]:
                cap = (f"<figcaption><b>{_e(what)}</b> ({_e(path.name)}). {_e(read)}. "
                       f"Files: " + ", ".join(
                           f'<a href="{_e(_rel(q, page_dir))}">{_e(q.suffix[1:])}</a>'
                           for q in sorted(path.parent.glob(path.stem + ".*"))) + "</figcaption>")
                if kind == "figure":
                    data = base64.b64encode(path.read_bytes()).decode()
                    out.append(f'<figure><img alt="{_e(path.stem)}" '
                               f'src="data:image/png;base64,{data}">{cap}</figure>')
                else:
                    out.append(f'<figure><div class="scroll">{_table(path)}</div>{cap}</figure>')
    return "\n".join(out)


def _table(csv: Path) -> str:
    """The table as its Markdown rendering shows it (units, CIs, marks), else from the CSV."""
    md = csv.with_suffix(".md")
    if md.is_file():
        head, rows, notes = None, [], []
        for line in md.read_text().splitlines():
            line = line.strip()
            if line.startswith("|"):
                cells = [c.strip() for c in line.strip("|").split("|")]
                if all(set(c) <= set(":-") for c in cells):
                    continue
                if head is None:
                    head = cells
                else:
                    rows.append(cells)
            elif line:
                notes.append(line.strip("*"))
        if head:
            def cell(c):
                bold = c.startswith("**") and c.endswith("**") and len(c) > 4
                return f"<b>{_e(c[2:-2])}</b>" if bold else _e(c)
            body = ["<table><thead><tr>" + "".join(f"<th>{_e(h)}</th>" for h in head)
                    + "</tr></thead><tbody>"]
            body += ["<tr>" + "".join(f"<td>{cell(c)}</td>" for c in r) + "</tr>" for r in rows]
            body.append("</tbody></table>")
            return "".join(body) + "".join(f"<p>{_e(n)}</p>" for n in notes)
    try:
        return pd.read_csv(csv).to_html(index=False, border=0, na_rep="")
    except (ValueError, pd.errors.EmptyDataError):
        return "<p>(empty)</p>"


def _rel(path: Path, base: Path) -> str:
    import os

    return os.path.relpath(path, base)


def _cells(summary: pd.DataFrame, campaign, configfile: str | None) -> str:
    head = "".join(f'<th data-sort="1">{_e(c)}</th>' for c in COLUMNS + ["measure again"])
    rows = []
    cfg = f" --configfile {configfile}" if configfile else ""
    for r in summary.to_dict("records"):
        tds = []
        for c in COLUMNS:
            v = r.get(c)
            cls = f' class="status-{_e(v)}"' if c == "status" else (
                ' class="num"' if isinstance(v, (int, float)) and not isinstance(v, bool) else "")
            shown = f"{v:.4g}" if isinstance(v, float) and c in ("mean", "ci_low", "ci_high", "median") \
                and v == v else v
            data = f' data-v="{_e(v)}"' if isinstance(v, (int, float)) else ""
            tds.append(f"<td{cls}{data}>{_e(shown)}</td>")
        cmd = (f"harness run --campaign {campaign.cfg.campaign} --cell {r['cell_id']}{cfg}")
        tds.append(f"<td><code>{_e(cmd)}</code></td>")
        rows.append("<tr>" + "".join(tds) + "</tr>")
    return ('<p><input id="filter" placeholder="filter cells" oninput="filterCells(this)"> '
            "Click a column header to sort.</p>"
            f'<div class="scroll"><table id="cells"><thead><tr>{head}</tr></thead><tbody>'
            + "\n".join(rows) + "</tbody></table></div>")


def _findings(tables_dir: Path, page_dir: Path) -> str:
    """The claims of the campaign's tables (``findings.py``), one line each with its evidence
    and a link to its table; ties counted."""
    claims, ties = findings(tables_dir)
    tie_text = f" {ties} comparison(s) showed no difference (ties, not listed)." if ties else ""
    if not claims:
        return (f'<p id="findings">No claim: no comparison of this campaign shows a difference '
                f"with statistical support.{_e(tie_text)}</p>")
    items = "".join(f'<li>{_e(c.text)} <span class="evidence">({_e(c.evidence)}; '
                    f'<a href="{_e(_rel(c.table, page_dir))}">{_e(c.table.stem)}</a>)</span></li>'
                    for c in claims)
    return f'<ul id="findings">{items}</ul><p>{_e(tie_text.strip())}</p>'


def _statistic(campaign) -> str:
    """What the tables' and figures' times are (``report.statistic``)."""
    stat = campaign.cfg.report.get("statistic", "mean")
    other = "median" if stat == "mean" else "mean"
    return (f"<p>Times, BEST and the AUTO-vs-BEST verdicts are built on the "
            f"{_e(STATISTIC_LABEL[stat])} (<code>report.statistic: {_e(stat)}</code>; "
            f"<code>{other}</code> builds them on the {_e(STATISTIC_LABEL[other])}). The cells "
            "table gives both, and <code>t_rejected</code>: which assumption of the t-interval "
            "(normality, independence) a cell's repetitions reject.</p>")


def make_page(campaign, out: Path, tables_dir: Path, figures_dir: Path,
              configfile: str | None = None) -> Path:
    store = campaign.store
    summary = pd.read_csv(store.summary) if store.summary.is_file() else pd.DataFrame(
        columns=["cell_id", "status", "campaign", "error"])
    summary["experiment"] = summary["cell_id"].map(campaign.experiments_of_cells()).fillna("")
    docs, over = _provenance(store)
    page_dir = Path(out).parent
    check = store.dir / "check.json"
    try:
        verdict = read_json(check)
        check_text = (f"consistent ({verdict['cells']} cells, {verdict['repetitions']} "
                      "repetitions checked)" if verdict.get("ok")
                      else f"{len(verdict['problems'])} problem(s): see check.json")
    except (OSError, ValueError, KeyError):
        check_text = "not run"
    links = [("summary.csv", store.summary), ("check.json", check),
             ("run documents", store.dir / "runs"), ("raw repetitions", store.dir / "raw"),
             ("job scripts", store.dir / "jobs"), ("tables", Path(tables_dir)),
             ("figures", Path(figures_dir))]
    body = [
        f"<h1>Allreduce campaign <code>{_e(campaign.cfg.campaign)}</code></h1>",
        "<h2>Findings</h2>", _findings(Path(tables_dir), page_dir),
        _header(campaign, summary, docs, over),
        f"<p>Store check (<code>harness check</code>): {_e(check_text)}.</p>",
        "<h2>Cells by status</h2>", _status_counts(summary),
        "<h2>Tables and figures</h2>", _statistic(campaign), _outputs(Path(tables_dir), Path(figures_dir), page_dir),
        "<h2>Cells</h2>", _cells(summary, campaign, configfile),
        "<h2>Raw files</h2><ul>" + "".join(
            f'<li><a href="{_e(_rel(p, page_dir))}">{_e(n)}</a></li>' for n, p in links) + "</ul>",
    ]
    text = ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{_e(campaign.cfg.campaign)}: allreduce campaign</title>"
            f"<style>{STYLE}</style></head><body>\n" + "\n".join(body)
            + f"\n<script>{SCRIPT}</script></body></html>\n")
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out, text)
    return out


__all__ = ["make_page", "OUTPUTS"]
