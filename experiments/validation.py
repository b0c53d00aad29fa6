"""Field checks shared by every spec family (emulation, co-location, and the ones to come).

Each check takes the field's path and its value, and either returns the value typed
(a ``dict``, a ``list``, an ``int``, a ``float``, ...) or raises
``SpecError(path, problem)`` whose problem names what was expected and what came:
``flows[0].src: must be a host name (string), got a mapping``. A spec module reads
every field through one of these before using it, so a malformed spec can end only
in that one-line error, never in a ``TypeError`` from deep inside.

Paths are built with ``at``: ``at("flows", 1)`` is ``flows[1]``, ``at("flows[1]",
"dst")`` is ``flows[1].dst``; the spec's root is ``""`` (reported as ``spec``).
``items`` hands out a list's entries with their paths, so nested sections read as
``for where, entry in items("flows", spec["flows"]): mapping(where, entry, ...)``.

Hand-written rather than pydantic (which is not installed here either): pydantic's
errors are multi-line, name Python types (``Input should be a valid integer``), and
its coercions (``"5"`` to 5, ``1`` to ``True``) would have to be switched off field
by field. Plain functions give the one-line ``path: must be ..., got ...`` directly,
and a spec module stays ordinary code that reads top to bottom.
"""
from __future__ import annotations

import argparse
import contextlib
import contextvars
import difflib
import importlib
import inspect
import math
import os
import re
import shutil
import site
import subprocess
import stat
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import yaml

from experiments.errors import SpecError, one_line
from experiments.store import REPO_ROOT

ROOT = ""
_PLAIN_KEY = re.compile(r"[\w-]+")
MAX_KEY_SHOWN = 80
_errors_only = contextvars.ContextVar("errors_only", default=False)


@contextlib.contextmanager
def errors_only():
    """Within it, a spec is validated for its errors alone (a sweep's cells before
    the first runs): a kind may leave out a costly step of resolving (ETP's search
    after IFS), so the spec it returns is not the one its run gets, and the few
    errors only that step meets are left to the run."""
    token = _errors_only.set(True)
    try:
        yield
    finally:
        _errors_only.reset(token)


def for_errors_only() -> bool:
    """Inside ``errors_only()``."""
    return _errors_only.get()


def shown_path(path) -> str:
    """A file path as a message shows it: as it is, unless it holds characters that
    would break the line (then quoted) or is too long to read (then shortened)."""
    text = str(path)
    if not text.isprintable():
        text = repr(text)
    return text if len(text) <= 200 else f"{text[:120]}...{text[-60:]} ({len(text)} characters)"


class _UniqueKeysLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing a mapping that names a key twice (PyYAML would
    keep the last silently: a spec's second ``name:`` would hide its first)."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue  # a merge (<<) may be overridden by the mapping's own keys
                key = self.construct_object(key_node, deep=True)
                try:
                    if key in seen:
                        raise yaml.constructor.ConstructorError(
                            None, None, f"{key} is given twice (first at line {seen[key] + 1})", key_node.start_mark)
                    seen[key] = key_node.start_mark.line
                except TypeError:
                    continue  # an unhashable key: the base class says so
        return super().construct_mapping(node, deep=deep)


def _yaml_where(err: yaml.YAMLError) -> str:
    """Where and why PyYAML stopped, on one line: `` at line 3: expected ',' or '}',
    but got ':' (while parsing a flow mapping at line 2)``."""
    mark, problem = getattr(err, "problem_mark", None), getattr(err, "problem", None)
    where = f" at line {mark.line + 1}" if mark else ""
    if problem:
        where += f": {' '.join(problem.split())}"
        context, context_mark = getattr(err, "context", None), getattr(err, "context_mark", None)
        if context and context_mark and (mark is None or context_mark.line != mark.line):
            where += f" ({' '.join(context.split())} at line {context_mark.line + 1})"
    return where


def read_yaml(path, field: str = "spec", what: str = "file") -> object:
    """A YAML file's contents, or a one-line ``field: problem`` error naming the file
    (and the line): missing, a directory or not a regular file, unreadable, a name
    too long, not UTF-8 text, not valid YAML or nested too deeply. ``what`` names the
    file in the message (``no such base spec: ...``)."""
    shown = shown_path(path)
    try:
        path = Path(path)
        mode = path.stat().st_mode
        if stat.S_ISREG(mode):  # not a pipe or a device, whose reading could block forever
            data = path.read_bytes()
    except (FileNotFoundError, NotADirectoryError, ValueError):  # ValueError: a NUL in the name
        raise SpecError(field, f"no such {what}: {shown}") from None
    except OSError as err:  # permission denied, a name too long, ...
        raise SpecError(field, f"cannot read {shown}: {err.strerror or type(err).__name__}") from None
    if stat.S_ISDIR(mode):
        raise SpecError(field, f"{shown} is a directory, not a {what}")
    if not stat.S_ISREG(mode):
        raise SpecError(field, f"{shown} is not a regular file")
    try:
        return yaml.load(data, Loader=_UniqueKeysLoader)
    except yaml.reader.ReaderError as err:
        problem = "holds a control character" if err.encoding == "unicode" else f"is not {err.encoding} text"
        raise SpecError(field, f"{shown} {problem} (at position {err.position})") from None
    except yaml.YAMLError as err:
        raise SpecError(field, f"{shown} is not valid YAML{_yaml_where(err)}") from None
    except RecursionError:
        raise SpecError(field, f"{shown} is nested too deeply") from None


def existing_file(path: str, value, *, base: Path) -> Path:
    """A spec field naming a file that must exist (``workload.trace``), relative to
    ``base`` unless absolute: its resolved path, or a one-line error for a name that
    is not a string, is too long, holds a NUL, or names no regular file."""
    candidate = Path(string(path, value))
    candidate = candidate if candidate.is_absolute() else base / candidate
    try:
        candidate = candidate.resolve()
        is_file, is_dir = candidate.is_file(), candidate.is_dir()
    except (OSError, RuntimeError, ValueError):  # a name too long, a symlink loop, a NUL
        is_file = is_dir = False
    if not is_file:
        raise error(path, f"{'a directory, not a file' if is_dir else 'no such file'}: {shown_path(candidate)}")
    return candidate


def writable_dir(path: str, value: str | Path) -> Path:
    """A directory to write into, made later where missing: ``value`` as a Path, or a
    one-line error where it, or its nearest existing ancestor, is a file or cannot
    be read (checked before any work, so that a result is not lost at its end)."""
    directory = Path(value).absolute()
    try:
        nearest = next(p for p in (directory, *directory.parents) if p.exists())
        is_dir = nearest.is_dir()
    except OSError as err:  # a directory on the way that cannot be read
        raise error(path, f"{value}: {err.strerror}") from None
    if not is_dir:
        raise error(path, f"{value}: {'is' if nearest == directory else f'{nearest} is'} a file, not a directory")
    return Path(value)


def dir_flag(value: str) -> str:
    """An argparse type for a ``--out`` directory to write into: refused before any
    work where it cannot be one (argparse names the flag in its one-line error)."""
    try:
        writable_dir("--out", value)
    except SpecError as err:
        raise argparse.ArgumentTypeError(err.problem) from None
    return value


def count_flag(text: str) -> int:
    """A command-line flag's whole number >= 1 (an argparse type: argparse names the
    flag in its one-line error)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def at(path: str, key: str | int) -> str:
    """The path of a list's item (``a[2]``) or a mapping's field (``a.b``); a field
    name that is not a plain word is quoted (``a['b c']``) so a path stays one line,
    and one longer than ``MAX_KEY_SHOWN`` characters is cut (``a['xxx'...]``)."""
    if isinstance(key, int) and not isinstance(key, bool):
        return f"{path}[{key}]"
    if len(key) > MAX_KEY_SHOWN:  # a field name pasted by mistake: its start is enough to find it
        return f"{path}[{key[:MAX_KEY_SHOWN - 20]!r}...]"
    if not _PLAIN_KEY.fullmatch(key):
        return f"{path}[{key!r}]"
    return f"{path}.{key}" if path else key


def describe(value) -> str:
    """A value as a message shows it: its kind for containers, YAML spelling for
    true/false/null, and a short repr otherwise (always one line)."""
    if isinstance(value, dict):
        return "a mapping" if value else "an empty mapping"
    if isinstance(value, list):
        return f"a list of {len(value)} item{'s' if len(value) != 1 else ''}" if value else "an empty list"
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def nearest(name: str, known) -> str | None:
    """The known name a misspelt ``name`` most likely meant, if one is near enough."""
    found = difflib.get_close_matches(name, list(known), n=1, cutoff=0.75)
    return found[0] if found else None


def error(path: str, problem: str) -> SpecError:
    """The error for ``path`` (the root is called ``spec``), for the caller to raise."""
    return SpecError(path or "spec", problem)


def relocate(err: Exception, root: str, path: str) -> SpecError:
    """A lower layer's one-line ``field: problem`` error (``TopologyError``,
    ``PolicyError``, whose fields are plain dotted words) as a SpecError at the
    spec's own path: ``policy.queue`` with root ``policy`` at path ``flows[1]``
    becomes ``flows[1].queue``; a field outside ``root`` is put under ``path``."""
    field, sep, problem = str(err).partition(": ")
    if not sep:
        return error(path, str(err))
    if field == root or field.startswith(root + "."):
        field = field[len(root):].lstrip(".")
    return error(f"{path}.{field}" if path and field else path or field, problem)


def mapping(path: str, value, *, allowed: Iterable[str] | None = None, required: Iterable[str] = (),
            optional: bool = False) -> dict:
    """A mapping whose field names are strings, among ``allowed`` when given, with
    every ``required`` field present. ``optional``: a missing (null) section is empty."""
    if value is None and optional:
        return {}
    if not isinstance(value, dict):
        raise error(path, f"must be a mapping, got {describe(value)}")
    allowed = None if allowed is None else sorted(allowed)
    unknown = [key for key in value if not isinstance(key, str) or (allowed is not None and key not in allowed)]
    if unknown:
        # a misspelling first: a mistyped `workload` makes a spec another kind, whose
        # unknown fields (`seed`, ...) are not the mistake
        near, key = next(((near, key) for key in unknown if (near := nearest(str(key), allowed or []))),
                         (None, unknown[0]))
        known = f" (allowed: {', '.join(allowed)})" if allowed is not None else ""
        raise error(at(path, str(key)), f"unknown field{f'; did you mean {near}?' if near else ''}{known}")
    for key in required:
        if key not in value:
            raise error(at(path, key), "is required")
    return value


def sequence(path: str, value, *, non_empty: bool = False, optional: bool = False) -> list:
    """A list (``non_empty``: with at least one item). ``optional``: null is empty."""
    if value is None and optional:
        return []
    if not isinstance(value, list) or (non_empty and not value):
        raise error(path, f"must be a {'non-empty ' if non_empty else ''}list, got {describe(value)}")
    return value


def items(path: str, value, *, non_empty: bool = False, optional: bool = False) -> list[tuple[str, object]]:
    """A list's items, each with its own path (``flows[0]``, ``flows[1]``, ...)."""
    return [(at(path, i), item) for i, item in enumerate(sequence(path, value, non_empty=non_empty,
                                                                   optional=optional))]


def string(path: str, value, *, what: str | None = None, non_empty: bool = True) -> str:
    """A string; ``what`` names it in the message (``a host name``)."""
    if not isinstance(value, str) or (non_empty and not value):
        expected = f"{what} (string)" if what else f"a {'non-empty ' if non_empty else ''}string"
        raise error(path, f"must be {expected}, got {describe(value)}")
    return value


def host_name(path: str, value, hosts: Sequence[str]) -> str:
    """The name of one of ``hosts`` (the topology's, in its order): a string naming a
    host, else ``'tbh9' is not a host of the topology (tbh1..tbh4)``."""
    name = string(path, value, what="a host name")
    if name not in hosts:
        shown = f" ({hosts[0]}..{hosts[-1]})" if hosts else ""
        raise error(path, f"{describe(name)} is not a host of the topology{shown}")
    return name


def word(path: str, value) -> str:
    """A non-empty word of letters, digits, - and _: safe in file names and commands."""
    if not (isinstance(value, str) and value and all(c.isalnum() or c in "-_" for c in value)):
        raise error(path, f"must be a non-empty word of letters, digits, - and _, got {describe(value)}")
    return value


def boolean(path: str, value) -> bool:
    if not isinstance(value, bool):
        raise error(path, f"must be true or false, got {describe(value)}")
    return value


def _shown(bound: float) -> str:
    return str(bound) if isinstance(bound, int) else f"{bound:g}"


def _bounds(minimum, maximum, strict: bool) -> str:
    low = "(" if strict else "["
    if minimum is not None and maximum is not None:
        return f"in {low}{_shown(minimum)}, {_shown(maximum)}]"
    if minimum is not None:
        return f"{'>' if strict else '>='} {_shown(minimum)}"
    return f"<= {_shown(maximum)}" if maximum is not None else ""


def _in_bounds(value, minimum, maximum, strict: bool) -> bool:
    if minimum is not None and (value < minimum or (strict and value == minimum)):
        return False
    return maximum is None or value <= maximum


def integer(path: str, value, *, minimum: int | None = None, maximum: int | None = None) -> int:
    """An integer (never a bool or a float such as 4.0) within [minimum, maximum]."""
    bounds = _bounds(minimum, maximum, strict=False)
    if isinstance(value, bool) or not isinstance(value, int):
        raise error(path, f"must be an integer{' ' + bounds if bounds else ''}, got {describe(value)}")
    if not _in_bounds(value, minimum, maximum, strict=False):
        raise error(path, f"must be {bounds}, got {describe(value)}")
    return value


def number(path: str, value, *, minimum: float | None = None, maximum: float | None = None,
           strict: bool = False) -> float:
    """A finite number (int or float, never a bool) within the bounds; ``strict``
    excludes ``minimum`` itself (``> 0``)."""
    bounds = _bounds(minimum, maximum, strict)
    try:
        as_float = float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else math.nan
    except OverflowError:  # an int beyond any float
        as_float = math.inf
    if not math.isfinite(as_float):
        raise error(path, f"must be a number{' ' + bounds if bounds else ''}, got {describe(value)}")
    if not _in_bounds(as_float, minimum, maximum, strict):
        raise error(path, f"must be {bounds}, got {describe(value)}")
    return as_float


def choice(path: str, value, options: Iterable, *, what: str | None = None):
    """One of ``options``, matched with its type (true is not 1). With ``what``
    (``model``), an unknown name reads ``unknown model 'MLP' (known: GCN, ...)``."""
    options = list(options)
    for option in options:
        if type(value) is type(option) and value == option:
            return option
    known = ", ".join(str(o) for o in options)
    near = nearest(value, [o for o in options if isinstance(o, str)]) if isinstance(value, str) else None
    meant = f"; did you mean {near}?" if near else ""
    if what is None:
        raise error(path, f"must be one of {known}, got {describe(value)}{meant}")
    if not any(type(value) is type(o) for o in options):
        raise error(path, f"must be a {what} name (string), got {describe(value)}")
    raise error(path, f"unknown {what} {describe(value)} (known: {known}){meant}")


# A researcher's own function, named as Python would import it: "package.module:function".
OWN_FUNCTION = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")


def own_function(name: str, signature: str, arguments: int):
    """The function a ``module:function`` name stands for, imported from the Python path,
    else from the current directory or the checkout (the ``trainbed`` command, unlike
    ``python -m``, puts neither on the path, and sudo drops PYTHONPATH); ValueError
    (one line) for a name it cannot import or that is not a function of ``arguments``
    positional arguments (``signature`` says what one it should be)."""
    for place in (str(Path.cwd()), str(REPO_ROOT)):
        if place not in sys.path:
            sys.path.append(place)  # after everything else: it shadows nothing installed
    module, _, function = name.partition(":")
    try:
        found = getattr(_current_module(module), function)
    # the researcher's module may fail any way as it is imported, exit included
    except (Exception, SystemExit) as err:  # pylint: disable=broad-except
        raise ValueError(f"{name}: cannot import it ({one_line(err)})") from None
    if not callable(found):
        raise ValueError(f"{name}: is not a function {signature}")
    try:
        inspect.signature(found).bind(*range(arguments))
    except TypeError:  # it cannot be called with the arguments it will be given
        raise ValueError(f"{name}: takes {_parameters(found)}, not {signature}") from None
    except ValueError:  # no signature to read (some built-ins): its call will say
        pass
    return found


# module name -> its file's (mtime, size) when ``own_function`` last imported it
_OWN_MODULE_STAMPS: dict[str, tuple[int, int] | None] = {}


def _current_module(module: str):
    """``module`` imported, and imported again where its file changed since
    ``own_function`` last imported it: a researcher who edits their function between
    two runs in one Python process (a notebook) runs the edit, not the first version."""
    loaded = module in sys.modules
    found = importlib.import_module(module)
    try:
        info = os.stat(found.__file__)
        stamp = (info.st_mtime_ns, info.st_size)
    except (AttributeError, TypeError, OSError):  # no file to compare (a namespace package)
        stamp = None
    if loaded and module in _OWN_MODULE_STAMPS and stamp != _OWN_MODULE_STAMPS[module]:
        found = importlib.reload(found)
    _OWN_MODULE_STAMPS[module] = stamp
    return found


def importable_beside(path: str, name, here: Path) -> None:
    """Puts ``here`` on the import path when ``name`` is a ``module:function`` whose module
    lies there: a spec (or sweep) kept with its own function's module names it as it
    lies. One module of a name a process: a SpecError at ``path`` when another of the
    same name (other code) is loaded already (Python would hand that one out)."""
    if not (isinstance(name, str) and OWN_FUNCTION.fullmatch(name)):
        return
    top = name.partition(":")[0].split(".")[0]
    try:
        beside = here / f"{top}.py" if (here / f"{top}.py").is_file() else here / top / "__init__.py"
        if not beside.is_file():
            return
    except (OSError, ValueError):  # a name too long, a NUL: the import names it
        return
    loaded = getattr(sys.modules.get(top), "__file__", None)
    if loaded is not None and Path(loaded).resolve() != beside.resolve() and \
            not _same_code(Path(loaded), beside):  # a run keeps a copy of the one it ran: the same
        raise error(path, f"{name}: another module {top} is loaded already, from {loaded}, not this one "
                          f"from {beside}: give one of them another name")
    if str(here) not in sys.path:
        sys.path.append(str(here))


def _same_code(a: Path, b: Path) -> bool:
    """Whether two modules' files (a module's ``.py``, or a package's ``__init__.py``)
    are the same code: the same bytes, and for a package every file of it the same
    (compiled caches aside; a link compared by where it points, as a run keeps it).
    What cannot be read is not the same."""
    def contents(package: Path) -> dict[str, bytes]:
        found = {}
        for root, dirs, files in os.walk(package):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            for name in [*dirs, *files]:
                path = Path(root) / name
                if path.is_symlink():
                    found[str(path.relative_to(package))] = os.readlink(path).encode()
                elif name in files:
                    found[str(path.relative_to(package))] = path.read_bytes()
        return found
    try:
        if a.name != b.name or a.read_bytes() != b.read_bytes():
            return False
        return a.name != "__init__.py" or contents(a.parent) == contents(b.parent)
    except OSError:
        return False


KEPT_PACKAGE_MAX_BYTES = 5_000_000  # a package of your own larger than this is a library, not a scheduler


def keep_beside(name, directory: Path) -> None:
    """Copies the module of a ``module:function`` into ``directory``, beside the run's
    ``spec.yaml``, so that the run keeps the code it ran and its spec runs again from
    there: a single-file module, or the top package of a dotted one (links kept as
    links), unless it lies in the checkout with git tracking it unchanged (the run's
    commit holds it) or in an installed environment, is larger than ``KEPT_PACKAGE_MAX_BYTES``, or
    would land on a file of the run. What is not copied, or cannot be, is a warning line: the run goes on."""
    if not (isinstance(name, str) and OWN_FUNCTION.fullmatch(name)):
        return
    top = name.partition(":")[0].split(".")[0]
    loaded = getattr(sys.modules.get(top), "__file__", None)
    if not loaded:  # a namespace package or a built-in module: no file of its own
        return
    loaded = Path(loaded).resolve()
    source = loaded if loaded.name == f"{top}.py" else loaded.parent if loaded.name == "__init__.py" else None
    if source is None or _installed_or_committed(source):
        return
    target = directory / source.name
    try:
        if target.exists():
            raise FileExistsError(f"the run directory has a {target.name} of its own")
        if source.is_file():
            shutil.copy2(source, target)
            return
        size = sum((Path(root) / f).lstat().st_size for root, dirs, files in os.walk(source)
                   if "__pycache__" not in Path(root).parts for f in files)
        if size > KEPT_PACKAGE_MAX_BYTES:
            raise ValueError(f"{size / 1e6:.1f} MB, over {KEPT_PACKAGE_MAX_BYTES / 1e6:.0f} MB")
        shutil.copytree(source, target, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
    except (OSError, ValueError) as err:
        print(f"run: warning: {name}'s module {source} is not copied into the run directory ({one_line(err)})",
              file=sys.stderr, flush=True)


def _installed_or_committed(path: Path) -> bool:
    """Whether a module lies in an installed environment, or in the checkout with every
    file of it tracked by git as committed (the run's commit then holds it; a file
    edited since, staged or not, is not held, though the run records a dirty tree)."""
    roots = [sys.prefix, sys.base_prefix, *site.getsitepackages(), site.getusersitepackages()]
    if any(path.is_relative_to(Path(root).resolve()) for root in roots):
        return True
    checkout = Path(REPO_ROOT).resolve()
    if not path.is_relative_to(checkout):
        return False

    def files(*args: str) -> list[str]:
        return subprocess.run(["git", "-C", str(checkout), *args, "--", str(path)], capture_output=True, text=True,
                              timeout=30, check=True).stdout.splitlines()

    try:  # untracked (ignored too), then tracked but changed against the commit
        changed = files("ls-files", "--others") + files("diff", "--name-only", "HEAD")
    except (OSError, subprocess.SubprocessError):  # no git, or not a repository: nothing holds it
        return False
    return not [f for f in changed if "__pycache__" not in Path(f).parts]


def _parameters(function) -> str:
    try:
        return str(inspect.signature(function))
    except ValueError:
        return "other arguments"


def inclusive_range(path: str, value, check: Callable[[str, object], float]) -> list:
    """A ``[low, high]`` pair with low <= high, each end read by ``check(path, value)``
    (e.g. ``lambda p, v: integer(p, v, minimum=1)``)."""
    if not isinstance(value, list) or len(value) != 2:
        raise error(path, f"must be a range [low, high], got {describe(value)}")
    low, high = (check(at(path, i), end) for i, end in enumerate(value))
    if low > high:
        raise error(path, f"must have low <= high, got [{_shown(low)}, {_shown(high)}]")
    return [low, high]
