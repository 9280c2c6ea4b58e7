"""CEL selectors of DeviceClasses and requests, in Kubernetes' DRA environment (``k8s.io/dynamic-resource-
allocation/cel`` v0.37.2, as kube-scheduler's allocator compiles them: stored expressions).

Belongs here: ``compile_selector`` (once per expression, cached) and ``Selector.matches`` (one device),
with the checking a selector gets before it runs (names, overloads, the result must be a bool) and the
runtime cost limit (``CELSelectorExpressionMaxCost``). Not here: which devices a request gets or the
verdict cache per device (``koordpy.devices.pools``), the words around an error (the allocator says
which class or claim, selector and device).

The environment: ``device`` with ``driver``, ``attributes`` (domain -> name -> value; a name without a
domain in the device's record is the driver's; an unknown domain is an empty map), ``capacity`` (domain
-> name -> quantity) and ``allowMultipleAllocations``; Kubernetes' base library of v1.37 (the standard
functions and macros, ``cel.bind``, optional values ``.?`` / ``[?`` / ``orValue``, ext.Strings v2,
ext.Sets, ext.Lists v3 and Kubernetes' lists library with ``includes``, regex ``find`` / ``findAll``,
quantity and semver, two-variable ``all`` / ``exists`` / ``existsOne``). Left out, each a compile error
naming it: timestamps and durations, url, ip and cidr, named formats, ``format``, ``sortBy`` and the
``transform*`` macros, message construction and optional entries in literals; none of them is about a
device. This is a compiler of its own rather than a CEL package: see docs/design.md, "CEL (issue 30)".

The tree compiles to nested Python closures, each taking the evaluation's ``_Ctx`` (the device, the
comprehension variables, the cost so far). A CEL error is ``EvalError`` inside and ``CelRuntimeError``
outside; cost counts as cel-go's runtime tracker does, unit for unit (the rules: docs/design.md), and
the parts cel-go's planner computes when it builds the program are computed here when compiling, their
failures compile errors as there. tests/devices/test_cel_upstream.py holds all of it to upstream's
own CEL (e2e/celref).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Any

from koordpy.api.dra import AttrValue as AttrValue
from koordpy.api.dra import Capacity, SemVer
from koordpy.devices import cellib
from koordpy.devices.cellib import (
    EMPTY,
    NONE,
    CostExceeded,
    EvalError,
    Optional,
    Quantity,
    map_get,
)
from koordpy.devices.celparse import (
    And,
    Call,
    Cond,
    Ident,
    Index,
    ListLit,
    Lit,
    MapLit,
    Node,
    Or,
    ParseError,
    Select,
    UInt,
    location,
    parse,
)

MAX_COST = cellib.MAX_COST  # resourceapi.CELSelectorExpressionMaxCost
MAX_LENGTH = 10 * 1024  # resourceapi.CELSelectorExpressionMaxLength (the API server's limit)
NO_SUCH_KEY_HINT = ("consider using CEL optional chaining (.? followed by orValue()) or guarding the check "
                    "with has() for optional fields")


class CelError(Exception):
    """A selector that cannot be used; ``message`` is what to tell the user."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class CelCompileError(CelError):
    pass


class CelRuntimeError(CelError):
    """A selector failed on a device (a missing key, no such overload, the cost limit...). ``message``
    carries the hint kube-scheduler's allocator adds to a missing key; ``detail`` is cel-go's error."""

    def __init__(self, detail: str) -> None:
        super().__init__(f"{detail}. {NO_SUCH_KEY_HINT}" if "no such key:" in detail else detail)
        self.detail = detail


# -- static types ---------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class T:
    kind: str
    params: tuple[T, ...] = ()
    var: bool = False  # the element of an empty literal: dyn until something else says what it is

    def __str__(self) -> str:
        return f"{self.kind}({', '.join(map(str, self.params))})" if self.params else self.kind


DYN, BOOL, INT, UINT, DOUBLE = T("dyn"), T("bool"), T("int"), T("uint"), T("double")
STRING, BYTES, NULL, TYPE = T("string"), T("bytes"), T("null_type"), T("type")
QUANTITY, SEMVER = T("kubernetes.Quantity"), T("kubernetes.Semver")
DEVICE = T("kubernetes.DRADevice")
VAR = T("dyn", var=True)
_DEVICE_FIELDS = {
    "driver": STRING,
    "attributes": T("map", (STRING, T("map", (STRING, DYN)))),
    "capacity": T("map", (STRING, T("map", (STRING, QUANTITY)))),
    "allowMultipleAllocations": BOOL,
}
_NUMERIC = ("int", "uint", "double")
_NAMESPACES = ("cel", "optional", "sets", "lists", "strings")


def _list(elem: T) -> T:
    return T("list", (elem,))


def _optional(elem: T) -> T:
    return T("optional_type", (elem,))


def _param(t: T, i: int) -> T:
    return t.params[i] if len(t.params) > i else DYN


def _compatible(a: T, b: T) -> bool:
    if a.kind == "dyn" or b.kind == "dyn":
        return True
    if a.kind != b.kind:
        return False
    return all(_compatible(x, y) for x, y in zip(a.params, b.params, strict=False))


def _join(a: T, b: T) -> T:
    """The type of a value that is one of two (a conditional's branches, concatenated lists)."""
    if a == b or b.var:
        return a
    if a.var:
        return b
    if a.kind == b.kind and a.kind in ("list", "map") and len(a.params) == len(b.params):
        return T(a.kind, tuple(_join(x, y) for x, y in zip(a.params, b.params, strict=True)))
    return DYN


_LIT_TYPES = {bool: BOOL, int: INT, UInt: UINT, float: DOUBLE, str: STRING, bytes: BYTES, type(None): NULL}


# -- the device as the expression sees it -------------------------------------------------------------

def _attr_value(value: AttrValue) -> object:
    try:
        if isinstance(value, SemVer):
            return cellib.parse_semver(value.text)
        if isinstance(value, tuple):
            return tuple(cellib.parse_semver(v.text) if isinstance(v, SemVer) else v for v in value)
    except ValueError as e:  # the API server refuses such a slice; a record built by hand may not
        raise EvalError(f"parse semantic version: {e}") from None
    return value


class _Domain(Mapping[str, Any]):
    """``device.attributes[domain]`` or ``device.capacity[domain]``: a view of the device's record."""

    __slots__ = ("_default", "_names", "_prefix", "_raw", "_value")

    def __init__(self, raw: Mapping[str, Any], domain: str, driver: str, value: Callable[[Any], object]) -> None:
        self._raw = raw
        self._prefix = domain + "/"
        self._default = domain == driver
        self._value = value
        self._names: list[str] | None = None

    def __getitem__(self, name: str) -> object:
        raw = self._raw.get(self._prefix + name) if type(name) is str else None
        if raw is None and self._default and type(name) is str and "/" not in name:
            raw = self._raw.get(name)
        if raw is None:
            raise KeyError(name)
        return self._value(raw)

    def names(self) -> list[str]:
        if self._names is None:
            prefix, out = self._prefix, []
            for key in self._raw:
                if key.startswith(prefix):
                    out.append(key[len(prefix):])
                elif self._default and "/" not in key:
                    out.append(key)
            self._names = out
        return self._names

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.names())

    def __contains__(self, name: object) -> bool:
        try:
            self[name]  # type: ignore[index]
        except KeyError:
            return False
        return True


class _Domains(Mapping[str, Any]):
    """``device.attributes`` / ``device.capacity``: a missing domain is an empty map, as upstream's."""

    __slots__ = ("_domains", "_driver", "_raw", "_value")

    def __init__(self, raw: Mapping[str, Any], driver: str, value: Callable[[Any], object]) -> None:
        self._raw = raw
        self._driver = driver
        self._value = value
        self._domains: list[str] | None = None

    def __getitem__(self, domain: str) -> _Domain:
        return _Domain(self._raw, domain, self._driver, self._value)

    def domains(self) -> list[str]:
        if self._domains is None:
            seen = dict.fromkeys(key.partition("/")[0] if "/" in key else self._driver for key in self._raw)
            self._domains = list(seen)
        return self._domains

    def __iter__(self) -> Iterator[str]:
        return iter(self.domains())

    def __len__(self) -> int:
        return len(self.domains())

    def __contains__(self, domain: object) -> bool:
        return domain in self.domains()


def _capacity_value(capacity: Capacity) -> Quantity:
    return _record_quantity(capacity.value.text, capacity.value.value)


@lru_cache(maxsize=8192)
def _record_quantity(text: str, value: Fraction) -> Quantity:
    """A capacity as apimachinery holds the slice's: parsed from its text (isInteger depends on how it
    was written), its value where the text does not say it."""
    try:
        parsed = cellib.quantity_of(text)
    except ValueError:
        parsed = None
    if parsed is not None and parsed.value == value:
        return parsed
    whole = value.denominator == 1 and cellib.INT64_MIN <= value.numerator <= cellib.INT64_MAX
    if whole:
        return Quantity(value, (value.numerator, 0))
    return Quantity(value, None, (math.ceil(value * 10**9), 9))


class _Device:
    __slots__ = ("_attributes", "_capacity", "allow_multiple_allocations", "driver", "raw_attributes",
                 "raw_capacity")

    def __init__(self, driver: str, attributes: Mapping[str, AttrValue], capacity: Mapping[str, Capacity],
                 allow_multiple_allocations: bool) -> None:
        self.driver = driver
        self.raw_attributes = attributes
        self.raw_capacity = capacity
        self.allow_multiple_allocations = allow_multiple_allocations
        self._attributes: _Domains | None = None  # the views, made when the expression asks
        self._capacity: _Domains | None = None

    def field(self, name: str) -> object:
        if name == "driver":
            return self.driver
        if name == "attributes":
            if self._attributes is None:
                self._attributes = _Domains(self.raw_attributes, self.driver, _attr_value)
            return self._attributes
        if name == "capacity":
            if self._capacity is None:
                self._capacity = _Domains(self.raw_capacity, self.driver, _capacity_value)
            return self._capacity
        if name == "allowMultipleAllocations":
            return self.allow_multiple_allocations
        raise EvalError(f"no such key: {name}")


def _device_lookup(field: str, domain: str, name: str) -> Fn:
    """``device.attributes[domain].name`` (or ``["name"]``, or capacity) in one step: the record's entry
    under the qualified name, or under the bare name when the domain is the driver's."""
    qualified = f"{domain}/{name}"
    bare = "/" not in name
    convert: Callable[[Any], object] = _attr_value if field == "attributes" else _capacity_value

    def lookup(c: _Ctx) -> Any:
        c.cost += 4
        d = c.device
        raw = d.raw_attributes if field == "attributes" else d.raw_capacity
        value = raw.get(qualified)
        if value is None and bare and domain == d.driver:
            value = raw.get(name)
        if value is None:
            raise EvalError(f"no such key: {name}")
        return convert(value)
    return lookup


_NO_DEVICE = _Device("", {}, {}, False)


class _Ctx:
    __slots__ = ("absorbed", "cost", "device", "limit", "vars")

    def __init__(self, device: _Device, slots: int, limit: int) -> None:
        self.device = device
        self.vars: list[Any] = [None] * slots
        self.cost = 0
        self.limit = limit
        self.absorbed = False  # an error that && / || / all / exists made no difference to


Fn = Callable[[_Ctx], Any]


# -- the compiler ------------------------------------------------------------------------------------------

class _Instantiation(Exception):
    """cel-go's planner failed on a constant part (a conversion, a regular expression)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class _Error(Exception):
    def __init__(self, message: str, pos: int) -> None:
        super().__init__(message)
        self.message = message
        self.pos = pos


class _Compiler:
    def __init__(self) -> None:
        self.scope: dict[str, tuple[int, T]] = {}
        self.slots = 0
        # The nodes cel-go's planner makes constants (literals, lists and maps of them, a type conversion
        # of one): they cost nothing at run time, and a conversion that fails is a compile error.
        self.literals: set[int] = set()

    def constant(self, fn: Fn, node: Node) -> Fn:
        """``fn`` (which reads nothing) as a constant of cel-go's planner: computed now, free later."""
        try:
            value = fn(_Ctx(_NO_DEVICE, self.slots, MAX_COST))
        except EvalError as e:
            raise _Instantiation(e.message) from None
        self.literals.add(id(node))
        return lambda _c: value

    def bind(self, name: str, t: T) -> tuple[int, tuple[int, T] | None]:
        slot = self.slots
        self.slots += 1
        previous = self.scope.get(name)
        self.scope[name] = (slot, t)
        return slot, previous

    def unbind(self, name: str, previous: tuple[int, T] | None) -> None:
        if previous is None:
            del self.scope[name]
        else:
            self.scope[name] = previous

    def compile(self, node: Node) -> tuple[Fn, T]:
        fn, t = self.compile_node(node)
        if isinstance(node, Lit):
            self.literals.add(id(node))
            return fn, t
        if id(node) in self.literals or not _constant(node):
            return fn, t
        # A part that reads neither the device nor a variable has one value: computed here once, its
        # cost still charged on every evaluation (so that a costly constant inside a loop stays costly).
        c = _Ctx(_NO_DEVICE, self.slots, MAX_COST)
        try:
            value = fn(c)
        except (EvalError, CostExceeded):
            return fn, t
        if c.absorbed:  # keep the evaluation that says so
            return fn, t
        cost = c.cost
        if cost == 0:
            return (lambda _c: value), t

        def folded(c: _Ctx) -> Any:
            c.cost += cost
            if c.cost > c.limit:
                raise CostExceeded()
            return value
        return folded, t

    def compile_node(self, node: Node) -> tuple[Fn, T]:
        direct = self.device_lookup(node)
        if direct is not None:
            return direct
        if isinstance(node, Lit):
            return self.literal(node)
        if isinstance(node, Ident):
            return self.ident(node)
        if isinstance(node, Select):
            return self.select(node)
        if isinstance(node, Index):
            return self.index(node)
        if isinstance(node, Call):
            return self.call(node)
        if isinstance(node, (And, Or)):
            return self.logic(node)
        if isinstance(node, Cond):
            return self.conditional(node)
        if isinstance(node, ListLit):
            return self.list_literal(node)
        if isinstance(node, MapLit):
            return self.map_literal(node)
        raise _Error("unsupported expression", node.pos)

    def device_lookup(self, node: Node) -> tuple[Fn, T] | None:
        """The common path ``device.attributes["<domain>"].<name>`` compiled to one closure."""
        if isinstance(node, Select) and not node.optional:
            name, inner = node.field, node.operand
        elif isinstance(node, Index) and not node.optional and isinstance(node.index, Lit) \
                and type(node.index.value) is str:
            name, inner = node.index.value, node.operand
        else:
            return None
        if not (isinstance(inner, Index) and not inner.optional and isinstance(inner.index, Lit)
                and type(inner.index.value) is str):
            return None
        top = inner.operand
        if not (isinstance(top, Select) and not top.optional and top.field in ("attributes", "capacity")
                and isinstance(top.operand, Ident) and top.operand.name == "device" and "device" not in self.scope):
            return None
        result = _param(_param(_DEVICE_FIELDS[top.field], 1), 1)
        return _device_lookup(top.field, inner.index.value, name), result

    # leaves

    def literal(self, node: Lit) -> tuple[Fn, T]:
        value = node.value
        return (lambda c: value), _LIT_TYPES[type(value)]

    def ident(self, node: Ident) -> tuple[Fn, T]:
        bound = self.scope.get(node.name)
        if bound is not None:
            slot, t = bound

            def variable(c: _Ctx) -> Any:
                c.cost += 1
                return c.vars[slot]
            return variable, t
        if node.name in _TYPE_NAMES:  # a type as a value: type(x) == int
            value = cellib.TypeValue(node.name)
            self.literals.add(id(node))
            return (lambda c: value), TYPE
        if node.name == "device":
            def device(c: _Ctx) -> Any:
                c.cost += 1
                return c.device
            return device, DEVICE
        raise _Error(f"undeclared reference to '{node.name}' (in container '')", node.pos)

    # selection and indexing

    def select(self, node: Select) -> tuple[Fn, T]:
        operand, ot = self.compile(node.operand)
        name = node.field
        q = 1 + _relative(node.operand)  # a field is a constant qualifier
        if node.optional or ot.kind == "optional_type":
            return self.optional_select(operand, ot, name, node, q)
        if ot.kind == DEVICE.kind:
            if name not in _DEVICE_FIELDS:
                raise _Error(f"undefined field '{name}'", node.pos)
            if isinstance(node.operand, Ident):  # device.<field>: the variable and the selection at once
                def device_field_of_variable(c: _Ctx) -> Any:
                    c.cost += 2
                    return c.device.field(name)
                return device_field_of_variable, _DEVICE_FIELDS[name]

            def device_field(c: _Ctx) -> Any:
                d = operand(c)
                c.cost += q
                return d.field(name)
            return device_field, _DEVICE_FIELDS[name]
        if ot.kind == "map":
            if not _compatible(_param(ot, 0), STRING):
                raise _Error(f"type '{ot}' does not support field selection", node.pos)

            def map_field(c: _Ctx) -> Any:
                m = operand(c)
                c.cost += q
                try:
                    return m[name]
                except KeyError:
                    raise EvalError(f"no such key: {name}") from None
            return map_field, _param(ot, 1)
        if ot.kind == "dyn":
            def dyn_field(c: _Ctx) -> Any:
                return _select(operand(c), name, c, q)
            return dyn_field, DYN
        raise _Error(f"type '{ot}' does not support field selection", node.pos)

    def optional_select(self, operand: Fn, ot: T, name: str, node: Select, q: int) -> tuple[Fn, T]:
        inner = _param(ot, 0) if ot.kind == "optional_type" else ot
        if inner.kind not in ("map", "dyn", DEVICE.kind):
            raise _Error(f"type '{ot}' does not support field selection", node.pos)
        result = _DEVICE_FIELDS.get(name, DYN) if inner.kind == DEVICE.kind else _param(inner, 1)
        wrap = node.optional

        def optional_field(c: _Ctx) -> Any:
            v = operand(c)
            if isinstance(v, Optional):
                if v.value is NONE:
                    return EMPTY
                v = v.value
            elif not wrap:
                return _select(v, name, c, q)
            # After the first optional qualifier every later one is optional too (cel-go's attributes);
            # one that finds nothing is not charged.
            if isinstance(v, _Device):
                c.cost += q
                return Optional(v.field(name))
            if isinstance(v, Mapping):
                if cellib.contains_key(v, name):
                    c.cost += q
                    return Optional(v[name])
                c.cost += q - 1
                return EMPTY
            raise EvalError(f"no such key: {name}")
        return optional_field, _optional(result)

    def index(self, node: Index) -> tuple[Fn, T]:
        operand, ot = self.compile(node.operand)
        key, kt = self.compile(node.index)
        # A constant index is a qualifier of its own; a computed one costs what computing it costs.
        q = (1 if isinstance(node.index, Lit) else 0) + _relative(node.operand)
        base = _param(ot, 0) if ot.kind == "optional_type" else ot
        if base.kind == "list":
            if kt.kind not in ("int", "uint", "dyn"):
                raise _Error(f"found no matching overload for '_[_]' applied to '({ot}, {kt})'", node.pos)
            result = _param(base, 0)
        elif base.kind == "map":
            if not _compatible(_param(base, 0), kt):
                raise _Error(f"found no matching overload for '_[_]' applied to '({ot}, {kt})'", node.pos)
            result = _param(base, 1)
        elif base.kind == "dyn":
            result = DYN
        else:
            raise _Error(f"found no matching overload for '_[_]' applied to '({ot}, {kt})'", node.pos)
        if node.optional or ot.kind == "optional_type":
            wrap = node.optional

            def optional_index(c: _Ctx) -> Any:
                v = operand(c)
                k = key(c)
                if isinstance(v, Optional):
                    if v.value is NONE:
                        return EMPTY
                    v = v.value
                elif not wrap:
                    return _index(v, k, c, q)
                try:
                    return Optional(_index(v, k, c, q))
                except EvalError as e:
                    if e.message.startswith(("no such key", "index out of bounds")):
                        c.cost -= q - _relative(node.operand)  # a qualifier that finds nothing is free
                        return EMPTY
                    raise
            return optional_index, _optional(result)

        if base.kind == "map" and _param(base, 0).kind == "string" and kt.kind == "string":
            def string_key(c: _Ctx) -> Any:
                m = operand(c)
                k = key(c)
                c.cost += q
                try:
                    return m[k]
                except KeyError:
                    raise EvalError(f"no such key: {k}") from None
            return string_key, result

        def indexed(c: _Ctx) -> Any:
            return _index(operand(c), key(c), c, q)
        return indexed, result

    # logic

    def logic(self, node: And | Or) -> tuple[Fn, T]:
        compiled = [self.compile(t) for t in node.terms]
        op = "_&&_" if isinstance(node, And) else "_||_"
        for _, t in compiled:
            if t.kind not in ("bool", "dyn"):
                raise _Error(f"found no matching overload for '{op}' applied to "
                             f"'({', '.join(str(x) for _, x in compiled)})'", node.pos)
        terms = [f for f, _ in compiled]
        stop = isinstance(node, Or)  # the value that decides: true for ||, false for &&

        if len(terms) == 2:
            first, second = terms

            def two(c: _Ctx) -> Any:
                try:
                    a = first(c)
                except EvalError as e:
                    b = second(c)
                    if b is stop:
                        c.absorbed = True
                        return stop
                    raise e from None
                if a is stop:
                    return stop
                b = second(c)
                if b is stop:
                    return stop
                if a is not (not stop):
                    raise EvalError(f"no such overload: {op}")
                if b is not (not stop):
                    raise EvalError(f"no such overload: {op}")
                return b
            return two, BOOL

        def many(c: _Ctx) -> Any:
            error: EvalError | None = None
            for term in terms:
                try:
                    v = term(c)
                except EvalError as e:
                    error = error or e
                    continue
                if v is stop:
                    c.absorbed = c.absorbed or error is not None
                    return stop
                if type(v) is not bool:
                    error = error or EvalError(f"no such overload: {op}")
            if error is not None:
                raise error
            return not stop
        return many, BOOL

    def conditional(self, node: Cond) -> tuple[Fn, T]:
        cond, ct = self.compile(node.cond)
        then, tt = self.compile(node.then)
        otherwise, ft = self.compile(node.otherwise)
        if ct.kind not in ("bool", "dyn") or not _compatible(tt, ft):
            raise _Error(f"found no matching overload for '_?_:_' applied to '({ct}, {tt}, {ft})'", node.pos)

        # cel-go makes the conditional an attribute of its branches' attributes: a branch that is a
        # variable's path (or a selection on a value) does not pay the 1 its attribute costs elsewhere.
        then_path = isinstance(node.then, (Ident, Select, Index))
        otherwise_path = isinstance(node.otherwise, (Ident, Select, Index))

        def branch(c: _Ctx, fn: Fn, path: bool) -> Any:
            if not path:
                return fn(c)
            before = c.cost
            try:
                return fn(c)
            finally:
                if c.cost > before:
                    c.cost -= 1

        def choose(c: _Ctx) -> Any:
            v = cond(c)
            if v is True:
                return branch(c, then, then_path)
            if v is False:
                return branch(c, otherwise, otherwise_path)
            raise EvalError("no such overload: _?_:_")
        return choose, _join(tt, ft)

    # literals of lists and maps

    def list_literal(self, node: ListLit) -> tuple[Fn, T]:
        compiled = [self.compile(e) for e in node.elements]
        elem = compiled[0][1] if compiled else VAR
        for e, (_, t) in zip(node.elements, compiled, strict=True):
            if not _same_literal_type(elem, t):  # cel.ValidateHomogeneousAggregateLiterals
                raise _Error(f"expected type '{elem}' but found '{t}'", e.pos)
        fns = [f for f, _ in compiled]

        def make_list(c: _Ctx) -> Any:
            c.cost += 10
            return [f(c) for f in fns]
        if all(id(e) in self.literals for e in node.elements):
            return self.constant(make_list, node), _list(elem)
        return make_list, _list(elem)

    def map_literal(self, node: MapLit) -> tuple[Fn, T]:
        entries = [(self.compile(k), self.compile(v)) for k, v in node.entries]
        kt = entries[0][0][1] if entries else VAR
        vt = entries[0][1][1] if entries else VAR
        for (key, value), ((_, k), (_, v)) in zip(node.entries, entries, strict=True):
            if k.kind not in ("int", "uint", "bool", "string", "dyn"):
                raise _Error(f"unsupported map key type: {k}", key.pos)
            if not _same_literal_type(kt, k):
                raise _Error(f"expected type '{kt}' but found '{k}'", key.pos)
            if not _same_literal_type(vt, v):
                raise _Error(f"expected type '{vt}' but found '{v}'", value.pos)
        fns = [(k, v) for (k, _), (v, _) in entries]

        def make_map(c: _Ctx) -> Any:
            c.cost += 30
            out: dict[Any, Any] = {}
            for kf, vf in fns:
                k = kf(c)
                if cellib.kind(k) not in ("int", "uint", "bool", "string"):
                    raise EvalError(f"unsupported key type: {cellib.type_name(k)}")
                out[k] = vf(c)  # a repeated key: the later entry, as cel-go builds the map
            return out
        if all(id(k) in self.literals and id(v) in self.literals for k, v in node.entries):
            return self.constant(make_map, node), T("map", (kt, vt))
        return make_map, T("map", (kt, vt))

    # calls: macros, operators, functions

    def call(self, node: Call) -> tuple[Fn, T]:
        name, target, args = node.function, node.target, node.args
        macro = self.macro(node)
        if macro is not None:
            return macro
        if (isinstance(target, Ident) and target.name in _NAMESPACES and target.name not in self.scope):
            return self.function(f"{target.name}.{name}", None, args, node)
        operator = _OPERATORS.get(name)
        if operator is not None and target is None:
            return operator(self, node)
        return self.function(name, target, args, node)

    def function(self, name: str, target: Node | None, args: list[Node], node: Call) -> tuple[Fn, T]:
        pos = node.pos
        if name in ("orValue", "or") and target is not None and len(args) == 1:
            return self.optional_or(name, target, args[0], pos)
        overloads = cellib.FUNCTIONS.get(name)
        if overloads is None:
            raise _Error(f"undeclared reference to '{name}' (in container '')", pos)
        compiled = ([self.compile(target)] if target is not None else []) + [self.compile(a) for a in args]
        types = [t for _, t in compiled]
        kinds = [_kind(t) for t in types]
        member = target is not None
        candidates = [o for o in overloads if o.member == member and o.accepts(kinds)]
        if name == "join" and types and not _compatible(_param(types[0], 0), STRING):
            candidates = []  # list(string).join
        if not candidates:
            shown = (f"{types[0]}.({', '.join(map(str, types[1:]))})" if member
                     else f"({', '.join(map(str, types))})")
            raise _Error(f"found no matching overload for '{name}' applied to '{shown}'", pos)
        result = _result(name, candidates, types)
        fns = [f for f, _ in compiled]
        if name in ("matches", "find", "findAll") and len(args) >= 1:
            self.check_regex(name, args[0] if member else args[1] if len(args) > 1 else args[0])
        fn = _direct(candidates[0], fns) if len(candidates) == 1 and "dyn" not in kinds else _dispatch(
            name, candidates, fns)
        if target is None and name in _CONVERSIONS and len(args) == 1 and id(args[0]) in self.literals:
            return self.constant(fn, node), result
        return fn, result

    def optional_or(self, name: str, target: Node, arg: Node, pos: int) -> tuple[Fn, T]:
        """``o.orValue(x)`` and ``o.or(p)``: the argument is evaluated only when ``o`` is empty, and the
        call itself costs nothing (cel-go plans both as their own steps, not as calls)."""
        optional, ot = self.compile(target)
        other, at = self.compile(arg)
        if ot.kind not in ("optional_type", "dyn") or (name == "or" and at.kind not in ("optional_type", "dyn")):
            raise _Error(f"found no matching overload for '{name}' applied to '{ot}.({at})'", pos)
        keep_optional = name == "or"

        def either(c: _Ctx) -> Any:
            o = optional(c)
            if not isinstance(o, Optional):
                raise cellib.no_such_overload(name, o)
            if o.value is not NONE:
                return o if keep_optional else o.value
            return other(c)
        return either, ot if keep_optional else _param(ot, 0) if ot.kind == "optional_type" else DYN

    def check_regex(self, name: str, pattern: Node) -> None:
        if not (isinstance(pattern, Lit) and type(pattern.value) is str):
            return
        try:
            cellib.compile_regex(pattern.value)
        except EvalError as e:
            if name == "matches":  # cel.ValidateRegexLiterals
                raise _Error("invalid matches argument", pattern.pos) from None
            raise _Instantiation(e.message) from None

    def macro(self, node: Call) -> tuple[Fn, T] | None:
        name, target, args = node.function, node.target, node.args
        if target is None:
            if name == "has" and len(args) == 1:
                return self.has(args[0], node.pos)
            return None
        if (name == "bind" and isinstance(target, Ident) and target.name == "cel" and "cel" not in self.scope
                and len(args) == 3):
            return self.bind_macro(args, node.pos)
        quantifier = (name in ("all", "exists", "exists_one") and len(args) in (2, 3)) or (
            name == "existsOne" and len(args) == 3)
        if quantifier and all(isinstance(a, Ident) for a in args[:-1]):
            return self.comprehension(name, target, args[:-1], args[-1:], node.pos)  # (x, p) or (k, v, p)
        if ((name == "map" and len(args) in (2, 3)) or (name == "filter" and len(args) == 2)) and isinstance(
                args[0], Ident):
            return self.comprehension(name, target, args[:1], args[1:], node.pos)  # (x, f), (x, p, f), (x, p)
        return None

    def has(self, arg: Node, pos: int) -> tuple[Fn, T]:
        if not isinstance(arg, Select) or arg.optional:
            raise _Error("invalid argument to has() macro", pos)
        operand, ot = self.compile(arg.operand)
        name = arg.field
        if ot.kind == DEVICE.kind:
            if name not in _DEVICE_FIELDS:
                raise _Error(f"undefined field '{name}'", arg.pos)
        elif ot.kind not in ("map", "dyn"):
            raise _Error(f"type '{ot}' does not support field selection", arg.pos)
        relative = _relative(arg.operand)  # the test itself is free (PresenceTestHasCost(false))

        def presence(c: _Ctx) -> Any:
            v = operand(c)
            c.cost += relative
            if isinstance(v, _Device):
                return name in _DEVICE_FIELDS
            if isinstance(v, Mapping):
                return cellib.contains_key(v, name)
            raise EvalError("invalid type for field selection.")
        return presence, BOOL

    def bind_macro(self, args: list[Node], pos: int) -> tuple[Fn, T]:
        var = args[0]
        if not isinstance(var, Ident):
            raise _Error("cel.bind() variable names must be simple identifiers", pos)
        init, _it = self.compile(args[1])
        slot, previous = self.bind(var.name, _it)
        body, bt = self.compile(args[2])
        self.unbind(var.name, previous)

        def bound(c: _Ctx) -> Any:
            c.vars[slot] = init(c)
            return body(c)
        return bound, bt

    def comprehension(self, name: str, target: Node, variables: list[Node], rest: list[Node],
                      pos: int) -> tuple[Fn, T]:
        rng, rt = self.compile(target)
        if rt.kind not in ("list", "map", "dyn"):
            raise _Error(f"expression of type '{rt}' cannot be range of a comprehension "
                         "(must be list, map, or dynamic)", target.pos)
        names = [v.name for v in variables if isinstance(v, Ident)]
        if len(names) == 2:
            first_t = INT if rt.kind == "list" else _param(rt, 0)
            second_t = _param(rt, 0) if rt.kind == "list" else _param(rt, 1)
            var_types = [first_t, second_t]
        else:
            var_types = [_param(rt, 0)]
        bound = [(n, *self.bind(n, t)) for n, t in zip(names, var_types, strict=True)]
        compiled = [self.compile(r) for r in rest]
        for n, _slot, previous in reversed(bound):
            self.unbind(n, previous)
        slots = [s for _, s, _ in bound]
        if name in ("all", "exists", "exists_one", "existsOne", "filter"):
            pt = compiled[0][1]
            if pt.kind not in ("bool", "dyn"):
                raise _Error(f"found no matching overload for '{name}' predicate applied to '({pt})'", rest[0].pos)
        if name == "map":
            transform = compiled[-1][0]
            predicate = compiled[0][0] if len(compiled) == 2 else None
            # Each step appends [f(x)]: a list built per element unless f(x) is a constant.
            step = 2 + (0 if id(rest[-1]) in self.literals else 10)
            return _map_macro(rng, slots, predicate, transform, step), _list(compiled[-1][1])
        if name == "filter":
            return _filter_macro(rng, slots, compiled[0][0]), rt if rt.kind == "list" else _list(_param(rt, 0))
        if name in ("exists_one", "existsOne"):
            return _exists_one(rng, slots, compiled[0][0]), BOOL
        return _quantifier(rng, slots, compiled[0][0], name == "exists"), BOOL

    # operators

    def equality(self, node: Call) -> tuple[Fn, T]:
        (a, at), (b, bt) = self.compile(node.args[0]), self.compile(node.args[1])
        if not _compatible(at, bt):
            raise _Error(f"found no matching overload for '{node.function}' applied to '({at}, {bt})'", node.pos)
        if node.function == "_!=_":
            def ne(c: _Ctx) -> Any:
                x, y = _two(c, a, b)
                c.cost += _eq_cost(x, y)
                return not cellib.loose_equals(x, y)
            return ne, BOOL

        def eq(c: _Ctx) -> Any:
            x, y = _two(c, a, b)
            c.cost += _eq_cost(x, y)
            return cellib.operator_equals(x, y)
        return eq, BOOL

    def relation(self, node: Call) -> tuple[Fn, T]:
        (a, at), (b, bt) = self.compile(node.args[0]), self.compile(node.args[1])
        ka, kb = _kind(at), _kind(bt)
        ok = ka == "dyn" or kb == "dyn" or (ka in _NUMERIC and kb in _NUMERIC) or (
            ka == kb and ka in ("string", "bytes", "bool"))
        if not ok:
            raise _Error(f"found no matching overload for '{node.function}' applied to '({at}, {bt})'", node.pos)
        fn = node.function
        test: Callable[[int], bool] = {
            "_<_": lambda r: r == -1, "_<=_": lambda r: r in (-1, 0),
            "_>_": lambda r: r == 1, "_>=_": lambda r: r in (0, 1)}[fn]

        # Only an overload the checker chose costs by size; one left to run time (dyn operands that
        # more than one overload accepts) costs what any call does.
        sized = _string_overload(ka, kb)

        def rel(c: _Ctx) -> Any:
            x, y = _two(c, a, b)
            c.cost += _eq_cost(x, y) if sized else 1
            return test(cellib.compare(fn, x, y))
        return rel, BOOL

    def membership(self, node: Call) -> tuple[Fn, T]:
        (a, at), (b, bt) = self.compile(node.args[0]), self.compile(node.args[1])
        if bt.kind not in ("list", "map", "dyn") or not _compatible(at, _param(bt, 0)):
            raise _Error(f"found no matching overload for '@in' applied to '({at}, {bt})'", node.pos)
        rhs = node.args[1]
        # cel-go's planner turns `x in [constants]` into a set lookup, which costs nothing.
        free = isinstance(rhs, ListLit) and id(rhs) in self.literals and all(
            isinstance(e, Lit) and type(e.value) in (bool, int, UInt, float, str) for e in rhs.elements)
        dynamic = bt.kind == "dyn"  # dispatched at run time: the plain cost of a call
        if free and isinstance(rhs, ListLit):
            # And a set it is here too: free work inside a loop must not cost time either.
            members = frozenset(_set_key(e.value) for e in rhs.elements if isinstance(e, Lit))

            def set_member(c: _Ctx) -> Any:
                x = _one(c, a)
                key = _set_key(x)
                return key in members if key is not None else False
            return set_member, BOOL

        def member(c: _Ctx) -> Any:
            x, coll = _two(c, a, b)
            if isinstance(coll, Mapping):
                c.cost += 1
                return cellib.contains_key(coll, x)
            if isinstance(coll, (list, tuple)):
                if dynamic:
                    c.cost += 1
                elif not free:
                    c.cost += len(coll)
                return any(cellib.loose_equals(x, y) for y in coll)
            raise cellib.no_such_overload("@in", x, coll)
        return member, BOOL

    def arithmetic(self, node: Call) -> tuple[Fn, T]:
        (a, at), (b, bt) = self.compile(node.args[0]), self.compile(node.args[1])
        fn = node.function
        allowed = _ARITHMETIC[fn]
        ka, kb = _kind(at), _kind(bt)
        if ka != "dyn" and kb != "dyn" and not (ka == kb and ka in allowed and _compatible(at, bt)):
            raise _Error(f"found no matching overload for '{fn}' applied to '({at}, {bt})'", node.pos)
        result = at if ka != "dyn" else bt if kb != "dyn" else DYN
        if result.kind == "list" and ka == kb == "list":
            result = _list(_join(_param(at, 0), _param(bt, 0)))
        op = _ARITHMETIC_FNS[fn]
        sized = fn == "_+_" and _string_overload(ka, kb)  # see relation

        def arith(c: _Ctx) -> Any:
            x, y = _two(c, a, b)
            if sized:
                c.cost += math.ceil((cellib.size_of(x) + cellib.size_of(y)) * cellib.STRING_COST)
                if c.cost > c.limit:
                    raise CostExceeded()
            else:
                c.cost += 1
            return op(x, y)
        return arith, result

    def unary(self, node: Call) -> tuple[Fn, T]:
        a, at = self.compile(node.args[0])
        if node.function == "!_":
            if at.kind not in ("bool", "dyn"):
                raise _Error(f"found no matching overload for '!_' applied to '({at})'", node.pos)

            def logical_not(c: _Ctx) -> Any:
                v = _one(c, a)
                c.cost += 1
                if type(v) is not bool:
                    raise cellib.no_such_overload("!_", v)
                return not v
            return logical_not, BOOL
        if at.kind not in ("int", "double", "dyn"):
            raise _Error(f"found no matching overload for '-_' applied to '({at})'", node.pos)

        def minus(c: _Ctx) -> Any:
            v = _one(c, a)
            c.cost += 1
            return cellib.negate(v)
        return minus, at


_OPERATORS: dict[str, Callable[[_Compiler, Call], tuple[Fn, T]]] = {
    "_==_": _Compiler.equality, "_!=_": _Compiler.equality,
    "_<_": _Compiler.relation, "_<=_": _Compiler.relation, "_>_": _Compiler.relation, "_>=_": _Compiler.relation,
    "@in": _Compiler.membership,
    "_+_": _Compiler.arithmetic, "_-_": _Compiler.arithmetic, "_*_": _Compiler.arithmetic,
    "_/_": _Compiler.arithmetic, "_%_": _Compiler.arithmetic,
    "!_": _Compiler.unary, "-_": _Compiler.unary,
}
_ARITHMETIC = {"_+_": ("int", "uint", "double", "string", "bytes", "list"), "_-_": _NUMERIC, "_*_": _NUMERIC,
               "_/_": _NUMERIC, "_%_": ("int", "uint")}
_ARITHMETIC_FNS: dict[str, Callable[[Any, Any], Any]] = {
    "_+_": cellib.add, "_-_": cellib.subtract, "_*_": cellib.multiply, "_/_": cellib.divide, "_%_": cellib.modulo}


def _constant(node: Node) -> bool:
    """Whether ``node`` reads nothing: no variable, no ``device`` (a namespace such as ``cel`` or
    ``optional`` before a function's name is no variable)."""
    if isinstance(node, Lit):
        return True
    if isinstance(node, Ident):
        return False
    if isinstance(node, (Select, Index)):
        return _constant(node.operand) and (not isinstance(node, Index) or _constant(node.index))
    if isinstance(node, Call):
        target = node.target
        if target is not None and not (isinstance(target, Ident) and target.name in _NAMESPACES
                                       and node.function != "bind") and not _constant(target):
            return False
        return all(_constant(a) for a in node.args)
    if isinstance(node, (And, Or)):
        return all(_constant(t) for t in node.terms)
    if isinstance(node, Cond):
        return _constant(node.cond) and _constant(node.then) and _constant(node.otherwise)
    if isinstance(node, ListLit):
        return all(_constant(e) for e in node.elements)
    if isinstance(node, MapLit):
        return all(_constant(k) and _constant(v) for k, v in node.entries)
    return False


def _kind(t: T) -> str:
    return t.kind


_SCALARS = frozenset({bool, int, UInt, float, type(None), Quantity, cellib.Semver})


def _eq_cost(x: object, y: object) -> int:
    # A tenth of the shorter operand (cel-go's float arithmetic, rounded up): 0 for an empty one.
    tx, ty = type(x), type(y)
    if tx in _SCALARS and ty in _SCALARS:
        return 1
    if tx is str and ty is str:
        return math.ceil(min(len(x), len(y)) * cellib.STRING_COST)  # type: ignore[arg-type]
    return math.ceil(min(cellib.size_of(x), cellib.size_of(y)) * cellib.STRING_COST)


def _result(name: str, candidates: Sequence[cellib.Overload], types: Sequence[T]) -> T:
    kinds = {o.result for o in candidates}
    if len(kinds) != 1:
        return DYN
    kind = kinds.pop()
    receiver = types[0] if types else DYN
    if kind == "optional_type":
        if name in ("first", "last"):
            return _optional(_param(receiver, 0))
        if name == "optional.of" or name == "optional.ofNonZeroValue":
            return _optional(receiver)
        if name == "or":
            return receiver
        return _optional(DYN)
    if kind == "dyn":
        if name in ("value", "orValue") and receiver.kind == "optional_type":
            return _param(receiver, 0)
        if name in ("sum", "min", "max") and receiver.kind == "list":
            return _param(receiver, 0)
        if name == "dyn":
            return DYN
        return DYN
    if kind == "list":
        if name in ("split", "findAll"):
            return _list(STRING)
        if name == "lists.range":
            return _list(INT)
        if name in ("slice", "distinct", "reverse", "sort", "flatten"):
            # list(T) -> list(T); on a dyn receiver T is still open (a later use decides it).
            return receiver if receiver.kind == "list" and name != "flatten" else _list(VAR)
        return _list(DYN)
    return T(kind)


def _charge(c: _Ctx, overload: cellib.Overload, args: Sequence[Any], result: Any) -> None:
    c.cost += 1 if overload.cost is None else overload.cost(args, result)
    if c.cost > c.limit:
        raise CostExceeded()


_FAILED = object()  # a failed call's value, which has size 1 when its cost is counted


def _charge_failed(c: _Ctx, overload: cellib.Overload, args: Sequence[Any]) -> None:
    c.cost += 1 if overload.cost is None else overload.cost(args, _FAILED)


# A call evaluates all its arguments and is charged even when one of them, or the call, fails (cel-go
# observes the call with the error as its value): 1, what its cost comes to with an error's size.

def _one(c: _Ctx, f: Fn) -> Any:
    try:
        return f(c)
    except EvalError:
        c.cost += 1
        raise


def _two(c: _Ctx, f: Fn, g: Fn) -> tuple[Any, Any]:
    try:
        x = f(c)
    except EvalError as e:
        with contextlib.suppress(EvalError):
            g(c)
        c.cost += 1
        raise e from None
    try:
        return x, g(c)
    except EvalError:
        c.cost += 1
        raise


def _many(c: _Ctx, fns: Sequence[Fn]) -> list[Any]:
    out: list[Any] = []
    error: EvalError | None = None
    for f in fns:
        try:
            out.append(f(c))
        except EvalError as e:
            error = error or e
            out.append(None)
    if error is not None:
        c.cost += 1
        raise error
    return out


def _direct(overload: cellib.Overload, fns: list[Fn]) -> Fn:
    impl = overload.impl
    if len(fns) == 1:
        (f,) = fns

        def call1(c: _Ctx) -> Any:
            x = _one(c, f)
            try:
                r = impl(x)
            except EvalError:
                _charge_failed(c, overload, (x,))
                raise
            _charge(c, overload, (x,), r)
            return r
        return call1
    if len(fns) == 2:
        f, g = fns

        def call2(c: _Ctx) -> Any:
            x, y = _two(c, f, g)
            try:
                r = impl(x, y)
            except EvalError:
                _charge_failed(c, overload, (x, y))
                raise
            _charge(c, overload, (x, y), r)
            return r
        return call2

    def call(c: _Ctx) -> Any:
        args = _many(c, fns)
        try:
            r = impl(*args)
        except EvalError:
            _charge_failed(c, overload, args)
            raise
        _charge(c, overload, args, r)
        return r
    return call


def _dispatch(name: str, candidates: Sequence[cellib.Overload], fns: list[Fn]) -> Fn:
    def call(c: _Ctx) -> Any:
        args = _many(c, fns)
        kinds = [cellib.kind(a) for a in args]
        for overload in candidates:
            if overload.accepts(kinds):
                try:
                    r = overload.impl(*args)
                except EvalError:
                    _charge_failed(c, overload, args)
                    raise
                _charge(c, overload, args, r)
                return r
        c.cost += 1
        raise cellib.no_such_overload(name, *args)
    return call


_TYPE_NAMES = frozenset({"bool", "bytes", "double", "int", "list", "map", "null_type", "string", "type", "uint"})
_CONVERSIONS = frozenset({"bool", "bytes", "double", "dyn", "int", "string", "type", "uint"})


def _same_literal_type(a: T, b: T) -> bool:
    """The elements of a list or map literal must have one type (dyn is a type of its own there); an
    empty literal inside one matches any list or map."""
    if a == b:
        return True
    return a.kind == b.kind and a.kind in ("list", "map") and (
        all(p.var for p in a.params) or all(p.var for p in b.params))


def _set_key(value: object) -> tuple[str, object] | None:
    """A primitive value as a set key with CEL's equality: numbers by value whatever their kind, a bool
    never equal to a number, NaN equal to nothing; None for anything else (never in a set of them)."""
    t = type(value)
    if t is bool:
        return ("b", value)
    if t is int or t is UInt or (t is float and value == value):
        return ("n", value)
    if t is str:
        return ("s", value)
    return None


def _string_overload(ka: str, kb: str) -> bool:
    """Whether the checker picks the string (or bytes) overload of a binary operator: one operand is
    a string (bytes) and the other the same or dyn."""
    known = {ka, kb} - {"dyn"}
    return known in ({"string"}, {"bytes"})


def _relative(operand: Node) -> int:
    """1 when a selection or index applies to a computed value rather than a variable's path: cel-go
    makes that a relative attribute, which costs 1 besides its qualifiers."""
    return 0 if isinstance(operand, (Ident, Select, Index)) else 1


def _select(v: object, name: str, c: _Ctx, q: int) -> Any:
    c.cost += q
    if isinstance(v, Mapping):
        try:
            return v[name]
        except KeyError:
            raise EvalError(f"no such key: {name}") from None
    if isinstance(v, _Device):
        return v.field(name)
    raise EvalError(f"no such key: {name}")


def _index(v: object, k: object, c: _Ctx, q: int) -> Any:
    c.cost += q
    if isinstance(v, Mapping):
        return map_get(v, k)
    if isinstance(v, (list, tuple)):
        if type(k) in (int, UInt) or (type(k) is float and k.is_integer()):
            i = int(k)  # type: ignore[call-overload]
            if 0 <= i < len(v):
                return v[i]
            raise EvalError(f"index out of bounds: {i}")
        raise EvalError(f"unsupported index type '{cellib.type_name(k)}' in list")
    raise cellib.no_such_overload("_[_]", v, k)


def _items(value: object, two: bool) -> list[tuple[Any, ...]]:
    items = cellib.iterate(value)
    if not two:
        return [(x,) for x in items]
    if isinstance(value, Mapping):
        return [(k, value[k]) for k in items]
    return list(enumerate(items))


def _loop(c: _Ctx, per_item: int) -> None:
    c.cost += per_item
    if c.cost > c.limit:
        raise CostExceeded()


# The macros cost as their expansions do in cel-go (each iteration: the loop condition, then the step
# with the accumulator; then the result), so that the runtime cost limit stops where upstream's does.

def _quantifier(rng: Fn, slots: list[int], predicate: Fn, exists: bool) -> Fn:
    two = len(slots) == 2
    condition = 3 if exists else 2  # @not_strictly_false(!accu) / @not_strictly_false(accu)
    first = slots[0]

    def quantify(c: _Ctx) -> Any:
        error: EvalError | None = None
        decided = False
        variables = c.vars
        items: Iterable[Any] = _items(rng(c), True) if two else cellib.iterate(rng(c))
        for item in items:
            _loop(c, condition)
            if decided:
                break
            c.cost += 1  # the accumulator in the step
            if two:
                variables[first], variables[slots[1]] = item
            else:
                variables[first] = item
            try:
                v = predicate(c)
            except EvalError as e:
                error = error or e
                continue
            if v is exists:
                decided = True
            elif type(v) is not bool:
                error = error or EvalError(f"no such overload: {'_||_' if exists else '_&&_'}")
        c.cost += 1  # the result
        if decided:
            c.absorbed = c.absorbed or error is not None
            return exists
        if error is not None:
            raise error
        return not exists
    return quantify


def _exists_one(rng: Fn, slots: list[int], predicate: Fn) -> Fn:
    two = len(slots) == 2

    def exists_one(c: _Ctx) -> Any:
        count = 0
        for item in _items(rng(c), two):
            for slot, v in zip(slots, item, strict=True):
                c.vars[slot] = v
            v = predicate(c)
            if type(v) is not bool:
                raise EvalError("no such overload: _?_:_")
            if v:
                count += 1
                _loop(c, 2)  # accu + 1
            elif c.cost > c.limit:
                raise CostExceeded()
        c.cost += 2  # accu == 1
        return count == 1
    return exists_one


def _map_macro(rng: Fn, slots: list[int], predicate: Fn | None, transform: Fn, step: int) -> Fn:
    (slot,) = slots

    def mapped(c: _Ctx) -> Any:
        out = []
        for (item,) in _items(rng(c), False):
            c.vars[slot] = item
            if predicate is not None:
                keep = predicate(c)
                if type(keep) is not bool:
                    raise EvalError("no such overload: _?_:_")
                if not keep:
                    if c.cost > c.limit:
                        raise CostExceeded()
                    continue
            _loop(c, step)
            out.append(transform(c))
        c.cost += 1
        return out
    return mapped


def _filter_macro(rng: Fn, slots: list[int], predicate: Fn) -> Fn:
    (slot,) = slots

    def filtered(c: _Ctx) -> Any:
        out = []
        for (item,) in _items(rng(c), False):
            c.vars[slot] = item
            keep = predicate(c)
            if type(keep) is not bool:
                raise EvalError("no such overload: _?_:_")
            if keep:
                _loop(c, 13)  # accu + [x]
                out.append(item)
            elif c.cost > c.limit:
                raise CostExceeded()
        c.cost += 1
        return out
    return filtered


# -- the interface -----------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Evaluation:
    matched: bool | None
    error: str | None
    cost: int
    absorbed: bool


class Selector:
    """A compiled selector; ``matches`` evaluates it on one device."""

    __slots__ = ("_fn", "_slots", "expression", "limit")

    def __init__(self, expression: str, fn: Fn, slots: int, limit: int = MAX_COST) -> None:
        self.expression = expression
        self._fn = fn
        self._slots = slots
        self.limit = limit

    def matches(self, driver: str, attributes: Mapping[str, AttrValue], capacity: Mapping[str, Capacity],
                allow_multiple_allocations: bool = False) -> bool:
        """Whether the device matches. ``attributes`` and ``capacity`` are keyed by qualified name as in
        ``api.dra.Device`` (an unqualified name is ``driver``'s). Raises CelRuntimeError."""
        c = _Ctx(_Device(driver, attributes, capacity, allow_multiple_allocations), self._slots, self.limit)
        try:
            result = self._fn(c)
        except EvalError as e:
            raise CelRuntimeError(e.message) from None
        except CostExceeded as e:
            raise CelRuntimeError(e.message) from None
        except RecursionError:
            raise CelRuntimeError("expression too deeply nested to evaluate") from None
        if c.cost > c.limit:
            raise CelRuntimeError(CostExceeded().message)
        if type(result) is not bool:
            raise CelRuntimeError(f"CEL result of type {cellib.type_name(result)} could not be converted to bool")
        return result

    def cost(self, driver: str, attributes: Mapping[str, AttrValue], capacity: Mapping[str, Capacity],
             allow_multiple_allocations: bool = False) -> int:
        """The runtime cost of one evaluation (for tests and the benchmark); errors count what ran."""
        return self.evaluate(driver, attributes, capacity, allow_multiple_allocations).cost

    def evaluate(self, driver: str, attributes: Mapping[str, AttrValue], capacity: Mapping[str, Capacity],
                 allow_multiple_allocations: bool = False) -> Evaluation:
        """One evaluation in full, for tests: the verdict or the error, the cost, and whether an error
        was absorbed on the way (where cel-go may count a little differently)."""
        c = _Ctx(_Device(driver, attributes, capacity, allow_multiple_allocations), self._slots, self.limit)
        try:
            result = self._fn(c)
        except (EvalError, CostExceeded) as e:
            return Evaluation(None, e.message, c.cost, c.absorbed)
        if type(result) is not bool:
            return Evaluation(None, f"CEL result of type {cellib.type_name(result)} could not be converted to bool",
                              c.cost, c.absorbed)
        return Evaluation(result, None, c.cost, c.absorbed)

    def __repr__(self) -> str:
        return f"Selector({self.expression!r})"


def compile_selector(expression: str) -> Selector:
    """The selector of ``expression``, compiled once (cached, and so is a failure); raises
    CelCompileError with cel-go's wording (``compilation failed: ERROR: <input>:1:5: ...``, the
    program's, or the result type's)."""
    compiled = _compiled(expression)
    if isinstance(compiled, CelCompileError):
        raise CelCompileError(compiled.message)
    return compiled


@lru_cache(maxsize=4096)
def _compiled(expression: str) -> Selector | CelCompileError:
    try:
        return compile_uncached(expression)
    except CelCompileError as e:
        return e


def compile_uncached(expression: str) -> Selector:
    """``compile_selector`` without the cache (the benchmark's compile time)."""
    try:
        tree = parse(expression)
        compiler = _Compiler()
        fn, t = compiler.compile(tree)
    except ParseError as e:
        raise CelCompileError(_compile_message(expression, e.message, e.pos)) from None
    except _Error as e:
        raise CelCompileError(_compile_message(expression, e.message, e.pos)) from None
    except _Instantiation as e:
        raise CelCompileError(f"program instantiation failed: {e.message}") from None
    except RecursionError:
        raise CelCompileError("compilation failed: expression too deeply nested") from None
    if t.kind not in ("bool", "dyn"):
        raise CelCompileError(f"must evaluate to bool or the unknown type, not {t}")
    return Selector(expression, fn, compiler.slots)


def _compile_message(expression: str, message: str, pos: int) -> str:
    where, pointer = location(expression, pos)
    return f"compilation failed: ERROR: {where}: {message}\n{pointer}"
