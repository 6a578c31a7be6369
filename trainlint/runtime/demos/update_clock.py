"""TL1xx at run time: accumulation scaling, the scheduler's clock, clearing gradients.

The gradient an update applies is read from the parameters: with plain SGD at lr=1 the change a
step makes is exactly the gradient it used, so the training loops carry no instrumentation.
"""

from trainlint.runtime.demo import Demo, close, script

# One update over a window of four micro-batches of 8, compared with the full 32-example batch.
_WINDOW = '''
model = nn.Sequential(nn.Linear(10, 16), nn.Tanh(), nn.Linear(16, 3))
opt = torch.optim.SGD(model.parameters(), lr=1.0)
x, y = torch.randn(32, 10), torch.randint(0, 3, (32,))
{loader}

# The gradient one update over the window should apply: that of the full batch's mean loss.
full = torch.autograd.grad(F.cross_entropy(model(x), y), list(model.parameters()))
before = [p.detach().clone() for p in model.parameters()]
'''

TL102 = Demo(
    code="TL102",
    hazard="the accumulated gradient is K times the full-batch gradient without 1/K, equal to it with 1/K",
    bad=script(_WINDOW.format(loader="loader = list(zip(x.split(8), y.split(8)))\nK = 4  # micro-batches per update"), '''
        for i, (xb, yb) in enumerate(loader):
            loss = F.cross_entropy(model(xb), yb)
            loss.backward()
            if (i + 1) % K == 0:
                opt.step()
                opt.zero_grad()

        applied = [b - p.detach() for b, p in zip(before, model.parameters())]  # SGD, lr=1: the gradient
        print(json.dumps({"ratio": norm(applied) / norm(full), "error": rel_error(applied, full),
                          "error_vs_k": rel_error(applied, [K * g for g in full]), "k": K}))
        '''),
    fix=(("    loss = F.cross_entropy(model(xb), yb)\n", "    loss = F.cross_entropy(model(xb), yb) / K\n"),),
    at="loss.backward()",
    show="update {ratio:.3f}x the full-batch gradient",
    judge=lambda bad, good: (close(bad["ratio"], bad["k"], 1e-4) and bad["error_vs_k"] < 1e-5
                             and good["error"] < 1e-5),
)

TL103 = Demo(
    code="TL103",
    hazard="micro-batches of 12, 12, 8: mean/K misses the full-batch gradient, sum/total matches it",
    bad=script(_WINDOW.format(loader=(
        "loader = DataLoader(TensorDataset(x, y), batch_size=12)  # micro-batches of 12, 12 and 8\n"
        "K = len(loader)\n"
        "total = len(x)  # examples in the update window")), '''
        for i, (xb, yb) in enumerate(loader):
            loss = F.cross_entropy(model(xb), yb) / K
            loss.backward()
            if (i + 1) % K == 0:
                opt.step()
                opt.zero_grad()

        applied = [b - p.detach() for b, p in zip(before, model.parameters())]  # SGD, lr=1: the gradient
        print(json.dumps({"error": rel_error(applied, full)}))
        ''', imports="from torch.utils.data import DataLoader, TensorDataset"),
    fix=(("    loss = F.cross_entropy(model(xb), yb) / K\n",
          '    loss = F.cross_entropy(model(xb), yb, reduction="sum") / total\n'),),
    at="loss = F.cross_entropy(model(xb), yb) / K",
    show="update off the full-batch gradient by {error:.1e}",
    judge=lambda bad, good: bad["error"] > 1e-3 and good["error"] < 1e-5,
)

TL104 = Demo(
    code="TL104",
    hazard="zero_grad per micro-batch: the step applies the last micro-batch's gradient only",
    bad=script(_WINDOW.format(loader="loader = list(zip(x.split(8), y.split(8)))\nK = 4  # micro-batches per update"), '''
        last = torch.autograd.grad(F.cross_entropy(model(x[-8:]), y[-8:]) / K, list(model.parameters()))

        for i, (xb, yb) in enumerate(loader):
            opt.zero_grad()
            loss = F.cross_entropy(model(xb), yb) / K
            loss.backward()
            if (i + 1) % K == 0:
                opt.step()

        applied = [b - p.detach() for b, p in zip(before, model.parameters())]  # SGD, lr=1: the gradient
        print(json.dumps({"vs_window": rel_error(applied, full), "vs_last": rel_error(applied, last)}))
        '''),
    fix=(("    opt.zero_grad()\n    loss =", "    loss ="),
         ("        opt.step()\n", "        opt.step()\n        opt.zero_grad()\n")),
    at="    opt.zero_grad()",
    show="update off window {vs_window:.1e}, off last {vs_last:.1e}",
    judge=lambda bad, good: bad["vs_last"] < 1e-5 and bad["vs_window"] > 0.05 and good["vs_window"] < 1e-5,
)

TL105 = Demo(
    code="TL105",
    hazard="without zero_grad, the gradient a step uses is the sum over all updates so far",
    bad=script('''
        model = nn.Linear(10, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        loader = [(torch.randn(16, 10), torch.randn(16, 1)) for _ in range(5)]
        fresh = []  # each backward's own gradient of the weight, before it is added into .grad
        model.weight.register_hook(lambda grad: fresh.append(grad.clone()))

        for xb, yb in loader:
            loss = F.mse_loss(model(xb), yb)
            loss.backward()
            opt.step()

        used = [model.weight.grad]  # what the last step applied
        print(json.dumps({"vs_own": rel_error(used, fresh[-1:]), "vs_sum": rel_error(used, [sum(fresh)]),
                          "updates": len(fresh)}))
        '''),
    fix=(("    loss = F.mse_loss(model(xb), yb)\n", "    opt.zero_grad()\n    loss = F.mse_loss(model(xb), yb)\n"),),
    at="opt.step()",
    show="step grad off own {vs_own:.1e}, off sum {vs_sum:.1e}",
    judge=lambda bad, good: bad["vs_sum"] < 1e-5 and bad["vs_own"] > 0.1 and good["vs_own"] < 1e-6,
)

TL101 = Demo(
    code="TL101",
    hazard="K=4, cosine sized in updates: per micro-batch the LR hits its floor after a quarter of the run",
    bad=script('''
        model = nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        K = 4  # micro-batches per update
        updates = 8


        def cosine(step):
            return 0.5 * (1 + math.cos(math.pi * min(step, updates) / updates))


        sched = torch.optim.lr_scheduler.LambdaLR(opt, cosine)
        loader = [(torch.randn(8, 4), torch.randn(8, 1)) for _ in range(K * updates)]
        lrs = []  # the learning rate each update ran with

        for i, (xb, yb) in enumerate(loader):
            loss = F.mse_loss(model(xb), yb) / K
            loss.backward()
            if (i + 1) % K == 0:
                lrs.append(opt.param_groups[0]["lr"])
                opt.step()
                opt.zero_grad()
            sched.step()

        lrs.append(opt.param_groups[0]["lr"])  # and after the last update
        floor = next(n for n, lr in enumerate(lrs) if lr <= 1e-12)
        print(json.dumps({"floor_at": floor / updates, "k": K}))
        ''', imports="import math"),
    fix=(("        opt.zero_grad()\n    sched.step()\n", "        opt.zero_grad()\n        sched.step()\n"),),
    at="sched.step()",
    show="LR at its floor after {floor_at:.0%} of updates",
    judge=lambda bad, good: close(bad["floor_at"], 1 / bad["k"], 1e-9) and close(good["floor_at"], 1.0, 1e-9),
)

TL106 = Demo(
    code="TL106",
    hazard="scheduler before optimizer: PyTorch warns and the first LR value is never used",
    bad=script('''
        model = nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
        loader = [(torch.randn(8, 4), torch.randn(8, 1)) for _ in range(3)]
        used = []  # the learning rate each optimizer step ran with
        opt.register_step_pre_hook(lambda optimizer, args, kwargs: used.append(optimizer.param_groups[0]["lr"]))

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for xb, yb in loader:
                opt.zero_grad()
                loss = F.mse_loss(model(xb), yb)
                loss.backward()
                sched.step()
                opt.step()

        warned = any("lr_scheduler.step()" in str(w.message) for w in caught)
        print(json.dumps({"warned": warned, "first_lr": used[0], "base_lr": 0.1}))
        ''', imports="import warnings"),
    fix=(("        sched.step()\n        opt.step()\n", "        opt.step()\n        sched.step()\n"),),
    at="sched.step()",
    show="torch warned: {warned}; first LR used {first_lr:g}",
    judge=lambda bad, good: (bad["warned"] and bad["first_lr"] < bad["base_lr"]
                             and not good["warned"] and good["first_lr"] == good["base_lr"]),
)

TL107 = Demo(
    code="TL107",
    hazard="CosineAnnealingLR(T_max=epochs) stepped every batch: the LR oscillates instead of decaying once",
    bad=script('''
        model = nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        epochs = 4
        loader = [(torch.randn(8, 4), torch.randn(8, 1)) for _ in range(8)]
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=epochs)
        steps = epochs * len(loader)
        # the curve the run means: one cosine from 0.1 down to 0 over all of its batches
        intended = [0.05 * (1 + math.cos(math.pi * n / steps)) for n in range(steps)]
        lrs = []  # the learning rate each batch trained with

        for epoch in range(epochs):
            for xb, yb in loader:
                lrs.append(opt.param_groups[0]["lr"])
                loss = F.mse_loss(model(xb), yb)
                opt.zero_grad()
                loss.backward()
                opt.step()
                sched.step()

        rises = sum(1 for a, b in zip(lrs, lrs[1:]) if b > a + 1e-9)
        error = max(abs(a - b) for a, b in zip(lrs, intended))
        print(json.dumps({"rises": rises, "max_error": error, "lr_at_half": lrs[steps // 2], "intended_at_half": intended[steps // 2]}))
        ''', imports="import math"),
    fix=(("T_max=epochs)", "T_max=epochs * len(loader))"),),
    at="T_max=epochs",
    show="LR rose {rises} times; off the intended curve by {max_error:.3f}",
    judge=lambda bad, good: (bad["rises"] > 0 and bad["max_error"] > 0.05
                             and good["rises"] == 0 and good["max_error"] < 1e-6),
)

TL108 = Demo(
    code="TL108",
    hazard="K=4, the eval test on the update counter outside the update branch: K evaluations per cadence point, mid-window",
    bad=script('''
        model = nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        K, updates, eval_every = 4, 8, 2
        loader = [(torch.randn(8, 4), torch.randn(8, 1)) for _ in range(K * updates)]
        evals = []  # (update counter, gradients of an unfinished window pending) per evaluation


        def evaluate(model):
            model.eval()
            with torch.no_grad():
                pending = model.weight.grad is not None and bool(model.weight.grad.abs().sum() > 0)
            model.train()
            return pending


        global_step = 0
        for i, (xb, yb) in enumerate(loader):
            loss = F.mse_loss(model(xb), yb) / K
            loss.backward()
            if (i + 1) % K == 0:
                opt.step()
                opt.zero_grad()
                global_step += 1
            if global_step % eval_every == 0:
                evals.append((global_step, evaluate(model)))

        per_point = {}
        for step, _ in evals:
            per_point[step] = per_point.get(step, 0) + 1
        print(json.dumps({"most_per_point": max(per_point.values()), "mid_window": sum(p for _, p in evals),
                          "evaluations": len(evals), "k": K}))
        '''),
    fix=(("        global_step += 1\n    if global_step % eval_every == 0:\n        evals.append((global_step, evaluate(model)))\n",
          "        global_step += 1\n        if global_step % eval_every == 0:\n            evals.append((global_step, evaluate(model)))\n"),),
    at="if global_step % eval_every == 0:",
    show="{most_per_point} evaluations per cadence point, {mid_window} mid-window",
    judge=lambda bad, good: (bad["most_per_point"] == bad["k"] and bad["mid_window"] > 0
                             and good["most_per_point"] == 1 and good["mid_window"] == 0),
)

DEMOS = (TL101, TL102, TL103, TL104, TL105, TL106, TL107, TL108)
