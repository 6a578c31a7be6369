"""The package list, found rather than listed (everything else is in pyproject.toml).

`rules/` is the design card's top-level folder and installs as `trainlint.rules`; setuptools'
`packages.find` cannot put a prefix on a folder, so the list is computed here: every package under
trainlint/ and every package under rules/, mapped below trainlint.rules. A new subpackage ships
without editing anything (tests/test_package.py builds the wheel and checks).
"""

from setuptools import find_packages, setup

packages = find_packages(include=["trainlint", "trainlint.*"])
packages += ["trainlint.rules"] + [f"trainlint.rules.{name}" for name in find_packages("rules")]

# the framework models (trainlint/model/frameworks.py reads them) are data, not a package
setup(packages=packages, package_dir={"trainlint.rules": "rules"},
      package_data={"trainlint": ["frameworks/*.toml"]})
