"""trainlint: a static linter for PyTorch training loops."""

__version__ = "0.1.0"
