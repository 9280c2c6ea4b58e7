"""The gang a pod names by its own labels and annotations (Koordinator's and scheduler-plugins').

Belongs here: the names of those labels and annotations and ``pod_gang_name``, which the Pod record
reads once, when it is made (``Pod.gang_name``): the cache and the core ask a pod its gang in every
cycle that sees it, and it is a function of the pod alone. Does not belong here: what a gang
declares (``koordpy.api.podgroup``) or which gang a pod joins among the dialects
(``koordpy.core.dialects``).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping

POD_GROUP_LABEL = "pod-group.scheduling.sigs.k8s.io"
COMPAT_NAME = "pod-group.scheduling.sigs.k8s.io/name"
ANN_NAME = "gang.scheduling.koordinator.sh/name"


def pod_gang_name(pod_namespace: str, labels: Mapping[str, str], annotations: Mapping[str, str]) -> str | None:
    """The gang a pod belongs to, ``namespace/name``, or None for a pod of its own."""
    name = (annotations.get(ANN_NAME) or annotations.get(COMPAT_NAME) or labels.get(POD_GROUP_LABEL)
            or annotations.get(POD_GROUP_LABEL))
    # Interned: the core files each member under its gang, and a gang's pods then share one string.
    return sys.intern(f"{pod_namespace}/{name}") if name else None
