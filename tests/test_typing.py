"""Type hints, read from the source: every public function and method of svmcore and facedet is annotated, the
modules postpone annotations (``from __future__ import annotations``: no hint is evaluated at import), and both
packages ship ``py.typed`` (PEP 561).

Public: a module-level function or a method of a public class whose name does not start with ``_``, and the
``__init__`` of a public class. Functions compiled by numba (any decorator from the numba package: ``@nb.njit``,
``@njit``, ``@overload``, ``@intrinsic``, ...) are left out: numba types them itself. ``self`` / ``cls`` and
``*args`` / ``**kwargs`` may go unannotated, and ``__init__`` may omit its return annotation. The command line
(the subpackage ``facedet/cli/``, whose options typer reads from its annotations) is not checked here.
"""

import ast
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("svmcore", "facedet")


def _module_files():
    """(relative path, parsed source) of each module of the packages and their subpackages, but the CLI's."""
    out = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if not rel.startswith("facedet/cli/"):
                out.append((rel, ast.parse(path.read_text(encoding="utf-8"), filename=str(path))))
    return out


def _numba_names(tree):
    """Names that refer to numba in a module: its aliases (``import numba as nb``) and names imported from it
    (``from numba import njit``, ``from numba.extending import overload``)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.asname or a.name.split(".")[0] for a in node.names if a.name.split(".")[0] == "numba")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "numba" and not node.level:
            names.update(a.asname or a.name for a in node.names)
    return names


def _is_numba(decorator, numba_names):
    node = decorator.func if isinstance(decorator, ast.Call) else decorator
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name) and node.id in numba_names


def _public_functions(body, numba_names, prefix=""):
    """(qualified name, node, is_method) of the public functions in ``body`` (a module's or a public class's),
    looking into ``if`` / ``try`` blocks (``if TYPE_CHECKING:`` protocols included) but not into functions."""
    for node in body:
        if isinstance(node, ast.ClassDef):
            if not node.name.startswith("_"):
                yield from _public_functions(node.body, numba_names, f"{prefix}{node.name}.")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            public = not node.name.startswith("_") or (node.name == "__init__" and prefix)
            if public and not any(_is_numba(d, numba_names) for d in node.decorator_list):
                yield prefix + node.name, node, bool(prefix)
        elif isinstance(node, ast.If):
            yield from _public_functions(node.body + node.orelse, numba_names, prefix)
        elif isinstance(node, ast.Try):
            blocks = node.body + node.orelse + node.finalbody + [s for h in node.handlers for s in h.body]
            yield from _public_functions(blocks, numba_names, prefix)


def _missing(node, is_method):
    """What of ``node``'s signature lacks an annotation: parameter names, and "return"."""
    args = node.args
    params = args.posonlyargs + args.args
    static = any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in node.decorator_list)
    if is_method and not static and params and params[0].arg in ("self", "cls"):
        params = params[1:]
    missing = [p.arg for p in params + args.kwonlyargs if p.annotation is None]
    if node.returns is None and node.name != "__init__":
        missing.append("return")
    return missing


def _unannotated():
    """{"path: qualified name": what lacks an annotation} over every public function of the packages."""
    out = {}
    for rel, tree in _module_files():
        numba_names = _numba_names(tree)
        for name, node, is_method in _public_functions(tree.body, numba_names):
            missing = _missing(node, is_method)
            if missing:
                out[f"{rel}: {name}"] = (node.lineno, missing)
    return out


def test_the_check_finds_its_functions():
    # the walk must see what the rule is about, or an empty result would pass vacuously
    found = {
        f"{rel}: {name}"
        for rel, tree in _module_files()
        for name, _, _ in _public_functions(tree.body, _numba_names(tree))
    }
    for expected in (
        "svmcore/svc.py: SVC.fit",
        "svmcore/svc.py: SVC.__init__",
        "facedet/detector.py: Detector.detect",
        "svmcore/qmatrix.py: KernelQ.rows",
        "facedet/scan.py: scan",
        "svmcore/pmsvm/estimator.py: PmSVM.fit",
    ):
        assert expected in found, expected
    assert "svmcore/smo.py: solve_in_memory" not in found  # compiled by numba
    assert not any(name.endswith(": _csr_from_parts") for name in found)  # private


def test_public_functions_are_annotated():
    unannotated = _unannotated()
    offenders = [
        f"{key.replace(': ', f':{line} ', 1)} lacks {', '.join(missing)}"
        for key, (line, missing) in sorted(unannotated.items())
    ]
    assert not offenders, f"{len(offenders)} public functions without full type hints:\n" + "\n".join(offenders)


@pytest.mark.parametrize("package", PACKAGES)
def test_modules_postpone_annotations(package):
    # hints name types imported for type checkers only (if TYPE_CHECKING:), which do not exist at run time
    lacking = [
        rel
        for rel, tree in _module_files()
        if rel.startswith(f"{package}/")
        and not any(
            isinstance(n, ast.ImportFrom) and n.module == "__future__" and any(a.name == "annotations" for a in n.names)
            for n in tree.body
        )
    ]
    assert not lacking, f"modules without 'from __future__ import annotations': {lacking}"


@pytest.mark.parametrize("package", PACKAGES)
def test_py_typed_is_shipped(package):
    assert (ROOT / package / "py.typed").is_file(), f"{package}/py.typed is missing (PEP 561 marker)"
    package_data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"][
        "package-data"
    ]
    assert "py.typed" in package_data.get(package, []), f"pyproject.toml: {package}'s package-data lacks py.typed"
