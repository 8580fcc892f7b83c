"""The package's shape: no two modules of the harness import each other, directly or through a
chain (function-level imports included: grimp's import graph has no cycle); a function imports
a harness module only for a stated reason (``LAZY``); no module uses another's ``_private``
names; every module is under 500 lines. The layer contracts are import-linter's
(.importlinter, `lint-imports` in CI)."""

import grimp


def cycles(graph) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    adj = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    for root in sorted(adj):
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            v, i = work.pop()
            if i == 0:
                index[v] = low[v] = counter[0]
                counter[0] += 1
                stack.append(v)
                on.add(v)
            if i < len(adj[v]):
                work.append((v, i + 1))
                w = adj[v][i]
                if w not in index:
                    work.append((w, 0))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[v])
    return out


def test_the_helper_finds_a_cycle():
    class Graph:
        modules = {"a", "b", "c", "d"}
        edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}

        def find_modules_directly_imported_by(self, m):
            return self.edges.get(m, set())

    assert cycles(Graph()) == [["a", "b", "c"]]


def test_no_module_imports_itself_through_others():
    assert cycles(grimp.build_graph("harness")) == []


# A function may import a harness module only when importing it at module top would load a
# heavy library where it is not needed, each for the reason given.
LAZY = {
    ("harness.cli.", "harness.report"): "matplotlib and pandas, for the commands that draw",
    ("harness.cli.tune", "harness.campaign.adaptive"): "scikit-learn, for the adaptive tuning only",
    ("harness.cli.store", "harness.results.summary"): "pandas, for `harness status` only (not "
                                                      "for check and retry)",
    ("harness.cli.args", "harness.campaign.workflow"): "pandas (the confirmation's BEST), which "
                                                       "`harness exec` does without",
    ("harness.campaign.plan", "harness.campaign.tune"): "pandas, for native:tuned only (every "
                                                        "`harness exec` plans)",
    ("harness.", "harness.dnn.models"): "torch, for the dnn extra only",
    ("harness.", "harness.dnn.cnn"): "torch, for the SGD training program only",
    ("harness.algorithms.suara", "harness.models"): "the cost models: every rank of every launch "
                                                    "imports the algorithms, few choose by a model",
}


def function_level_imports(root="harness") -> list[tuple[str, str, int]]:
    """(importer, imported, line) of every import of a harness module inside a function."""
    import ast
    from pathlib import Path

    base = Path(__file__).resolve().parent.parent
    out = []
    for path in sorted((base / root).rglob("*.py")):
        parts = list(path.relative_to(base).with_suffix("").parts)
        package = parts[:-1] if parts[-1] != "__init__" else parts[:-1]
        module = ".".join(parts if parts[-1] != "__init__" else parts[:-1])
        for fn in ast.walk(ast.parse(path.read_text())):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith(root)):
                    stem = package[:len(package) - node.level + 1] if node.level else []
                    target = ".".join(stem + ([node.module] if node.module else []))
                    for alias in node.names:  # `from . import x`: the module x
                        full = f"{target}.{alias.name}"
                        named = full if (base / Path(*full.split("."))).with_suffix(".py").exists() \
                            or (base / Path(*full.split("."))).is_dir() else target
                        out.append((module, named, node.lineno))
    return out


def test_function_level_imports_only_where_a_heavy_library_would_load():
    found = function_level_imports()
    assert any(m == "harness.measure.sgd" for m, _, _ in found)  # the scan sees them
    unexplained = [(m, t, line) for m, t, line in found
                   if not any(m.startswith(a) and (t == b or t.startswith(b + "."))
                              for a, b in LAZY)]
    assert unexplained == [], unexplained


def test_no_module_uses_another_modules_private_names():
    """``from .x import _name`` and ``x._name`` (x a harness module) are refused: a name with a
    leading underscore is its module's own."""
    import ast
    from pathlib import Path

    base = Path(__file__).resolve().parent.parent
    found = []
    for path in sorted((base / "harness").rglob("*.py")):
        tree = ast.parse(path.read_text())
        modules = set()  # local names bound to harness modules
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("harness")):
                for alias in node.names:
                    if alias.name.startswith("_") and not alias.name.startswith("__"):
                        found.append(f"{path.name}:{node.lineno}: imports {alias.name}")
                    modules.add(alias.asname or alias.name)
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                    and node.value.id in modules and node.attr.startswith("_")
                    and not node.attr.startswith("__")):
                found.append(f"{path.name}:{node.lineno}: {node.value.id}.{node.attr}")
    assert found == [], found


def test_every_module_is_under_500_lines():
    """Modules stay small and single-purpose (docs/design.md, "Layout")."""
    from pathlib import Path

    base = Path(__file__).resolve().parent.parent / "harness"
    sizes = {str(p.relative_to(base)): len(p.read_text().splitlines()) for p in base.rglob("*.py")}
    assert len(sizes) > 50
    assert {p: n for p, n in sizes.items() if n >= 500} == {}


def test_each_command_parses_with_its_own_group_and_exec_starts_light():
    """``harness <command>`` imports only its command group (COMMANDS names them all, as the
    full parser registers them); ``harness exec``, run once per run of every campaign, loads
    neither pandas, scipy nor matplotlib."""
    import subprocess
    import sys

    from harness.cli import COMMANDS, build_parser

    def commands(parser):
        return set(parser._subparsers._group_actions[0].choices)

    everything = {c for names in COMMANDS.values() for c in names}
    assert commands(build_parser()) == everything
    for name in everything:
        assert name in commands(build_parser(name))
    assert commands(build_parser("exec")) == {"plan", "exec"}
    probe = ("import sys; from harness.cli import build_parser; build_parser('exec'); "
             "print(sorted(m for m in ('pandas', 'scipy', 'matplotlib', 'sklearn') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]", out.stdout
