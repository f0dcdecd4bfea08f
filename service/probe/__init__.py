"""Measuring real training steps: ``gpucost probe`` (``run``), the hooks for a user's own training
loop (``hooks``), and what both share: building a model from a workload's shape (``model``) and
turning step times into a ``Measurement`` record (``record``).

Only ``model``'s build functions, ``run`` and the hooks' timing import torch, and only when called:
the base install (no torch) imports this package, lists what to install, and exits cleanly.
"""
