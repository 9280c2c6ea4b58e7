"""Label selectors (``metav1.LabelSelector``) and the label-key checks the API server applies.

HyperNode members, Volcano sub-group policies and Topology levels all carry label keys or
selectors; they are checked here once, the way the API server checks them, so a file the
simulator accepts is one the cluster would accept too.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from koordpy.api.raw import Reader, subdomain_problem

Operator = Literal["In", "NotIn", "Exists", "DoesNotExist"]
OPERATORS: tuple[Operator, ...] = ("In", "NotIn", "Exists", "DoesNotExist")
_NAME_PART = re.compile(r"[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?")


def qualified_name_problem(key: str) -> str | None:
    """Why ``key`` is not a qualified name (a label key: ``[prefix/]name``), or None."""
    prefix, slash, name = key.rpartition("/")
    if slash and not prefix:
        return f"{key!r}: the prefix before '/' must not be empty"
    if slash and "/" in prefix:
        return f"{key!r} has more than one '/'"
    if prefix:
        problem = subdomain_problem(prefix)
        if problem:
            return f"prefix of {key!r}: {problem}"
    if not name:
        return f"{key!r}: the name part must not be empty"
    if len(name) > 63:
        return f"name part of {key!r} must be no more than 63 characters, got {len(name)}"
    if not _NAME_PART.fullmatch(name):
        return (f"{key!r}: the name part must be letters, digits, '-', '_' and '.', "
                "starting and ending with a letter or digit")
    return None


def label_value_problem(value: str) -> str | None:
    """Why ``value`` is not a valid label value (empty is valid), or None."""
    if len(value) > 63:
        return f"label value must be no more than 63 characters, got {len(value)}"
    if value and not _NAME_PART.fullmatch(value):
        return (f"label value {value!r} must be letters, digits, '-', '_' and '.', "
                "starting and ending with a letter or digit")
    return None


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class SelectorRequirement(_Model):
    key: str
    operator: Operator
    values: tuple[str, ...] = ()

    def matches(self, labels: dict[str, str]) -> bool:
        present = self.key in labels
        if self.operator == "In":
            return present and labels[self.key] in self.values
        if self.operator == "NotIn":
            return not present or labels[self.key] not in self.values
        if self.operator == "Exists":
            return present
        return not present


class LabelSelector(_Model):
    """Every term must hold; a selector with no terms matches every label set."""

    match_labels: dict[str, str] = {}
    match_expressions: tuple[SelectorRequirement, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.match_labels and not self.match_expressions

    def matches(self, labels: dict[str, str]) -> bool:
        if any(labels.get(key) != value for key, value in self.match_labels.items()):
            return False
        return all(req.matches(labels) for req in self.match_expressions)

    @classmethod
    def from_raw(cls, r: Reader, value: Any, field: str) -> LabelSelector:
        m = r.mapping(value, field)
        labels = r.str_map(m.get("matchLabels"), f"{field}.matchLabels")
        for key, v in labels.items():
            _check_key(r, key, f"{field}.matchLabels[{key}]")
            problem = label_value_problem(v)
            if problem:
                raise r.fail(f"{field}.matchLabels[{key}]", problem)
        reqs = []
        for i, item in enumerate(r.seq(m.get("matchExpressions"), f"{field}.matchExpressions")):
            f = f"{field}.matchExpressions[{i}]"
            e = r.mapping(item, f)
            key = r.string(e.get("key"), f"{f}.key", required=True)
            _check_key(r, key, f"{f}.key")
            op = r.string(e.get("operator"), f"{f}.operator", required=True)
            if op not in OPERATORS:
                raise r.fail(f"{f}.operator", f"unknown operator {op!r}; one of {', '.join(OPERATORS)}")
            values = tuple(r.string(v, f"{f}.values[{j}]")
                           for j, v in enumerate(r.seq(e.get("values"), f"{f}.values")))
            if op in ("In", "NotIn") and not values:
                raise r.fail(f"{f}.values", f"must not be empty when the operator is {op}")
            if op in ("Exists", "DoesNotExist") and values:
                raise r.fail(f"{f}.values", f"must be empty when the operator is {op}")
            for j, v in enumerate(values):
                problem = label_value_problem(v)
                if problem:
                    raise r.fail(f"{f}.values[{j}]", problem)
            reqs.append(SelectorRequirement(key=key, operator=op, values=values))
        return cls(match_labels=labels, match_expressions=tuple(reqs))


def _check_key(r: Reader, key: str, field: str) -> None:
    problem = qualified_name_problem(key)
    if problem:
        raise r.fail(field, problem)
