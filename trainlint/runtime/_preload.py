"""Imported by the fork server before it forks demo processes: torch, once, quietly.

torch warns at import when NumPy is missing; the demos do not use NumPy, and the warning would
otherwise land on the terminal of whoever runs `trainlint confirm`.
"""

import warnings

with warnings.catch_warnings():
    warnings.simplefilter("ignore", UserWarning)
    import torch  # noqa: F401
