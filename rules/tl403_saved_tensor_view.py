"""TL403 saved-tensor-view."""

from __future__ import annotations

import libcst as cst

from trainlint.model.array_kinds import TORCH
from trainlint.model.checkpoints import checkpoint_model
from trainlint.model.checkpoint_base import SAVE_FUNCTIONS
from trainlint.finding import Severity
from trainlint.gate import reference_text, refers_to
from trainlint.model.index import walk
from trainlint.rule import FixSpec, Rule, bad, good
from trainlint.model.premises import premise, unknown
from trainlint.model.proofs import state_premise


class SavedTensorView(Rule):
    code = "TL403"
    name = "saved-tensor-view"
    severity = Severity.WARNING
    summary = "`torch.save` of a view or slice writes the whole storage behind it"
    message = "`torch.save` of a view writes the whole storage behind it; save `.clone()` of the view"
    triggers = (("torch", reference_text(*SAVE_FUNCTIONS)),)
    gate = refers_to(*SAVE_FUNCTIONS)
    what_it_does = """
        Flags `torch.save` of a view of part of a tensor without `.clone()`: a slice (`t[:n]`,
        `t[:, :k]`, `t[..., :4]`), an element of a larger tensor (`weight[3]`), `.narrow()`,
        `.select()`, `.diagonal()`, `.as_strided()`, a piece of `chunk`/`split`/`unbind`, and any
        reshaping of those (`.view()`, `.expand()`, `.T`, `.transpose()`, `.permute()`) or
        `.detach()`/`.contiguous()` of them (both can hand back the same view). The view may be the
        saved object, a value of a saved dict or an item of a saved list, written inline or bound to
        a name first.

        Quiet on `.clone()`, whole tensors, state dicts, dict lookups, slices of lists, tuples and
        strings, slices of NumPy arrays (made by `numpy`: `np.argsort(...)`, a `default_rng`
        Generator's `permutation(n)`; a NumPy view pickles only its own elements), and advanced
        indexing (`t[idx]` with a tensor or list index copies). That the view looks into a torch
        tensor is a premise: shown by what made it (a `torch.*` call, a module's `.weight`, a
        `torch.Tensor` annotation, a method only tensors have such as `.narrow()`, a project
        function returning one); a view of something whose making cannot be told is reported only
        with `--include-unproven`. A `.view()`,
        `.T` or `.expand()` of a whole tensor is quiet too: the file then holds exactly that
        tensor's storage, in another shape, and nothing extra is written.

        The fix appends `.clone()` to each view written inline in the `torch.save` call.
        """
    why_bad = """
        `torch.save` serializes storages, not tensors: a view is written together with the whole
        storage it looks into, so that views sharing storage load back sharing it. Saving
        `big[:2]` of a 100,000-element tensor writes all 400 KB; saving one head of a fused QKV
        weight or a few rows of an embedding writes the whole matrix. The file is as large as the
        base tensor and loads back as a view of a tensor the reader never asked for. `.clone()`
        gives the view its own, exactly sized storage.
        """
    fix_safety = """
        Safe where `.clone()` certainly exists (a tensor method's result, a slice of a known
        tensor): the file then holds the same values, and loads them as a tensor of its own.
        Unsafe otherwise, where the object may not be a tensor.
        """
    references = (
        "https://pytorch.org/docs/stable/notes/serialization.html#saving-and-loading-tensors-preserves-views",
        "https://pytorch.org/docs/stable/tensor_view.html",
    )
    examples = (
        bad(
            """
            import torch

            big = torch.zeros(100_000)
            torch.save(big[:2], "head.pt")
            """,
            line=4,
            fixed="""
            import torch

            big = torch.zeros(100_000)
            torch.save(big[:2].clone(), "head.pt")
            """,
            title="a slice",
        ),
        bad(
            """
            import torch

            def export_rows(model, n, path):
                torch.save({"rows": model.embed.weight[:n].detach(), "n": n}, path)
            """,
            line=4,
            fixed="""
            import torch

            def export_rows(model, n, path):
                torch.save({"rows": model.embed.weight[:n].detach().clone(), "n": n}, path)
            """,
            title="a detached slice as a dict value",
        ),
        bad(
            """
            import torch

            q, k, v = attn.qkv.weight.chunk(3, dim=0)
            torch.save(q, "q_proj.pt")
            """,
            line=4,
            fixed="""
            import torch

            q, k, v = attn.qkv.weight.chunk(3, dim=0)
            torch.save(q.clone(), "q_proj.pt")
            """,
            title="a chunk piece bound to a name (no fix: the name may be used elsewhere)",
        ),
        bad(
            """
            from torch import save

            def dump(features, keep):
                save(features.narrow(1, 0, keep), "features_small.pt")
            """,
            line=4,
            fixed="""
            from torch import save

            def dump(features, keep):
                save(features.narrow(1, 0, keep).clone(), "features_small.pt")
            """,
            title="narrow through a from-import",
        ),
        bad(
            """
            import torch

            for i, shard in enumerate(torch.randn(8, 1024).split(2)):
                torch.save(shard, f"shard_{i}.pt")
            """,
            line=4,
            fixed="""
            import torch

            for i, shard in enumerate(torch.randn(8, 1024).split(2)):
                torch.save(shard.clone(), f"shard_{i}.pt")
            """,
            title="a split piece from a for loop",
        ),
        bad(
            """
            import torch

            def save_head(qkv: torch.Tensor, head_dim: int):
                torch.save({"q_t": qkv[:head_dim].T}, "q_head.pt")
            """,
            line=4,
            fixed="""
            import torch

            def save_head(qkv: torch.Tensor, head_dim: int):
                torch.save({"q_t": qkv[:head_dim].T.clone()}, "q_head.pt")
            """,
            title="a transpose of a slice",
        ),
        good(
            """
            import torch

            big = torch.zeros(100_000)
            torch.save(big[:2].clone(), "head.pt")
            """,
            title="cloned before saving",
        ),
        good(
            """
            import torch

            def export_rows(model, n, path):
                torch.save({"rows": model.embed.weight[:n].contiguous().clone(), "n": n}, path)
            """,
            title=".contiguous().clone()",
        ),
        good(
            """
            import torch

            ckpt = torch.load("full.pt", weights_only=True)
            torch.save(ckpt["model"], "weights_only.pt")
            """,
            title="a dict lookup is not a slice",
        ),
        good(
            """
            import torch

            samples = [torch.randn(3) for _ in range(100)]
            torch.save(samples[:10], "samples.pt")
            """,
            title="a slice of a list copies",
        ),
        good(
            """
            import torch

            torch.save(model.state_dict(), "model.pt")
            torch.save(embedding.weight.detach(), "embeddings.pt")
            torch.save(proj.weight.T, "proj_t.pt")
            """,
            title="a state dict, a whole tensor, a transpose of a whole tensor",
        ),
        good(
            """
            import torch

            emb = torch.randn(50_000, 256)
            keep = torch.tensor([3, 17, 42])
            torch.save(emb[keep], "selected_rows.pt")
            """,
            title="advanced indexing with a tensor index copies",
        ),
        good(
            """
            import numpy as np
            import torch

            order = np.random.default_rng(0).permutation(n_items)
            cut = int(0.9 * n_items)
            torch.save({"fit": order[:cut], "holdout": order[cut:]}, "split.pt")
            """,
            title="slices of a NumPy array pickle only their own elements",
        ),
        bad(
            """
            import torch

            order = torch.randperm(n_items, generator=torch.Generator().manual_seed(0))
            cut = int(0.9 * n_items)
            torch.save({"fit": order[:cut], "holdout": order[cut:]}, "split.pt")
            """,
            line=5,
            fixed="""
            import torch

            order = torch.randperm(n_items, generator=torch.Generator().manual_seed(0))
            cut = int(0.9 * n_items)
            torch.save({"fit": order[:cut].clone(), "holdout": order[cut:].clone()}, "split.pt")
            """,
            title="the same split drawn by torch: slices of one tensor, each written with all of it",
        ),
    )

    def check(self, ctx):
        model = ctx.model(checkpoint_model)
        for save in model.saves:
            if save.framework:
                continue  # `dcp.save` writes each tensor as its planner resolves it, not `torch.save`'s pickle
            views = model.saved_views(save)
            if not views:
                continue
            # a view is written with its whole storage only if it is a torch tensor's: a NumPy
            # array's slice (or a list's) pickles its own elements; unknown: the finding is unproven
            kinds = [(view, model.storage_kind(view[0], save.scope)) for view in views]
            proven = [(view, kind) for view, kind in kinds if kind is not None and kind.kind == TORCH]
            kept = proven or [(view, kind) for view, kind in kinds if kind is None]
            if not kept:
                continue  # every view is a NumPy array's or a list's
            views = [view for view, _ in kept]
            described = ", ".join(dict.fromkeys(kind for _, kind, _ in views))
            fix = None
            written = set(walk(save.node))  # a name bound to a view, written in the call, is cloned there
            if all(inline or (isinstance(expr, cst.Name) and expr in written) for expr, _, inline in views):
                safe = all(_safe(model, expr, save) for expr, _, _ in views)
                fix = FixSpec("Save `.clone()` of the view", safe=safe,
                              replacements=tuple((expr, ctx.code_for(expr) + ".clone()") for expr, _, _ in views))
            yield self.report(
                save.node,
                f"`torch.save` of {described} writes the whole storage it views, not just its elements "
                "(and the file loads back as a view of it); save `.clone()` of the view instead",
                fix,
                evidence=[premise("`torch.save` writes a tensor's whole storage", save.node, "call"),
                          *(premise(f"`{ctx.code_for(expr)}` is {kind}", expr, "use") for expr, kind, _ in views[:2]),
                          *(_tensor_premise(ctx, view[0], kind) for view, kind in kept[:2])],
            )


def _tensor_premise(ctx, expr: cst.BaseExpression, kind):
    what = ctx.code_for(expr)
    if kind is None:
        return unknown(f"`{what}` looks into a torch tensor (not a NumPy array or a list, whose views pickle "
                       "only their own elements): what made it is not known", expr, "construction")
    return premise(f"`{what}` looks into a torch tensor: {kind.how}", kind.node, "construction")


def _safe(model, expr: cst.BaseExpression, save) -> bool:
    """`.clone()` certainly exists: the view is a tensor method's result, or a slice of a known tensor."""
    if isinstance(expr, cst.Subscript):
        return model._is_tensor(expr.value, save.scope)
    return True
