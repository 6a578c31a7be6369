"""The fences: small runs that check the facts the rules rest on, the wrong way beside the right way.

FENCE1..FENCE4 check what the source notes' Fences 1-4 check; RESUME checks exact resume with its
negative controls; WEIGHTING checks weighting accumulated gradients by sample count. Each script
prints `{"bad": {...}, "good": {...}}` and the judge holds the assertions, so a fence that stops
holding (a new torch changes a semantic) turns its row NOT CONFIRMED and the numbers show why.
"""

from trainlint.runtime.demo import Fence, close, script

FENCE1 = Fence(
    code="FENCE1",
    hazard="accumulation: 4x8 with loss/4 equals the 32-example gradient; without /4 it is exactly 4x; "
           "chunks 12/12/8 need sum/32, not mean/3",
    script=script('''
        model = nn.Sequential(nn.Linear(10, 32), nn.Tanh(), nn.Linear(32, 3))
        params = list(model.parameters())
        x, y = torch.randn(32, 10), torch.randint(0, 3, (32,))


        def accumulated(sizes, weight):
            """Sum of per-chunk gradients, each chunk's summed loss multiplied by weight(chunk size)."""
            model.zero_grad(set_to_none=True)
            for xb, yb in zip(x.split(sizes), y.split(sizes)):
                (F.cross_entropy(model(xb), yb, reduction="sum") * weight(len(yb))).backward()
            return [p.grad.clone() for p in params]


        full = accumulated([32], lambda n: 1 / n)
        scaled = accumulated([8] * 4, lambda n: 1 / n / 4)
        forgot = accumulated([8] * 4, lambda n: 1 / n)
        mean_over_k = accumulated([12, 12, 8], lambda n: 1 / n / 3)
        sum_over_total = accumulated([12, 12, 8], lambda n: 1 / 32)
        print(json.dumps({
            "bad": {"forgot_ratio": norm(forgot) / norm(full), "forgot_vs_4x": rel_error(forgot, [4 * g for g in full]),
                    "uneven_error": max((a - b).abs().max().item() for a, b in zip(mean_over_k, full))},
            "good": {"scaled_error": max((a - b).abs().max().item() for a, b in zip(scaled, full)),
                     "sum_total_error": max((a - b).abs().max().item() for a, b in zip(sum_over_total, full))},
        }))
        '''),
    show_bad="no /K {forgot_ratio:.4f}x; 12/12/8 mean/K off {uneven_error:.1e}",
    show_good="/K off {scaled_error:.1e}; sum/32 off {sum_total_error:.1e}",
    judge=lambda bad, good: (close(bad["forgot_ratio"], 4.0, 1e-5) and bad["forgot_vs_4x"] < 1e-5
                             and bad["uneven_error"] > 1e-4
                             and good["scaled_error"] < 1e-6 and good["sum_total_error"] < 1e-6),
)

FENCE2 = Fence(
    code="FENCE2",
    hazard="clip_grad_norm_ returns the pre-clip norm, rescales every gradient by one factor to max_norm, "
           "leaves them alone under a large threshold and matches the two-step API; clip_grad_value_ turns them",
    script=script('''
        from torch.nn.utils import clip_grad_norm_, clip_grad_value_, clip_grads_with_norm_, get_total_norm


        def fresh_grads():
            torch.manual_seed(1)
            model = nn.Sequential(nn.Linear(20, 16), nn.ReLU(), nn.Linear(16, 5))
            model(torch.randn(16, 20)).pow(2).sum().backward()
            return model


        reference = [p.grad.clone() for p in fresh_grads().parameters()]
        manual = norm(reference)

        clipped = fresh_grads()
        returned = clip_grad_norm_(clipped.parameters(), max_norm=1.0).item()
        factors = [(p.grad / g)[g != 0] for p, g in zip(clipped.parameters(), reference)]
        factors = torch.cat([f.flatten() for f in factors])

        large = fresh_grads()
        clip_grad_norm_(large.parameters(), max_norm=1e6)

        two_step = fresh_grads()
        clip_grads_with_norm_(two_step.parameters(), 1.0, get_total_norm([p.grad for p in two_step.parameters()]))

        by_value = fresh_grads()
        clip_grad_value_(by_value.parameters(), 0.1)
        v = torch.cat([p.grad.flatten() for p in by_value.parameters()])
        r = torch.cat([g.flatten() for g in reference])

        print(json.dumps({
            "bad": {"value_clip_cosine": (torch.dot(v, r) / (v.norm() * r.norm())).item()},
            "good": {"pre_clip_norm": manual, "returned_error": abs(returned - manual) / manual,
                     "after": norm([p.grad for p in clipped.parameters()]),
                     "factor_spread": (factors.max() - factors.min()).item(),
                     "large_unchanged": all(torch.equal(p.grad, g) for p, g in zip(large.parameters(), reference)),
                     "two_step_equal": all(torch.equal(p.grad, q.grad)
                                           for p, q in zip(two_step.parameters(), clipped.parameters()))},
        }))
        '''),
    show_bad="clip_grad_value_ cosine {value_clip_cosine:.3f}",
    show_good="norm {pre_clip_norm:.1f} -> {after:.6f}; two-step equal: {two_step_equal}",
    judge=lambda bad, good: (bad["value_clip_cosine"] < 0.999 and good["pre_clip_norm"] > 1.0
                             and good["returned_error"] < 1e-5 and abs(good["after"] - 1.0) < 1e-5
                             and good["factor_spread"] < 1e-5 and good["large_unchanged"]
                             and good["two_step_equal"]),
)

FENCE3 = Fence(
    code="FENCE3",
    hazard="storages are saved, not tensors: a view loads back sharing storage and saves all of it; "
           "weights_only refuses a pickled class unless it is allowlisted, in scope only",
    script=script('''
        with tempfile.TemporaryDirectory() as workdir:
            base = torch.arange(10.0)
            torch.save({"base": base, "view": base[2:5]}, os.path.join(workdir, "pair.pt"))
            pair = torch.load(os.path.join(workdir, "pair.pt"), weights_only=True)
            pair["base"][3] = -1.0
            shared = (pair["view"].untyped_storage().data_ptr() == pair["base"].untyped_storage().data_ptr()
                      and pair["view"][1].item() == -1.0)

            big = torch.zeros(100_000)
            torch.save(big[:2], os.path.join(workdir, "view.pt"))
            torch.save(big[:2].clone(), os.path.join(workdir, "clone.pt"))
            view_bytes = os.path.getsize(os.path.join(workdir, "view.pt"))
            clone_bytes = os.path.getsize(os.path.join(workdir, "clone.pt"))

            path = os.path.join(workdir, "args.pt")
            torch.save({"w": torch.ones(2), "args": argparse.Namespace(lr=0.1)}, path)
            try:
                torch.load(path, weights_only=True)
                refusal = ""
            except pickle.UnpicklingError as err:
                refusal = str(err)
            needs = torch.serialization.get_unsafe_globals_in_checkpoint(path)
            with torch.serialization.safe_globals([argparse.Namespace]):
                allowed = torch.load(path, weights_only=True)["args"].lr == 0.1
        scope_restored = argparse.Namespace not in torch.serialization.get_safe_globals()

        print(json.dumps({
            "bad": {"view_bytes": view_bytes, "storage_bytes": big.numel() * 4,
                    "refused": "argparse.Namespace" in refusal},
            "good": {"clone_bytes": clone_bytes, "shared_after_load": shared, "needs": needs,
                     "allowed_in_scope": allowed, "scope_restored": scope_restored},
        }))
        ''', imports="import argparse\nimport os\nimport pickle\nimport tempfile"),
    show_bad="view {view_bytes} B; Namespace refused: {refused}",
    show_good="clone {clone_bytes} B; allowlisted: {allowed_in_scope}",
    judge=lambda bad, good: (bad["view_bytes"] > 0.9 * bad["storage_bytes"]
                             and bad["view_bytes"] > 50 * good["clone_bytes"] and bad["refused"]
                             and good["shared_after_load"] and good["needs"] == ["argparse.Namespace"]
                             and good["allowed_in_scope"] and good["scope_restored"]),
)

FENCE4 = Fence(
    code="FENCE4",
    hazard="mode and grad recording are independent: eval() still builds graphs, no_grad leaves dropout on, "
           "inference tensors are refused by autograd, a frozen layer gets no .grad",
    script=script('''
        model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Dropout(0.5), nn.Linear(16, 2))
        x = torch.randn(4, 8)

        model.eval()
        e1, e2 = model(x), model(x)

        model.train()
        with torch.no_grad():
            t1, t2 = model(x), model(x)

        model.eval()
        with torch.inference_mode():
            inference = model(x)
        try:
            (inference * torch.ones(2, requires_grad=True)).sum().backward()
            refusal = ""
        except RuntimeError as err:
            refusal = str(err)

        model.train()
        model[0].requires_grad_(False)
        model(x).sum().backward()

        print(json.dumps({
            "bad": {"eval_builds_graph": e1.grad_fn is not None, "no_grad_train_differs": not torch.equal(t1, t2)},
            "good": {"eval_deterministic": torch.equal(e1, e2), "no_grad_records_nothing": t1.grad_fn is None,
                     "inference_refused": inference.is_inference()
                     and "Inference tensors cannot be saved for backward" in refusal,
                     "frozen_has_no_grad": model[0].weight.grad is None and model[3].weight.grad is not None,
                     "grad_enabled_after": torch.is_grad_enabled()},
        }))
        '''),
    show_bad="eval graph: {eval_builds_graph}; no_grad dropout: {no_grad_train_differs}",
    show_good="inference refused: {inference_refused}; frozen no grad: {frozen_has_no_grad}",
    judge=lambda bad, good: all(bad.values()) and all(good.values()),
)

RESUME = Fence(
    code="RESUME",
    hazard="exact resume: k steps, checkpoint, fresh objects (other seed), load, m steps equals k+m bitwise; "
           "leaving out optimizer, scheduler, RNG or data position breaks it",
    script=script('''
        x, y = torch.randn(64, 8), torch.randn(64, 1)
        batches = list(zip(x.split(8), y.split(8)))  # the data position is the step number
        K_STEPS, M_STEPS = 4, 4


        def build(seed):
            torch.manual_seed(seed)
            model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Dropout(0.2), nn.Linear(32, 1))
            opt = torch.optim.AdamW(model.parameters(), lr=0.01)
            sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: 1 - step / 10)  # linear decay
            return model, opt, sched


        def train(model, opt, sched, start, stop):
            for step in range(start, stop):
                xb, yb = batches[step]
                opt.zero_grad()
                F.mse_loss(model(xb), yb).backward()
                opt.step()
                sched.step()


        def resumed_difference(leave_out, workdir):
            """Largest parameter difference between a resumed run and the uninterrupted one."""
            model, opt, sched = build(0)
            train(model, opt, sched, 0, K_STEPS + M_STEPS)
            uninterrupted = [p.detach().clone() for p in model.parameters()]

            model, opt, sched = build(0)
            train(model, opt, sched, 0, K_STEPS)
            state = {"model": model.state_dict(), "optimizer": opt.state_dict(), "scheduler": sched.state_dict(),
                     "rng": torch.get_rng_state(), "step": K_STEPS}
            state.pop(leave_out, None)
            path = os.path.join(workdir, "last.pt")
            torch.save(state, path)

            model, opt, sched = build(1)  # a new process initialises with whatever seed it has
            ckpt = torch.load(path, weights_only=True)
            model.load_state_dict(ckpt["model"])
            if "optimizer" in ckpt:
                opt.load_state_dict(ckpt["optimizer"])
            if "scheduler" in ckpt:
                sched.load_state_dict(ckpt["scheduler"])
            if "rng" in ckpt:
                torch.set_rng_state(ckpt["rng"])
            start = ckpt.get("step", 0)
            train(model, opt, sched, start, start + M_STEPS)
            return max((a - b).abs().max().item() for a, b in zip(model.parameters(), uninterrupted))


        with tempfile.TemporaryDirectory() as workdir:
            diffs = {name: resumed_difference(name, workdir)
                     for name in ("nothing", "optimizer", "scheduler", "rng", "step")}
        print(json.dumps({"bad": {f"without_{k}": v for k, v in diffs.items() if k != "nothing"},
                          "good": {"complete": diffs["nothing"]}}))
        ''', imports="import os\nimport tempfile"),
    show_bad="w/o opt {without_optimizer:.0e}, sched {without_scheduler:.0e}, rng {without_rng:.0e}, "
             "data {without_step:.0e}",
    show_good="complete: max diff {complete:g}",
    judge=lambda bad, good: len(bad) == 4 and all(v > 0 for v in bad.values()) and good["complete"] == 0.0,
)

WEIGHTING = Fence(
    code="WEIGHTING",
    hazard="weighting each micro-batch's mean loss by its size over the window's total gives the window's "
           "gradient for unequal micro-batches and a short final window; mean/K does not",
    script=script('''
        model = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 1))
        x, y = torch.randn(37, 6), torch.randn(37, 1)
        windows = [[(x[:12], y[:12]), (x[12:24], y[12:24]), (x[24:32], y[24:32])],  # 12, 12, 8
                   [(x[32:], y[32:])]]  # the short final window: 5


        def window_gradient(batches, weight):
            total = sum(len(target) for _, target in batches)
            if total == 0:
                raise ValueError("empty accumulation window")
            model.zero_grad(set_to_none=True)
            for inputs, target in batches:
                (F.mse_loss(model(inputs), target) * weight(len(target), total, len(batches))).backward()
            return [p.grad.clone() for p in model.parameters()]


        def reference(batches):
            inputs = torch.cat([b[0] for b in batches])
            targets = torch.cat([b[1] for b in batches])
            return torch.autograd.grad(F.mse_loss(model(inputs), targets), list(model.parameters()))


        by_count = [rel_error(window_gradient(w, lambda n, total, k: n / total), reference(w)) for w in windows]
        by_k = [rel_error(window_gradient(w, lambda n, total, k: 1 / k), reference(w)) for w in windows]
        try:
            window_gradient([], lambda n, total, k: n / total)
            empty_refused = False
        except ValueError:
            empty_refused = True
        print(json.dumps({"bad": {"mean_over_k_error": by_k[0]},
                          "good": {"by_count_error": max(by_count), "empty_refused": empty_refused}}))
        '''),
    show_bad="12/12/8, mean/K off {mean_over_k_error:.1e}",
    show_good="n/total off {by_count_error:.1e} (incl. short window)",
    judge=lambda bad, good: (bad["mean_over_k_error"] > 1e-3 and good["by_count_error"] < 1e-5
                             and good["empty_refused"]),
)

FENCES = (FENCE1, FENCE2, FENCE3, FENCE4, RESUME, WEIGHTING)
