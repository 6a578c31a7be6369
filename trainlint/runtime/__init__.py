"""The runtime shim: `trainlint confirm` proves each rule's hazard by running it under torch;
`trainlint trace` runs the user's own script with torch instrumented and joins what it did to the
static findings (`trace`, `trace_child`, `instrument`).

Nothing here is imported by the static linter. torch itself is imported only in the processes
that run the demonstration scripts (see `runner`) or the traced script (see `trace_child`), never
in the process that lints.
"""
