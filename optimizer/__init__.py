"""gpucost's core: estimates, costs and decisions."""

from optimizer import native

# The compiled estimator modules, where a current build exists (``optimizer.native``): before any
# of them is imported.
native.install()
