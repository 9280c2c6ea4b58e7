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
from koordpy.core import dialects
from koordpy.core.dialects.base import Admission, Declaration, Objects

# Declarations of gangs long gone are not kept forever.
MAX_ACCEPTED = 10_000


class Declarations:
    """The answers of the dialects' checks of pending pods, remembered while what they depend on holds."""

    def __init__(self) -> None:
        # Pod key -> (the pod, the registry and each of its dialects' declaration it was checked with,
        # the groups it names, the error, the version of the objects it was checked against): the
        # models are immutable and replaced on every update, so identity says whether the answer
        # still holds (an object equal to the one checked against gives the same answer too).
        self.checked: dict[str, tuple[Pod, tuple[Admission, ...], tuple[Declaration | None, ...], tuple[str, ...],
                                      str | None, int | None]] = {}
        # (dialect, group, whether its object is invalid, what the pod declares) -> the object the
        # declaration was accepted against: not checked again in full for the next pod of the gang
        # (only errors name the pod, and those are never reused).
        self._accepted: dict[tuple[str, str | None, bool, Hashable], object] = {}

    def check(self, key: str, pod: Pod, objects: Objects, invalid: Container[str],
              version: int | None = None) -> tuple[tuple[str, ...], str | None]:
        """The groups the pending pod ``key`` names (its answer changes when their objects do) and what
        is wrong with its declaration (None when nothing is), against the shell's ``objects`` and the
        gang keys whose objects failed to parse (``invalid``). ``version``, when the shell counts the
        changes of its gang kinds' objects (what a declaration depends on, ``Kind.gang``): the same
        pod checked at the same version is answered without asking the dialects."""
        declaring = dialects.DECLARING  # the registry as it is now (``dialects.register``)
        held = self.checked.get(key)
        if held is not None and version is not None and held[5] == version and held[0] is pod and held[1] is declaring:
            return held[3], held[4]
        # Asked of every pending pod a snapshot shows (a gang of thousands): one dialect, no loop.
        now = ((declaring[0].declaration(pod, objects, invalid),) if len(declaring) == 1
               else tuple([d.declaration(pod, objects, invalid) for d in declaring]))
        if held is not None and held[0] is pod and held[1] is declaring and held[2] == now:
            if version is not None:
                self.checked[key] = (*held[:5], version)
            return held[3], held[4]
        err = None
        for dialect, declaration in zip(declaring, now, strict=True):
            if declaration is not None:
                err = self._error(dialect, declaration, pod, objects, invalid)
                if err is not None:
                    break
        groups = tuple(d[0] for d in now if d is not None and d[0] is not None)
        self.checked[key] = (pod, declaring, now, groups, err, version)
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
