"""The one manifest loader every command shares: files, folders and standard input to
``(source, object)`` pairs, with the one ``UsageError`` for input that is wrong as a whole.

Belongs here: reading and decoding files, the YAML loader (duplicate keys refused, libyaml when
present), naming each object by its place (``FILE (document N, item M)``), the notes on what a
folder skipped, and reading aside in a forked child. Does not belong here: what the objects mean
(``koordpy.sim`` and ``koordpy.api`` parse them), or any command's output.
"""

from __future__ import annotations

import os
import pickle
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO, cast

import yaml

from koordpy.errors import BadInput, KoordpyError, one_line
from koordpy.sim.errors import InputError

FOLDER_SUFFIXES = (".yaml", ".yml")  # a folder's JSON files are often not manifests
FOLDER_RULE = "only *.yaml/*.yml are read from folders"
STDIN = "-"
STDIN_NAME = "<stdin>"
_MERGE_TAG = "tag:yaml.org,2002:merge"
_STR_TAG = "tag:yaml.org,2002:str"

# libyaml's parser is several times faster on a cluster-sized dump; the constructor stays Python either way.
_BaseLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class NoDuplicateKeys(yaml.constructor.SafeConstructor):
    """Refuses a key given twice in one mapping (PyYAML keeps the last, silently)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        explicit = [k for k, _ in node.value]  # before flatten_mapping splices merged (<<) keys in
        mapping: dict[Any, Any] = super().construct_mapping(node, deep=deep)
        if len(mapping) == len(node.value) == len(explicit):
            return mapping
        seen: dict[Any, yaml.Node] = {}
        for key_node in explicit:
            if key_node.tag == _MERGE_TAG:
                continue  # a merged key that is also given explicitly is overridden by design
            key = self.construct_object(key_node)  # already constructed above: a cache look-up
            if key in seen:
                first = seen[key].start_mark.line + 1
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r} (first at line {first})", key_node.start_mark)
            seen[key] = key_node
        return mapping


class _Loader(NoDuplicateKeys, _BaseLoader):  # type: ignore[valid-type,misc]
    def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
        # Most scalars of a manifest are quoted, or plain and starting with a character no implicit
        # type (int, bool, null, timestamp...) can start with: they are strings, decided without
        # the regex walk. The rest, and every collection, goes the usual way.
        if kind is yaml.ScalarNode and (not implicit[0] or (value and value[0] not in _IMPLICIT_FIRST)):
            return _STR_TAG
        return super().resolve(kind, value, implicit)

    def descend_resolver(self, current_node: Any, current_index: Any) -> None:
        pass  # no path resolvers are registered, so there is no path to track

    def ascend_resolver(self) -> None:
        pass


_IMPLICIT_FIRST = frozenset(k for k in _Loader.yaml_implicit_resolvers if k)


def _documents(text: str) -> list[Any]:
    """Every document of ``text``. libyaml composes the nodes; turning them into dicts and lists here,
    strings straight from the node, costs half of what PyYAML's generic constructor does on a
    cluster-sized dump. Anything unusual (merge keys, non-string scalars, unknown tags) still goes
    through the constructor above, duplicate check and error messages included."""
    loader = cast(Any, _Loader)(text)  # its libyaml base is untyped
    try:
        out = []
        while loader.check_node():
            node = loader.get_node()
            out.append(None if node is None else _build(node, loader, {}))
        return out
    finally:
        loader.dispose()


def _build(node: yaml.Node, loader: _Loader, seen: dict[int, Any]) -> Any:
    kind = node.__class__
    if kind is yaml.ScalarNode:
        return node.value if node.tag == _STR_TAG else loader.construct_object(node, deep=True)
    done = seen.get(id(node))  # an alias of a collection built already
    if done is not None:
        return done
    if kind is yaml.SequenceNode:
        items: list[Any] = []
        seen[id(node)] = items
        items.extend(_build(n, loader, seen) for n in node.value)
        return items
    if node.tag != "tag:yaml.org,2002:map" or any(k.tag == _MERGE_TAG for k, _ in node.value):
        return loader.construct_object(node, deep=True)
    mapping: dict[Any, Any] = {}
    seen[id(node)] = mapping
    for key_node, value_node in node.value:
        key = _build(key_node, loader, seen)
        try:
            duplicate = key in mapping
        except TypeError:
            duplicate = True
        if duplicate:  # the constructor says what is wrong, in the words it uses everywhere
            return loader.construct_object(node, deep=True)
        mapping[key] = _build(value_node, loader, seen)
    return mapping


class UsageError(BadInput, ValueError):
    """Input that is wrong as a whole rather than in one object, or arguments that cannot be used
    (together); every command's. Exit 2, like an object at fault."""


@dataclass
class Loaded:
    docs: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def yaml_problem(name: str, text: str, exc: yaml.YAMLError) -> str:
    """``NAME:LINE:COLUMN: problem`` on one line, instead of PyYAML's multi-line dump."""
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or "not valid YAML"
        if exc.problem and exc.context and exc.context_mark is not None:
            problem += f" ({exc.context} at line {exc.context_mark.line + 1})"
        where = f"{name}:{mark.line + 1}:{mark.column + 1}" if mark is not None else name
        return f"{where}: {problem}"
    if isinstance(exc, yaml.reader.ReaderError):
        before = text[:exc.position]
        line, column = before.count("\n") + 1, exc.position - (before.rfind("\n") + 1) + 1
        char = exc.character if isinstance(exc.character, int) else ord(exc.character)
        return f"{name}:{line}:{column}: unacceptable character #x{char:04x}: {exc.reason}"
    return f"{name}: not valid YAML: {' '.join(str(exc).split())}"


def parse_manifests(name: str, text: str) -> tuple[list[tuple[str, dict[str, Any]]], str]:
    """The objects in one file's text, each with ``NAME (document N[, item M])``; and, when there are
    none, why (for the message)."""
    try:
        loaded = _documents(text)
    except yaml.YAMLError as exc:
        if isinstance(exc, yaml.MarkedYAMLError) and "nesting depth" in (exc.problem or ""):
            # PyYAML 6.0.4 stops at a depth of its own where earlier ones ran out of stack: one message for both.
            raise UsageError(f"{name}: nested too deeply to be a Kubernetes object") from exc
        raise UsageError(yaml_problem(name, text, exc)) from exc
    except RecursionError as exc:
        raise UsageError(f"{name}: nested too deeply to be a Kubernetes object") from exc
    docs: list[tuple[str, dict[str, Any]]] = []
    lists = 0
    for i, doc in enumerate(loaded):
        where = f"{name} (document {i + 1})"
        if doc is None:
            continue
        if not isinstance(doc, dict):
            raise InputError(where, f"not a Kubernetes object (a {type(doc).__name__})")
        if not str(doc.get("kind", "")).endswith("List") or "items" not in doc:
            docs.append((where, doc))
            continue
        items = doc["items"] if doc["items"] is not None else []
        if not isinstance(items, list):
            raise InputError(where, f"{doc['kind']}: items: expected a list, got {type(items).__name__}")
        lists += 1
        docs.extend((f"{name} (document {i + 1}, item {j + 1})", item) for j, item in enumerate(items))
    why = "a List with no items" if lists else "empty"
    return docs, why


def _read(path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8")
    except OSError as exc:
        raise InputError(str(path), f"cannot read: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise InputError(str(path), f"cannot read: not UTF-8 text (byte {exc.start})") from exc


def _read_stdin(stdin: TextIO) -> str:
    try:
        data = stdin.buffer.read() if hasattr(stdin, "buffer") else stdin.read()
        return data.decode("utf-8") if isinstance(data, bytes) else data
    except UnicodeDecodeError as exc:
        raise InputError(STDIN_NAME, f"cannot read: not UTF-8 text (byte {exc.start})") from exc


def load_documents(paths: list[str], stdin: TextIO | None = None) -> Loaded:
    """Every object in the given files, folders (their ``*.yaml``/``*.yml`` in name order) and ``-``
    (standard input), in order. An input that yields no object is an error: a replay whose
    ``kubectl get`` failed must not quietly simulate an empty cluster."""
    if paths.count(STDIN) > 1:
        raise UsageError(f"'-f -' given {paths.count(STDIN)} times: standard input can be read once")
    out = Loaded()
    empty: list[str] = []
    for p in paths:
        if p == STDIN:
            found, why = parse_manifests(STDIN_NAME, _read_stdin(stdin or sys.stdin))
            out.docs.extend(found)
            if not found:
                empty.append(f"{STDIN_NAME} ({why})")
            continue
        path = Path(p)
        if path.is_dir():
            _load_folder(path, out, empty)
        elif path.exists():  # a regular file, or a pipe such as <(kubectl get ... -o yaml)
            found, why = parse_manifests(p, _read(path))
            out.docs.extend(found)
            if not found:
                empty.append(f"{p} ({why})")
        else:
            raise InputError(p, "no such file or folder")
    if empty:
        raise UsageError(f"no Kubernetes objects in: {'; '.join(empty)}")
    return out


def _load_folder(path: Path, out: Loaded, empty: list[str]) -> None:
    label = str(path).rstrip("/") + "/"
    entries = sorted(path.iterdir())
    files = [f for f in entries if f.suffix.lower() in FOLDER_SUFFIXES and f.is_file()]
    skipped = [f.name + ("/" if f.is_dir() else "") for f in entries if f not in files]
    found_here = 0
    for f in files:
        found, _ = parse_manifests(str(f), _read(f))
        out.docs.extend(found)
        found_here += len(found)
    if found_here and skipped:
        out.notes.append(f"{label}: skipped {', '.join(skipped)} ({FOLDER_RULE})")
    elif not found_here:
        parts = [f"read {', '.join(f.name for f in files)}: no objects"] if files else []
        if skipped:
            parts.append(f"skipped {', '.join(skipped)}: {FOLDER_RULE}")
        empty.append(f"{label} ({'; '.join(parts) or 'an empty folder'})")


def read_aside(paths: list[str]) -> Callable[[], Loaded]:
    """Starts reading the manifests in a forked child, so that YAML parsing (the longest part of a
    cluster-sized run) overlaps with loading the scheduler and its compiled kernels on the other
    core. Returns a function that waits for the child and returns what it read, raising what it
    raised. Without ``fork`` the reading simply happens when the function is called."""
    if not hasattr(os, "fork"):
        return lambda: load_documents(paths)
    sys.stdout.flush()
    sys.stderr.flush()
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: read, send the result (or the error) back, and leave at once
        os.close(read_end)
        payload: tuple[str, object]
        try:
            payload = ("ok", load_documents(paths))
        except KoordpyError as exc:
            payload = ("error", one_line(exc))
        except BaseException:
            payload = ("crash", traceback.format_exc())
        with os.fdopen(write_end, "wb") as out:
            pickle.dump(payload, out, protocol=pickle.HIGHEST_PROTOCOL)
        os._exit(0)
    os.close(write_end)

    def wait() -> Loaded:
        with os.fdopen(read_end, "rb") as data:
            raw = data.read()
        _, status = os.waitpid(pid, 0)
        if not raw:
            raise RuntimeError(f"the manifest reader died (wait status {status})")
        kind, value = pickle.loads(raw)
        if kind == "error":
            raise UsageError(value)
        if kind == "crash":
            raise RuntimeError(f"the manifest reader failed:\n{value}")
        assert isinstance(value, Loaded)
        return value

    return wait
