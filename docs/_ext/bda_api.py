"""The API reference of the docs site, as reStructuredText built from each public package's names.

Every public package of ``bda_jax`` (:func:`public_packages`) gets one page, ``docs/api/NAME.rst``,
that holds a single ``bda-api`` directive (``docs/_ext/bda_sphinx.py``); the directive parses the
text :func:`api_rst` writes. That text documents every name of the package's ``__all__``
(:func:`public_names`; for ``bda_jax.models``, which has no ``__all__``, every public name of
each of its modules), grouped by the module that defines it, in ``__all__`` order: functions and
classes through autodoc (``autofunction``, ``autoclass``), constants as ``py:data`` with their
``#:`` comment from the defining module and a short value, and a re-export (``bda_jax.evaluate``)
as a pointer to its full entry (``bda_jax.aggregators.evaluate``).

This module imports no Sphinx: ``tests/integration/test_docs_site.py`` checks the names it
documents against the packages without building the site.
"""
from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
import sys
from dataclasses import dataclass
from pathlib import Path

#: the root package; its public subpackages are found by walking it (private ``_core`` and the
#: data-only ``bda_jax.data``, which exports no name, are not documented)
ROOT_PACKAGE = "bda_jax"
#: a value shown on the page only if its repr is at most this long
VALUE_CHARS = 100


@dataclass(frozen=True)
class Entry:
    """One documented name: ``qualname`` (``bda_jax.audit.load_confmad``), ``kind`` (``function``,
    ``class`` or ``data``), ``home`` (the module that defines it) and ``canonical``: the public
    name it is documented under in full, ``qualname`` itself unless this is a re-export (the
    public package or module that owns ``home`` exports the same object: ``bda_jax.evaluate``
    is ``bda_jax.aggregators.evaluate``)."""
    qualname: str
    kind: str
    home: str
    canonical: str

    @property
    def owner(self) -> str:
        """The module whose name this is (``bda_jax.audit``, ``bda_jax.models.dawid_skene``)."""
        return self.qualname.rpartition(".")[0]


def public_packages() -> list[str]:
    """The packages that get an API page: ``bda_jax``, each public subpackage that exports names
    (an ``__all__``) and ``bda_jax.models`` (public by module). Sorted, ``bda_jax`` first."""
    root = importlib.import_module(ROOT_PACKAGE)
    found = [ROOT_PACKAGE]
    for info in pkgutil.iter_modules(root.__path__, ROOT_PACKAGE + "."):
        leaf = info.name.rsplit(".", 1)[1]
        if not info.ispkg or leaf.startswith("_"):
            continue
        module = importlib.import_module(info.name)
        if hasattr(module, "__all__") or _public_modules(module):
            found.append(info.name)
    models = f"{ROOT_PACKAGE}.models"
    if models not in found:
        importlib.import_module(models)
        found.append(models)
    return [found[0]] + sorted(found[1:])


def _public_modules(package) -> list[str]:
    """The public (not underscore) modules of a package without ``__all__``, e.g. ``bda_jax.models``."""
    path = getattr(package, "__path__", None)
    if path is None or hasattr(package, "__all__"):
        return []
    return [f"{package.__name__}.{m.name}" for m in pkgutil.iter_modules(path) if not m.name.startswith("_")]


def public_names(module_name: str) -> list[str]:
    """The public names of a module or package: its ``__all__``, in order. A package without
    ``__all__`` (``bda_jax.models``) contributes the ``__all__`` of each public module, as
    ``module.name``."""
    module = importlib.import_module(module_name)
    if hasattr(module, "__all__"):
        return list(module.__all__)
    subs = _public_modules(module)
    if not subs:
        raise ValueError(f"{module_name}: no __all__ and no public module")
    names = []
    for sub in subs:
        leaf = sub.rsplit(".", 1)[1]
        names += [f"{leaf}.{n}" for n in public_names(sub)]
    return names


def _kind(obj) -> str:
    if inspect.isclass(obj):
        return "class"
    if inspect.isroutine(inspect.unwrap(obj)):
        return "function"
    return "data"


def _defining_module(owner: str, name: str, obj) -> str:
    """The module that defines ``obj`` (``__module__`` for functions and classes; for a constant,
    the one module under the owner's package whose source assigns ``name`` at top level)."""
    if _kind(obj) != "data":
        return getattr(inspect.unwrap(obj), "__module__", owner)
    top = owner.split(".")[0]
    pattern = re.compile(rf"^{re.escape(name)}\s*[:=]", re.M)
    owners = sorted(m.__name__ for m in list(sys.modules.values())
                    if getattr(m, "__name__", "").startswith(top + ".")
                    and getattr(m, "__file__", None) and vars(m).get(name) is obj
                    and pattern.search(Path(m.__file__).read_text(encoding="utf-8")))
    inner = [m for m in owners if not m.endswith("__init__")]
    return inner[0] if inner else owner


def public_owner(module_name: str) -> str:
    """The public module a (private) module belongs to: its name up to the first ``_`` part
    (``bda_jax._core.counts`` -> ``bda_jax``, ``bda_jax.audit._log`` -> ``bda_jax.audit``)."""
    parts = module_name.split(".")
    cut = next((i for i, part in enumerate(parts) if part.startswith("_")), len(parts))
    return ".".join(parts[:cut])


def _canonical(owner: str, attr: str, obj, home: str) -> str:
    """``owner.attr`` itself, or the same object's name in the public module owning ``home``."""
    other = public_owner(home)
    if other != owner and other.startswith(ROOT_PACKAGE):
        module = importlib.import_module(other)
        if attr in getattr(module, "__all__", ()) and getattr(module, attr) is obj:
            return f"{other}.{attr}"
    return f"{owner}.{attr}"


def entries(package: str) -> list[Entry]:
    """Every public name of ``package`` (:func:`public_names`) as an :class:`Entry`, in order."""
    out = []
    for name in public_names(package):
        module_name, _, attr = f"{package}.{name}".rpartition(".")
        obj = getattr(importlib.import_module(module_name), attr)
        home = _defining_module(module_name, attr, obj)
        out.append(Entry(f"{module_name}.{attr}", _kind(obj), home, _canonical(module_name, attr, obj, home)))
    return out


def attribute_comment(module_name: str, name: str) -> str:
    """The ``#:`` comment lines just above ``name = ...`` (or ``name: T = ...``) in the module's
    source, joined; empty if there is none."""
    lines = Path(importlib.import_module(module_name).__file__).read_text(encoding="utf-8").splitlines()
    pattern = re.compile(rf"^{re.escape(name)}\s*[:=]")
    for i, line in enumerate(lines):
        if pattern.match(line):
            doc = []
            j = i - 1
            while j >= 0 and lines[j].startswith("#:"):
                doc.insert(0, lines[j][2:].strip())
                j -= 1
            trailing = re.search(r"#:\s*(.+)$", line)
            if not doc and trailing:
                doc = [trailing.group(1)]
            return " ".join(doc)
    return ""


def _title(module_name: str) -> str:
    """A section title from the module docstring's first clause, e.g. "Closed-form BDA posteriors"."""
    doc = inspect.getdoc(importlib.import_module(module_name)) or ""
    first = doc.strip().split("\n\n")[0].replace("\n", " ")
    clause = re.split(r"(?<!`):\s|\s\(|\.\s|\.$|;\s", first, maxsplit=1)[0].strip().rstrip(":,")
    return clause or module_name


def _intro(module_name: str) -> str:
    """The first paragraph of the module docstring (it may cite [BDA], [DASE], [Audit] sections)."""
    doc = inspect.getdoc(importlib.import_module(module_name)) or ""
    return doc.strip().split("\n\n")[0]


def _underline(text: str, char: str) -> str:
    return f"{text}\n{char * max(len(text), 4)}"


def _data_rst(entry: Entry) -> list[str]:
    attr = entry.qualname.rpartition(".")[2]
    value = getattr(importlib.import_module(entry.owner), attr)
    lines = [f".. py:data:: {attr}", f"   :module: {entry.owner}", f"   :type: {type(value).__name__}"]
    text = repr(value)
    if len(text) <= VALUE_CHARS and "\n" not in text:
        lines.append(f"   :value: {text}")
    comment = attribute_comment(entry.home, attr) or attribute_comment(entry.owner, attr)
    return lines + ["", f"   {comment}" if comment else f"   Defined in ``{entry.home}``.", ""]


_ROLE = {"function": "func", "class": "class", "data": "data"}


def _entry_rst(entry: Entry) -> list[str]:
    """One name: a re-export points at its full entry; a function or class is autodoc's; a
    constant is :func:`_data_rst`'s."""
    if entry.canonical != entry.qualname:
        return [f".. py:{entry.kind}:: {entry.qualname.rpartition('.')[2]}", f"   :module: {entry.owner}", "",
                f"   Re-export of :{_ROLE[entry.kind]}:`{entry.canonical}`.", ""]
    if entry.kind == "data":
        return _data_rst(entry)
    return [f".. auto{entry.kind}:: {entry.qualname}", ""]


def api_rst(package: str) -> str:
    """The reStructuredText of the API page of ``package``: a one-paragraph module summary, then one
    section per defining module (per public module in ``bda_jax.models``: its title and first
    paragraph, an autosummary table of its
    functions and classes, then each name's entry). Section titles use ``-``; the page's own
    title is the ``.rst`` file's."""
    module = importlib.import_module(package)
    groups: dict[tuple[str, str], list[Entry]] = {}
    for entry in entries(package):
        # a public module of a package without __all__ (bda_jax.models.annotators) is one section
        section = entry.home if entry.owner == package else entry.owner
        groups.setdefault((entry.owner, section), []).append(entry)
    summary = (inspect.getdoc(module) or "").strip().split("\n\n")[0]
    out = [f".. py:module:: {package}", "", summary, ""]
    for (owner, section), group in groups.items():
        title = _title(section)
        out += [_underline(title, "-"), ""]
        if owner != package:
            out += [f".. py:module:: {owner}", ""]
        out += [f".. py:currentmodule:: {owner}", ""]
        intro = _intro(section)
        if intro.rstrip(".") != title:
            out += [intro, ""]
        out += [f"*Defined in* ``{section}``." if owner == package else f"*Module* ``{owner}``.", ""]
        listed = [e for e in group if e.kind != "data"]
        if listed:                      # autosummary would summarize a constant by its type's docstring
            out += [".. autosummary::", "   :nosignatures:", ""]
            out += [f"   {e.qualname.rpartition('.')[2]}" for e in listed] + [""]
        for e in group:
            out += _entry_rst(e)
    return "\n".join(out) + "\n"


def documented_names(rst: str) -> set[str]:
    """The fully qualified names a page's text documents (its ``autofunction`` and ``autoclass``
    targets, and its ``py:data`` / ``py:function`` / ``py:class`` entries with their ``:module:``):
    what the API test compares with each package's public names."""
    auto = re.findall(r"^\.\. auto(?:function|class):: (\S+)$", rst, re.M)
    direct = re.findall(r"^\.\. py:(?:data|function|class):: (\S+)\n   :module: (\S+)$", rst, re.M)
    return set(auto) | {f"{module}.{name}" for name, module in direct}
