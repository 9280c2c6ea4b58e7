"""A RuntimeClass (``node.k8s.io/v1``) and what the API server's RuntimeClass admission plugin does
with it to a pod on its way in.

Live, koordpy never reads RuntimeClasses: the admission plugin has merged a class's
``overhead.podFixed``, ``scheduling.nodeSelector`` and ``scheduling.tolerations`` into each pod that
names it before any scheduler sees the pod, and kube-scheduler reads only the pod (no plugin of
v1.37.2 reads a RuntimeClass). So the kind is not in the registry (``koordpy.api.kinds``): nothing
watches, lists or is granted it. ``koordpy simulate`` stands in for the API server, as it does for
the Priority admission: a pod it admits gets its class merged in here first.

Belongs here: parsing a RuntimeClass and the admission's merge (``admit``), on raw pods, since the
overhead is part of the pod's request (``koordpy.api.objects``). Does not belong here: deciding
which pods are admitted (the simulator).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from koordpy.api.errors import object_ref
from koordpy.api.raw import Reader, label_problem, read_object

API_VERSION = "node.k8s.io/v1"
KIND = "RuntimeClass"
_EFFECTS = ("", "NoSchedule", "PreferNoSchedule", "NoExecute")

# A toleration as the admission compares them: (key, operator, value, effect, tolerationSeconds),
# the operator as written ("" is Equal, but only a literal Equal counts as one on the covered side).
_Tol = tuple[str, str, str, str, int | None]


@dataclass(frozen=True)
class RuntimeClass:
    name: str
    handler: str
    # overhead.podFixed as written (merged into pods as it is) and as quantities (to compare).
    pod_fixed: Mapping[str, Any] | None
    pod_fixed_amounts: Mapping[str, int] | None
    node_selector: Mapping[str, str]
    tolerations: tuple[dict[str, Any], ...]

    @classmethod
    def from_raw(cls, raw: dict[str, Any]) -> RuntimeClass:
        r, meta, (overhead, scheduling) = read_object(raw, KIND, "overhead", "scheduling")
        name = r.name(meta.get("name"))
        handler = r.string(raw.get("handler"), "handler", required=True)
        problem = label_problem(handler)
        if problem:
            raise r.fail("handler", problem)
        fixed = overhead.get("podFixed")
        amounts = r.resources(fixed, "overhead.podFixed") if fixed is not None else None
        tolerations = tuple(_toleration(r, t, f"scheduling.tolerations[{i}]")
                            for i, t in enumerate(r.seq(scheduling.get("tolerations"), "scheduling.tolerations")))
        return cls(name=name, handler=handler, pod_fixed=r.mapping(fixed, "overhead.podFixed") if fixed is not None
                   else None, pod_fixed_amounts=amounts,
                   node_selector=r.str_map(scheduling.get("nodeSelector"), "scheduling.nodeSelector"),
                   tolerations=tuple(tolerations))


def _toleration(r: Reader, raw: Any, field: str) -> dict[str, Any]:
    """One of the class's tolerations, checked as the API server validates a RuntimeClass's."""
    t = r.mapping(raw, field)
    op = r.string(t.get("operator"), f"{field}.operator")
    if op not in ("", "Equal", "Exists"):
        raise r.fail(f"{field}.operator", f"unknown operator {op!r}")
    key = r.string(t.get("key"), f"{field}.key")
    value = r.string(t.get("value"), f"{field}.value")
    effect = r.string(t.get("effect"), f"{field}.effect")
    if op == "Exists" and value:
        raise r.fail(f"{field}.value", "must be empty when operator is Exists")
    if not key and op != "Exists":
        raise r.fail(f"{field}.operator", "must be Exists when key is empty")
    if effect not in _EFFECTS:
        raise r.fail(f"{field}.effect", f"must be NoSchedule, PreferNoSchedule or NoExecute, got {effect!r}")
    seconds = r.integer(t.get("tolerationSeconds"), f"{field}.tolerationSeconds", bits=64)
    if seconds is not None and effect != "NoExecute":
        raise r.fail(f"{field}.effect", "must be NoExecute when tolerationSeconds is set")
    return t


def _norm(t: Any) -> _Tol:
    """A raw toleration as the admission compares it (a malformed one is the pod parser's to refuse)."""
    if not isinstance(t, dict):
        return ("", "", "", "", None)
    seconds = t.get("tolerationSeconds")
    return (str(t.get("key") or ""), str(t.get("operator") or ""), str(t.get("value") or ""),
            str(t.get("effect") or ""), seconds if isinstance(seconds, int) and not isinstance(seconds, bool) else None)


def _covers(ss: _Tol, t: _Tol) -> bool:
    """Whether toleration ``ss`` tolerates everything ``t`` does (so ``t`` adds nothing)."""
    if ss == t:
        return True
    (skey, sop, svalue, seffect, sseconds), (key, op, value, effect, seconds) = ss, t
    if key != skey and (skey or sop != "Exists"):
        return False
    if effect != seffect and seffect:
        return False
    if seffect == "NoExecute" and sseconds is not None and (seconds is None or seconds > sseconds):
        return False
    if sop in ("", "Equal"):
        return op == "Equal" and value == svalue
    return sop == "Exists"


def merge_tolerations(first: list[Any], second: list[Any]) -> list[Any]:
    """``first`` then ``second``, less each toleration another one already covers: the pod's own
    and its class's, as the admission merges them (the first of two equal ones is kept)."""
    every = [*first, *second]
    norms = [_norm(t) for t in every]
    kept: list[Any] = []
    kept_norms: list[_Tol] = []
    for i, (t, n) in enumerate(zip(every, norms, strict=True)):
        if any(_covers(k, n) for k in kept_norms):
            continue
        if any(later != n and _covers(later, n) for later in norms[i + 1:]):
            continue
        kept.append(t)
        kept_norms.append(n)
    return kept


def admit(raw: dict[str, Any], classes: Mapping[str, RuntimeClass]) -> dict[str, Any]:
    """The pod ``raw`` as the RuntimeClass admission lets it in: the class its
    ``spec.runtimeClassName`` names merged in (its ``overhead.podFixed`` as ``spec.overhead``, its
    node selector and tolerations added to the pod's). Raises the ParseError the API server's refusal
    amounts to: a class that does not exist, an overhead the pod gives that is not the class's (or
    one without a class that defines it), a node selector key the pod sets otherwise."""
    spec = raw.get("spec")
    if not isinstance(spec, dict):
        return raw  # the pod parser names what is wrong
    r = Reader(object_ref(raw, "Pod"))
    name = r.string(spec.get("runtimeClassName"), "spec.runtimeClassName")
    overhead = spec.get("overhead")
    if not name:
        if overhead:
            raise r.fail("spec.overhead", "is set without a RuntimeClass that defines it (spec.runtimeClassName): "
                         "the API server's RuntimeClass admission refuses such a pod")
        return raw
    found = classes.get(name)
    if found is None:
        raise r.fail("spec.runtimeClassName", f"no RuntimeClass named {name!r} (the API server's RuntimeClass "
                     "admission refuses the pod)")
    out = dict(spec)
    if found.pod_fixed is not None:
        if overhead and r.resources(overhead, "spec.overhead") != found.pod_fixed_amounts:
            raise r.fail("spec.overhead", f"is not RuntimeClass {name}'s overhead.podFixed: the API server's "
                         "RuntimeClass admission refuses the pod")
        out["overhead"] = dict(found.pod_fixed)
    elif overhead:
        raise r.fail("spec.overhead", f"is set, and RuntimeClass {name} defines no overhead: the API server's "
                     "RuntimeClass admission refuses the pod")
    if found.node_selector:
        selector = dict(r.str_map(spec.get("nodeSelector"), "spec.nodeSelector"))
        for key, value in found.node_selector.items():
            if key in selector and selector[key] != value:
                raise r.fail(f"spec.nodeSelector[{key}]", f"{selector[key]!r} conflicts with RuntimeClass {name}'s "
                             f"scheduling.nodeSelector[{key}] = {value!r}: the API server's RuntimeClass admission "
                             "refuses the pod")
            selector[key] = value
        out["nodeSelector"] = selector
    if found.tolerations:
        out["tolerations"] = merge_tolerations(r.seq(spec.get("tolerations"), "spec.tolerations"),
                                               list(found.tolerations))
    return {**raw, "spec": out}

