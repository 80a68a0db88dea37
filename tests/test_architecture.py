"""The layout's rules, read from the source: svmcore stands alone, facedet uses svmcore's public names only, and
no module imports (even lazily, inside a function) a module that imports it back."""

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _modules(package):
    """{dotted module name: parsed source} of every module of ``package``."""
    out = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return out


def _imports(name, tree, is_package):
    """(module, imported names) of every import statement in ``tree``, relative imports resolved."""
    base = name.split(".") if is_package else name.split(".")[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, ()
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                module = ".".join(base[: len(base) - node.level + 1] + ([module] if module else []))
            yield module, tuple(alias.name for alias in node.names)


def _graph(packages=("svmcore", "facedet")):
    """Import edges between the project's modules: {module: set of modules it imports}."""
    modules = {k: v for p in packages for k, v in _modules(p).items()}
    packages_set = {k for k in modules if (ROOT / k.replace(".", "/") / "__init__.py").exists()}
    edges = {k: set() for k in modules}
    for name, tree in modules.items():
        for module, names in _imports(name, tree, name in packages_set):
            targets = [f"{module}.{n}" for n in names if f"{module}.{n}" in modules] or [module]
            edges[name].update(t for t in targets if t in modules and t != name)
    return edges


def test_svmcore_does_not_import_facedet():
    for name, tree in _modules("svmcore").items():
        for module, _ in _imports(name, tree, name == "svmcore"):
            assert not module.startswith("facedet"), f"{name} imports {module}"


def test_facedet_uses_public_svmcore_names_only():
    private = set()  # every private name svmcore defines: functions, classes, methods, attributes
    for tree in _modules("svmcore").values():
        for node in ast.walk(tree):
            names = []
            if isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)):
                names = [node.name]
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names = [node.attr]
            elif isinstance(node, ast.Assign):
                names = [t.id for t in node.targets if isinstance(t, ast.Name)]
            private.update(n for n in names if n.startswith("_") and not n.startswith("__"))
    found = []
    for name, tree in _modules("facedet").items():
        own = {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
        for module, names in _imports(name, tree, name == "facedet"):
            if module.startswith("svmcore"):
                found += [f"{name}: {module}" for part in module.split(".") if part.startswith("_")]
                found += [f"{name}: {module}.{n}" for n in names if n.startswith("_")]
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and node.attr in private - own
                and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
            ):
                found.append(f"{name}:{node.lineno}: .{node.attr}")
    assert not found, "facedet uses private svmcore names:\n" + "\n".join(found)


def test_no_import_circles():
    edges = _graph()
    # (a package's __init__ may import its own modules lazily, and they import it: not a circle of the design)
    edges = {k: {t for t in v if not (k.startswith(t + ".") or t.startswith(k + "."))} for k, v in edges.items()}
    state, cycles = {}, []

    def visit(node, stack):
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges[node]):
            if state.get(nxt) == 1:
                cycles.append(" -> ".join(stack[stack.index(nxt) :] + [nxt]))
            elif nxt not in state:
                visit(nxt, stack)
        stack.pop()
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node, [])
    assert not cycles, "import circles:\n" + "\n".join(cycles)


@pytest.mark.parametrize("package", ["svmcore", "facedet"])
def test_every_module_is_reached_by_the_layout(package):
    # the README's layout names each module: a module it does not name is a room nobody was shown
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    layout = readme.split("## Layout", 1)[1].split("```")[1]
    named = set(re.findall(r"\b(\w+)(?:\.py)?\b", layout))
    missing = [n for n in _modules(package) if "." in n and n.rsplit(".", 1)[1] not in named | {"__main__"}]
    assert not missing, f"modules missing from the README's layout: {missing}"
