"""trainlint: a static linter for PyTorch training loops."""

import os as _os

__version__ = "0.1.0"

# Installed, the rules live in trainlint/rules (pyproject.toml maps the top-level rules/ folder
# there). Run from a source checkout (`python -m trainlint` in the repository, where the checkout
# shadows the installed package), rules/ sits beside this folder: look for subpackages there too.
_here = _os.path.dirname(__file__)
_root = _os.path.dirname(_here)
if not _os.path.isdir(_os.path.join(_here, "rules")) and \
        _os.path.isfile(_os.path.join(_root, "rules", "__init__.py")) and \
        _os.path.isfile(_os.path.join(_root, "pyproject.toml")):
    __path__.append(_root)
