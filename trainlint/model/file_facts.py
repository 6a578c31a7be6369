"""Facts the models gather over the whole file, one value per place that contributes one.

Most of what a rule reads about a definition is in that definition or in the ones it names. A few
facts are gathered over the whole file instead: the names the file ever puts in train mode, the
dicts it saves (a resume elsewhere in the file reads those keys), whether it seeds a random
generator, the `backward(loss)` receivers that own their own step. Each is registered here as a
function from a `FileContext` to `(node, value)` pairs, and read with `values(ctx, name)`.

That makes them computable in pieces: the language server checks an edited definition together
with what it can reach (`trainlint.document`), not the whole file, and hands the check the values
the rest of the document contributed at its last check (`FileContext.outside_facts`); it compares
the new whole-file values with the old before it reuses the findings of the rest.
"""

from __future__ import annotations

from typing import Callable, Hashable, Iterable

import libcst as cst

FACTS: dict[str, Callable[[object], Iterable[tuple[cst.CSTNode, Hashable]]]] = {}


def file_fact(name: str):
    """Register `function(ctx) -> [(node, value)]` as the file fact `name` (values hashable)."""
    def register(function):
        FACTS[name] = function
        return function
    return register


def values(ctx, name: str) -> list[Hashable]:
    """Every value of the fact over the file (with the rest of the document's, in a slice)."""
    known = ctx.fact_values.get(name)
    if known is None:
        own = [(ctx.top_level(node), value) for node, value in FACTS[name](ctx)]
        ctx.fact_items[name] = own
        known = ctx.fact_values[name] = [value for _, value in own] + list(ctx.outside_facts.get(name, ()))
    return known
