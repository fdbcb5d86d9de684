"""Old import paths of modules that moved, kept working for one release (CHANGELOG.md, "Moved").

:func:`alias` makes ``old.x`` the very module ``new.x`` (one module object, imported once), for
``import`` and for ``python -m old.x`` alike, and warns once that the path moved.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from types import CodeType, ModuleType

__all__ = ["alias", "moved"]


def moved(old: str, new: str) -> None:
    warnings.warn(f"{old} moved to {new}; the old path goes in the next release", DeprecationWarning, stacklevel=3)


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.InspectLoader):
    """Finds ``<old>.<x>`` as the module ``<new>.<x>`` (not ``<old>.__main__``: that one is a file)."""

    def __init__(self, old: str, new: str) -> None:
        self.old, self.new = old, new

    def _target(self, name: str) -> str | None:
        if not name.startswith(self.old + ".") or name == f"{self.old}.__main__":
            return None
        return self.new + name[len(self.old):]

    def find_spec(self, fullname: str, path: object = None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        new = self._target(fullname)
        found = importlib.util.find_spec(new) if new is not None else None
        if found is None:
            return None
        # The file's origin, so that `python -m <old>.<x>` has its sys.argv[0] and __file__.
        spec = importlib.util.spec_from_loader(fullname, self, origin=found.origin,
                                               is_package=found.submodule_search_locations is not None)
        if spec is not None:
            spec.has_location = found.has_location
        return spec

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return importlib.import_module(str(self._target(spec.name)))

    def exec_module(self, module: ModuleType) -> None:
        pass  # the module it names is imported already

    def get_source(self, fullname: str) -> str | None:
        return None

    def get_code(self, fullname: str) -> CodeType | None:  # python -m <old>.<x>
        new = str(self._target(fullname))
        spec = importlib.util.find_spec(new)
        loader = spec.loader if spec is not None else None
        return loader.get_code(new) if isinstance(loader, importlib.abc.InspectLoader) else None


def alias(old: str, new: str) -> None:
    """Serve every ``old.<x>`` as ``new.<x>``."""
    if not any(isinstance(f, _Alias) and f.old == old for f in sys.meta_path):
        sys.meta_path.insert(0, _Alias(old, new))
