"""TL2xx at run time: where clipping sits, and the GradScaler's order (unscale_, clip, step, update).

Optimizer step hooks record the parameter change each step makes; with plain SGD that change is
-lr times the gradient the step used. The CPU `torch.amp.GradScaler` scales the loss like the
CUDA one, so the scaled-gradient hazards show without a GPU.
"""

from trainlint.runtime.demo import Demo, close, script

# Targets x10 so that every gradient norm is well above the clipping threshold of 1.
_SETUP = '''
model = nn.Sequential(nn.Linear(10, 16), nn.Tanh(), nn.Linear(16, 1))
lr = 0.01
opt = torch.optim.SGD(model.parameters(), lr=lr)
loader = [(torch.randn(8, 10), 10 * torch.randn(8, 1)) for _ in range({batches})]
updates = []  # the parameter change each optimizer step made


def before_step(optimizer, args, kwargs):
    updates.append([p.detach().clone() for p in model.parameters()])


def after_step(optimizer, args, kwargs):
    updates[-1] = [p.detach() - b for b, p in zip(updates[-1], model.parameters())]


opt.register_step_pre_hook(before_step)
opt.register_step_post_hook(after_step)
'''

_CLIP = "torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)"

TL201 = Demo(
    code="TL201",
    hazard="clipping scaled gradients clips at max_norm/scale: the step applies a 1/scale-sized gradient",
    bad=script(_SETUP.format(batches=3), f'''
        scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)

        for xb, yb in loader:
            opt.zero_grad()
            loss = F.mse_loss(model(xb), yb)
            scaler.scale(loss).backward()
            {_CLIP}
            scaler.step(opt)
            scaler.update()

        # The norm of the gradient the first step applied (SGD: update = -lr * gradient).
        print(json.dumps({{"step_norm": norm(updates[0]) / lr, "max_norm": 1.0, "scale": 1024.0}}))
        '''),
    fix=((f"    {_CLIP}\n", f"    scaler.unscale_(opt)\n    {_CLIP}\n"),),
    at="clip_grad_norm_",
    show="step grad norm {step_norm:.3g} (max_norm {max_norm:g})",
    judge=lambda bad, good: (close(bad["step_norm"] * bad["scale"], bad["max_norm"], 1e-3)
                             and close(good["step_norm"], good["max_norm"], 1e-3)),
)

TL202 = Demo(
    code="TL202",
    hazard="clipping each micro-batch's partial sum differs from clipping the window's gradient",
    bad=script(_SETUP.format(batches=8), f'''
        K = 4  # micro-batches per update
        params = list(model.parameters())
        window = torch.autograd.grad(sum(F.mse_loss(model(xb), yb) / K for xb, yb in loader[:K]), params)
        clipped_window = [g * min(1.0, 1.0 / (norm(window) + 1e-6)) for g in window]

        for i, (xb, yb) in enumerate(loader):
            loss = F.mse_loss(model(xb), yb) / K
            loss.backward()
            {_CLIP}
            if (i + 1) % K == 0:
                opt.step()
                opt.zero_grad()

        applied = [-u / lr for u in updates[0]]
        print(json.dumps({{"error": rel_error(applied, clipped_window), "step_norm": norm(applied),
                          "window_norm": norm(window)}}))
        '''),
    fix=((f"    {_CLIP}\n    if", "    if"),
         ("        opt.step()\n", f"        {_CLIP}\n        opt.step()\n")),
    at="clip_grad_norm_",
    show="step off the clipped window by {error:.1e}",
    judge=lambda bad, good: bad["error"] > 1e-2 and good["error"] < 1e-4 and good["window_norm"] > 1.0,
)

TL203 = Demo(
    code="TL203",
    hazard="clipping after opt.step(): the step's parameters are bitwise those of an unclipped step",
    bad=script(_SETUP.format(batches=3), f'''
        # The same first update without any clipping, on a copy, for comparison.
        reference = copy.deepcopy(model)
        ref_opt = torch.optim.SGD(reference.parameters(), lr=lr)
        F.mse_loss(reference(loader[0][0]), loader[0][1]).backward()
        ref_opt.step()
        first = []
        opt.register_step_post_hook(
            lambda optimizer, args, kwargs: first or first.extend(p.detach().clone() for p in model.parameters()))

        for xb, yb in loader:
            opt.zero_grad()
            loss = F.mse_loss(model(xb), yb)
            loss.backward()
            opt.step()
            {_CLIP}

        same = all(torch.equal(a, b) for a, b in zip(first, reference.parameters()))
        print(json.dumps({{"same_as_unclipped": same, "step_norm": norm(updates[0]) / lr}}))
        ''', imports="import copy"),
    fix=((f"    opt.step()\n    {_CLIP}\n", f"    {_CLIP}\n    opt.step()\n"),),
    at="clip_grad_norm_",
    show="same as unclipped: {same_as_unclipped}; norm {step_norm:.3g}",
    judge=lambda bad, good: (bad["same_as_unclipped"] and bad["step_norm"] > 1.5
                             and not good["same_as_unclipped"] and close(good["step_norm"], 1.0, 1e-3)),
)

TL204 = Demo(
    code="TL204",
    hazard="opt.step() on a scaled loss's gradients applies an update `scale` times too large",
    bad=script(_SETUP.format(batches=3), '''
        scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)
        params = list(model.parameters())
        first = torch.autograd.grad(F.mse_loss(model(loader[0][0]), loader[0][1]), params)

        for xb, yb in loader:
            opt.zero_grad()
            loss = F.mse_loss(model(xb), yb)
            scaler.scale(loss).backward()
            opt.step()

        # The first update, relative to the one plain SGD would make from the true gradient.
        print(json.dumps({"ratio": norm(updates[0]) / (lr * norm(first)), "scale": 1024.0}))
        '''),
    fix=(("    opt.step()\n", "    scaler.step(opt)\n    scaler.update()\n"),),
    at="opt.step()",
    show="update {ratio:.4g}x the true one",
    judge=lambda bad, good: close(bad["ratio"], bad["scale"], 1e-3) and close(good["ratio"], 1.0, 1e-3),
)

TL205 = Demo(
    code="TL205",
    hazard="a GradScaler built every epoch: its scale restarts at init_scale instead of growing across epochs",
    bad=script('''
        model = nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        loader = [(torch.randn(8, 4), torch.randn(8, 1)) for _ in range(4)]
        scales = []  # the loss scale each epoch ends with (it doubles every 2 clean steps)

        for epoch in range(3):
            scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 4, growth_interval=2)
            for xb, yb in loader:
                opt.zero_grad()
                loss = F.mse_loss(model(xb), yb)
                scaler.scale(loss).backward()
                scaler.step(opt)
                scaler.update()
            scales.append(scaler.get_scale())

        restarts = sum(1 for a, b in zip(scales, scales[1:]) if b <= a)
        print(json.dumps({"scales": scales, "restarts": restarts, "final": scales[-1]}))
        '''),
    fix=(("for epoch in range(3):\n    scaler = torch.amp.GradScaler(\"cpu\", init_scale=2.0 ** 4, growth_interval=2)\n",
          "scaler = torch.amp.GradScaler(\"cpu\", init_scale=2.0 ** 4, growth_interval=2)\nfor epoch in range(3):\n"),),
    at="scaler = torch.amp.GradScaler(",
    show="scale at each epoch end {scales}",
    judge=lambda bad, good: (bad["restarts"] == len(bad["scales"]) - 1 and good["restarts"] == 0
                             and good["final"] > bad["final"]),
)

DEMOS = (TL201, TL202, TL203, TL204, TL205)
