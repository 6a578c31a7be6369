"""The runtime shim: `trainlint confirm` proves each rule's hazard by running it under torch.

Nothing here is imported by the static linter. torch itself is imported only in the processes
that run the demonstration scripts (see `runner`), never in the process that lints.
"""
