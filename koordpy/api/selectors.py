"""Kubernetes label selectors (``matchLabels`` and ``matchExpressions``), as the API server validates them."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from koordpy.api.raw import Reader

Operator = Literal["In", "NotIn", "Exists", "DoesNotExist"]


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class LabelRequirement(_Model):
    key: str
    operator: Operator
    values: tuple[str, ...] = ()

    def matches(self, labels: dict[str, str]) -> bool:
        if self.operator == "Exists":
            return self.key in labels
        if self.operator == "DoesNotExist":
            return self.key not in labels
        if self.operator == "In":
            return self.key in labels and labels[self.key] in self.values
        return self.key not in labels or labels[self.key] not in self.values


class LabelSelector(_Model):
    match_labels: dict[str, str] = {}
    match_expressions: tuple[LabelRequirement, ...] = ()

    def matches(self, labels: dict[str, str]) -> bool:
        """An empty selector matches everything, as in Kubernetes."""
        return (all(labels.get(k) == v for k, v in self.match_labels.items())
                and all(e.matches(labels) for e in self.match_expressions))

    @classmethod
    def from_raw(cls, r: Reader, value: Any, field: str) -> LabelSelector:
        m = r.mapping(value, field)
        unknown = set(m) - {"matchLabels", "matchExpressions"}
        if unknown:
            raise r.fail(field, f"unknown keys {sorted(unknown)}; expected matchLabels, matchExpressions")
        exprs = []
        for i, item in enumerate(r.seq(m.get("matchExpressions"), f"{field}.matchExpressions")):
            f = f"{field}.matchExpressions[{i}]"
            e = r.mapping(item, f)
            op = r.string(e.get("operator"), f"{f}.operator", required=True)
            if op not in ("In", "NotIn", "Exists", "DoesNotExist"):
                raise r.fail(f"{f}.operator", f"must be In, NotIn, Exists or DoesNotExist, got {op!r}")
            values = tuple(r.string(v, f"{f}.values[{j}]", required=True)
                           for j, v in enumerate(r.seq(e.get("values"), f"{f}.values")))
            if op in ("In", "NotIn") and not values:
                raise r.fail(f"{f}.values", f"must be non-empty for operator {op}")
            if op in ("Exists", "DoesNotExist") and values:
                raise r.fail(f"{f}.values", f"must be empty for operator {op}")
            exprs.append(LabelRequirement(key=r.string(e.get("key"), f"{f}.key", required=True),
                                          operator=op, values=values))  # type: ignore[arg-type]
        return cls(match_labels=r.str_map(m.get("matchLabels"), f"{field}.matchLabels"),
                   match_expressions=tuple(exprs))
