"""The fact base that rules query: one traversal of a file (index), what objects are (roles), and the
models built on them (training loops, accumulation, AMP order, module modes, dataflow, checkpoints).

Nothing here imports a rule, the CLI, a reporter or torch.
"""
