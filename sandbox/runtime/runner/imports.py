"""Warm imports: the modules the runner loads once so that every forked execution has them.

``--preimport`` (openpyxl by default) is imported at start-up, before the runner connects.
Libraries named in ``--import-on-demand`` (pandas by default) are imported by the parent only
when a Python program it is asked to run mentions them, before the fork: a container pays for
pandas (~0.2 s of CPU, a third of a container's whole cost) only when its rollout uses it, and
then once, not in every forked execution.

The preimport hides numpy: openpyxl imports it only to count numpy scalars as numbers, which
is ~45% of its import (~50 ms of CPU per container). When numpy is imported later (pandas, or
the program), openpyxl is given those types back (:func:`_give_openpyxl_numpy`), so writing a
numpy value into a cell behaves as with a plain ``import openpyxl``.
"""

from __future__ import annotations

import gc
import importlib
import os
import re
import stat
import sys
import types

TYPE_CHECKING = False  # typing is not imported at run time: it would slow the runner's start
if TYPE_CHECKING:
    from collections.abc import Sequence
    from importlib.machinery import ModuleSpec


def preimport(names: list[str]) -> list[str]:
    """Import ``names`` at start-up; returns those that imported (a missing library is
    reported on stderr, not fatal). Call :func:`freeze_heap` afterwards."""
    imported = []
    for name in names:
        try:
            _preimport(name)
            imported.append(name)
        except Exception as exc:
            print(f"runner: preimport {name} failed: {exc}", file=sys.stderr)
    return imported


def freeze_heap() -> None:
    """Keep the imported heap out of the collector so forked children share its pages."""
    gc.collect()
    gc.freeze()


def import_into_parent(names: list[str]) -> None:
    """Import on-demand modules into the runner (before it forks the next child)."""
    for name in names:
        try:
            importlib.import_module(name)
        except Exception as exc:  # the program will meet the same error and report it
            print(f"runner: import {name} failed: {exc}", file=sys.stderr)
    freeze_heap()  # keep the new heap shared with the children, as at start-up


#: Largest program the parent scans for on-demand imports (a bigger one is run as it is).
_SCAN_MAX_BYTES = 1 << 20


def mentions(path: str, modules: list[str]) -> list[str]:
    """The ``modules`` the Python program at ``path`` imports (by a plain text match: a miss
    only means the child imports the module itself). The file is untrusted: only a regular
    file is read (never a FIFO that would block, nor a link), and only its first MiB."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError:
        return []
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return []
        source = os.read(fd, _SCAN_MAX_BYTES)
    except OSError:
        return []
    finally:
        os.close(fd)
    return [
        m
        for m in modules
        if re.search(rb"\b(?:import|from)\s[^\n;]*\b" + re.escape(m.encode()) + rb"\b", source)
    ]


#: Preimports whose use of numpy is optional: imported with numpy hidden.
_NUMPY_OPTIONAL = frozenset({"openpyxl"})


def _preimport(name: str) -> None:
    """Import ``name``; openpyxl with numpy hidden (an ImportError for its optional import of
    it), watching for numpy's real import to give openpyxl its numpy types then. Modules that
    need numpy (TextWorld's) import it as usual."""
    if name not in _NUMPY_OPTIONAL or "numpy" in sys.modules:
        importlib.import_module(name)
        return
    sys.modules["numpy"] = None  # type: ignore[assignment]  # "import numpy" raises ImportError
    try:
        importlib.import_module(name)
    finally:
        del sys.modules["numpy"]
    if not any(isinstance(f, _AfterNumpy) for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterNumpy())


class _AfterNumpy:
    """A meta-path finder that only notices numpy's import: it finds numpy's real spec and
    runs :func:`_give_openpyxl_numpy` once its module has executed."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None = None
    ) -> ModuleSpec | None:
        if fullname != "numpy":
            return None
        sys.meta_path.remove(self)  # once; and the lookup below must not find us again
        import importlib.util

        spec = importlib.util.find_spec("numpy")
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        run = loader.exec_module

        def exec_module(module: types.ModuleType) -> None:
            run(module)
            _give_openpyxl_numpy(module)

        loader.exec_module = exec_module
        return spec


_NUMPY_NUMBERS = [
    "short",
    "ushort",
    "intc",
    "uintc",
    "int_",
    "uint",
    "longlong",
    "ulonglong",
    "half",
    "float16",
    "single",
    "double",
    "longdouble",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "intp",
    "uintp",
    "float32",
    "float64",
    "bool_",
    "floating",
    "integer",
]


def _give_openpyxl_numpy(numpy: types.ModuleType) -> None:
    """What openpyxl's ``compat.numbers`` adds when numpy imports at its own import: the numpy
    scalar types in ``NUMERIC_TYPES`` (and every tuple built from it, such as ``cell.cell``'s
    ``KNOWN_TYPES``) and ``NUMPY = True``."""
    numbers = sys.modules.get("openpyxl.compat.numbers")
    if numbers is None or getattr(numbers, "NUMPY", True):
        return
    old = numbers.NUMERIC_TYPES
    extra = tuple(t for t in (getattr(numpy, n, None) for n in _NUMPY_NUMBERS) if isinstance(t, type))
    new = old + tuple(dict.fromkeys(t for t in extra if t not in old))
    for mod_name, mod in list(sys.modules.items()):
        if mod is None or not (mod_name == "openpyxl" or mod_name.startswith("openpyxl.")):
            continue
        for attr, value in list(vars(mod).items()):
            if value is old:
                setattr(mod, attr, new)
            elif (
                isinstance(value, tuple)
                and value[: len(old)] == old
                and len(value) > len(old)
                and attr.isupper()
            ):
                setattr(mod, attr, new + value[len(old) :])  # e.g. KNOWN_TYPES = NUMERIC_TYPES + ...
            elif attr == "NUMPY" and value is False:
                setattr(mod, attr, True)
