#!/usr/bin/env python3
"""Plays kube-controller-manager's Job controller, which the local control plane does not run.

Reads `kubectl get jobs -o json` (a List, or one Job) on standard input and prints, as YAML, the
pods the Job controller would create for each Job that has not started (no status.startTime, not
suspended): `min(parallelism, completions)` pods from its template, owned by the Job's real uid,
named <job>-0, <job>-1... as `koordpy simulate` names them (the real controller adds a random
suffix instead). Jobs with pods already are the caller's to leave out.

    kubectl apply -f examples/kai-rack
    kubectl get jobs -o json | .venv/bin/python e2e/controlplane/job-pods.py | kubectl create -f -

On kind or any real cluster the Job controller does this itself: do not run this there.
"""

from __future__ import annotations

import json
import sys

import yaml

from koordpy.sim.simulator import job_pods, job_started


def main() -> int:
    doc = json.load(sys.stdin)
    jobs = doc.get("items", []) if doc.get("kind") == "List" or "items" in doc else [doc]
    pods = []
    for job in jobs:
        if job_started(job):
            continue
        uid = (job.get("metadata") or {}).get("uid")
        if not uid:
            print(f"job-pods.py: Job {job.get('metadata', {}).get('name')} has no uid: give the API server's "
                  "copy (kubectl get jobs -o json), not the manifest", file=sys.stderr)
            return 2
        pods += job_pods(job, uid)
    if pods:
        sys.stdout.write(yaml.safe_dump_all(pods))
    return 0


if __name__ == "__main__":
    sys.exit(main())
