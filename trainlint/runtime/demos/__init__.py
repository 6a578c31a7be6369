"""One runnable bad/good pair per rule code, grouped by rule family.

A rule gets a row in `trainlint confirm` when it is registered and has a demo here. Adding a
demo is adding a `Demo` to its family's module (and to that module's `DEMOS`).
"""

from trainlint.runtime.demo import Demo
from trainlint.runtime.demos import checkpoints, clipping, data_order, memory, metrics, modes, update_clock


def all_demos() -> dict[str, Demo]:
    """Every demo by rule code, in code order."""
    demos: dict[str, Demo] = {}
    for family in (update_clock, clipping, modes, checkpoints, memory, metrics, data_order):
        for demo in family.DEMOS:
            if demo.code in demos:
                raise RuntimeError(f"two runtime demos for {demo.code}")
            demos[demo.code] = demo
    return dict(sorted(demos.items()))
