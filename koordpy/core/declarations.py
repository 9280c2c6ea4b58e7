"""The dialects' checks of a pending pod's own declaration (its gang and topology annotations), as
both shells make them before the core sees the pod: ``koordpy simulate`` refuses a pod that fails
one (exit 2), the live cache holds it back and the loop reports it on the pod.

Belongs here: asking the dialects that check declarations (``dialects.DECLARING``) and remembering
their answers, keyed by what each says its check depends on (``Declaration``): a gang of thousands
arrives pod by pod, and its pods declare it alike. Does not belong here: any dialect's words (its
module, ``Admission``), the pods the core refuses once it sees them (``koordpy.core.refusals``).
"""

from __future__ import annotations

from collections.abc import Container, Hashable

from koordpy.api.objects import Pod
from koordpy.core.dialects import DECLARING
from koordpy.core.dialects.base import Admission, Declaration, Objects

# Declarations of gangs long gone are not kept forever.
MAX_ACCEPTED = 10_000


class Declarations:
    """The answers of the dialects' checks of pending pods, remembered while what they depend on holds."""

    def __init__(self) -> None:
        # Pod key -> (the pod, the declarations it was checked with, the groups it names, the error):
        # the models are immutable and replaced on every update, so identity says whether the answer
        # still holds.
        self.checked: dict[str, tuple[Pod, tuple[Declaration, ...], tuple[str, ...], str | None]] = {}
        # (dialect, group, whether its object is invalid, what the pod declares) -> the object the
        # declaration was accepted against: not checked again in full for the next pod of the gang
        # (only errors name the pod, and those are never reused).
        self._accepted: dict[tuple[str, str | None, bool, Hashable], object] = {}

    def check(self, key: str, pod: Pod, objects: Objects,
              invalid: Container[str]) -> tuple[tuple[str, ...], str | None]:
        """The groups the pending pod ``key`` names (its answer changes when their objects do) and what
        is wrong with its declaration (None when nothing is), against the shell's ``objects`` and the
        gang keys whose objects failed to parse (``invalid``)."""
        found: list[tuple[Admission, Declaration]] = []
        for dialect in DECLARING:
            declaration = dialect.declaration(pod, objects, invalid)
            if declaration is not None:
                found.append((dialect, declaration))
        held = self.checked.get(key)
        if held is not None and held[0] is pod and _same(held[1], found):
            return held[2], held[3]
        err = None
        for dialect, declaration in found:
            err = self._error(dialect, declaration, pod, objects, invalid)
            if err is not None:
                break
        declarations = tuple(d for _, d in found)
        groups = tuple(d.group for d in declarations if d.group is not None)
        self.checked[key] = (pod, declarations, groups, err)
        return groups, err

    def _error(self, dialect: Admission, declaration: Declaration, pod: Pod, objects: Objects,
               invalid: Container[str]) -> str | None:
        group, against, group_invalid = declaration
        at = (dialect.name, group, group_invalid, dialect.declared_words(pod))
        accepted = self._accepted.get(at, self) is against  # self: never accepted (None is an object-less gang)
        err = dialect.declaration_error(pod, objects, invalid, accepted)
        if err is None and not accepted:
            if len(self._accepted) >= MAX_ACCEPTED:
                self._accepted.clear()
            self._accepted[at] = against
        return err

    def forget(self, key: str) -> None:
        """Drops what is remembered of the pod ``key`` (gone, or its check failed to run)."""
        self.checked.pop(key, None)


def _same(held: tuple[Declaration, ...], found: list[tuple[Admission, Declaration]]) -> bool:
    """Whether the declarations a pod was checked with are those it has now (objects by identity)."""
    if len(held) != len(found):
        return False
    for was, (_, now) in zip(held, found, strict=True):
        if was.against is not now.against or was.group != now.group or was.invalid != now.invalid:
            return False
    return True
