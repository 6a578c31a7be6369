"""`--format sarif`: SARIF 2.1.0 for code-scanning services.

`tool.driver.rules` lists every code trainlint can report (from the registry, plus TL000), so a
result's `ruleIndex` always resolves; one result per finding. Artifact URIs are relative to the
run's root (`%SRCROOT%`), columns count Unicode code points, as trainlint's columns do.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Sequence
from urllib.parse import quote

from trainlint import __version__
from trainlint.finding import FileResult, Severity
from trainlint.reporters.catalog import RuleInfo, catalog
from trainlint.reporters.options import ReportOptions

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
INFORMATION_URI = "https://github.com/trainlint/trainlint"
LEVELS = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}


def _rule_descriptor(info: RuleInfo) -> dict:
    return {
        "id": info.code,
        "name": info.name,
        "shortDescription": {"text": info.summary},
        "fullDescription": {"text": info.description},
        "help": {"text": info.documentation, "markdown": info.documentation},
        "helpUri": info.docs_url,
        "defaultConfiguration": {"level": LEVELS[info.severity], "enabled": info.enabled_by_default},
        "properties": {"tags": [info.code[:3] + "xx"]},
    }


def artifact_location(path: str, root: str) -> dict:
    """A URI relative to %SRCROOT% when the file is under the root, else an absolute file URI."""
    absolute = Path(os.path.abspath(path))
    try:
        relative = absolute.relative_to(os.path.abspath(root))
    except ValueError:
        return {"uri": absolute.as_uri()}
    return {"uri": quote(relative.as_posix()), "uriBaseId": "%SRCROOT%"}


def to_sarif(results: Sequence[FileResult], options: ReportOptions) -> dict:
    infos = catalog()
    index = {info.code: i for i, info in enumerate(infos)}
    sarif_results = []
    for result in results:
        for finding in result.findings:
            location = {"artifactLocation": artifact_location(finding.path, options.root)}
            message = finding.message
            if finding.cell is None:
                location["region"] = {
                    "startLine": finding.line,
                    "startColumn": finding.column,
                    "endLine": finding.end_line,
                    "endColumn": finding.end_column,
                }
            else:
                # a notebook: lines count within a cell, not in the file's JSON, so the result is
                # on the file with the cell stated (and kept in the result's properties)
                message = f"cell {finding.cell}, line {finding.line}, column {finding.column}: {message}"
            entry = {
                "ruleId": finding.code,
                "level": LEVELS[finding.severity],
                "message": {"text": message},
                "locations": [{"physicalLocation": location}],
            }
            if finding.cell is not None:
                entry["properties"] = {"cell": finding.cell, "cellLine": finding.line, "cellColumn": finding.column,
                                       "cellEndLine": finding.end_line, "cellEndColumn": finding.end_column}
            related = [e for e in finding.evidence if (e.path, e.line) != (finding.path, finding.line)]
            if related:  # the premises proven away from the reported line (the one there is the finding's own)
                entry["relatedLocations"] = [{
                    "id": number,
                    "message": {"text": f"{e.premise} ({e.verdict}: {e.kind})"},
                    "physicalLocation": {
                        "artifactLocation": artifact_location(e.path, options.root),
                        "region": {"startLine": e.line},
                    },
                } for number, e in enumerate(related)]
            if finding.evidence:
                entry.setdefault("properties", {})["evidence"] = [e.to_dict() for e in finding.evidence]
            if finding.code in index:
                entry["ruleIndex"] = index[finding.code]
            sarif_results.append(entry)
    errors = [e for r in results for e in r.errors]
    root_uri = Path(os.path.abspath(options.root)).as_uri().rstrip("/") + "/"
    return {
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "trainlint",
                "version": __version__,
                "semanticVersion": __version__,
                "informationUri": INFORMATION_URI,
                "rules": [_rule_descriptor(info) for info in infos],
            }},
            "originalUriBaseIds": {"%SRCROOT%": {"uri": root_uri}},
            "columnKind": "unicodeCodePoints",
            "invocations": [{
                "executionSuccessful": not errors,
                "toolExecutionNotifications": [
                    {"level": "error", "message": {"text": e}} for e in errors
                ],
            }],
            "results": sarif_results,
        }],
    }


def render(results: Sequence[FileResult], files_checked: int, options: ReportOptions) -> str:
    return json.dumps(to_sarif(results, options), indent=2) + "\n"
