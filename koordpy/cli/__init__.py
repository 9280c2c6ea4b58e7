"""The ``koordpy`` command line: reads files, calls the simulator or the controller, prints.

Owns: ``main`` (the parser and its commands wired together), ``manifests`` (the one loader of
files, folders and standard input every command shares, and its ``UsageError``), and one module
per command: ``simulate``, ``run``, ``explain``, ``topology``. This package, ``koordpy.settings``
(which reads ``run``'s configuration file) and ``koordpy.controller`` are the only places that do
I/O. Does not own: parsing objects (``koordpy.api``), scheduling (``koordpy.core``, driven by
``koordpy.sim`` or ``koordpy.controller``). Heavy imports (the core, numba, kopf) stay inside the
commands that need them, so that each command pays only for its own.
"""
