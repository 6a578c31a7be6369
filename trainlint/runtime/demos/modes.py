"""TL3xx at run time: module mode (`train()`/`eval()`) and grad recording are separate switches.

Saved-tensor hooks count what autograd keeps for a backward pass; a forward pre-hook on the
Dropout layer records whether it was active for each training forward.
"""

from trainlint.runtime.demo import Demo, script

TL301 = Demo(
    code="TL301",
    hazard="eval() without no_grad: every batch builds a graph and autograd saves activations for it",
    bad=script('''
        model = nn.Sequential(nn.Linear(10, 64), nn.ReLU(), nn.Dropout(0.1), nn.Linear(64, 1))
        val_loader = [(torch.randn(32, 10), torch.randn(32, 1)) for _ in range(4)]
        saved = []  # bytes of each tensor autograd saves for a backward pass


        def pack(tensor):
            saved.append(tensor.numel() * tensor.element_size())
            return tensor


        def evaluate(model, loader):
            model.eval()
            total = 0.0
            for xb, yb in loader:
                out = model(xb)
                total += F.mse_loss(out, yb, reduction="sum").item()
            model.train()
            return total, out


        with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
            val_loss, last_output = evaluate(model, val_loader)
        print(json.dumps({"graph": last_output.grad_fn is not None, "saved_bytes": sum(saved)}))
        '''),
    fix=(('''    for xb, yb in loader:
        out = model(xb)
        total += F.mse_loss(out, yb, reduction="sum").item()
''', '''    with torch.no_grad():
        for xb, yb in loader:
            out = model(xb)
            total += F.mse_loss(out, yb, reduction="sum").item()
'''),),
    at="out = model(xb)",
    show="graph built: {graph}; {saved_bytes} B saved",
    judge=lambda bad, good: (bad["graph"] and bad["saved_bytes"] > 0
                             and not good["graph"] and good["saved_bytes"] == 0),
)

TL302 = Demo(
    code="TL302",
    hazard="no_grad in train mode: dropout changes the output call to call and BatchNorm's running stats move",
    bad=script('''
        model = nn.Sequential(nn.Linear(10, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Dropout(0.5), nn.Linear(32, 1))
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        train_loader = [(torch.randn(16, 10), torch.randn(16, 1)) for _ in range(3)]
        x_val, y_val = torch.randn(16, 10), torch.randn(16, 1)
        val_loader = [(x_val, y_val), (x_val, y_val)]  # the same batch twice: equal outputs expected

        model.train()
        for xb, yb in train_loader:
            opt.zero_grad()
            loss = F.mse_loss(model(xb), yb)
            loss.backward()
            opt.step()

        running_mean = model[1].running_mean.clone()
        outputs = []
        with torch.no_grad():
            for xb, yb in val_loader:
                outputs.append(model(xb))

        print(json.dumps({"outputs_equal": torch.equal(outputs[0], outputs[1]),
                          "stats_moved": not torch.equal(running_mean, model[1].running_mean)}))
        '''),
    fix=(("outputs = []\nwith torch.no_grad():\n", "outputs = []\nmodel.eval()\nwith torch.no_grad():\n"),),
    at="outputs.append(model(xb))",
    show="repeat equal: {outputs_equal}; BN stats moved: {stats_moved}",
    judge=lambda bad, good: (not bad["outputs_equal"] and bad["stats_moved"]
                             and good["outputs_equal"] and not good["stats_moved"]),
)

TL303 = Demo(
    code="TL303",
    hazard="after an evaluation that is not undone, training runs with dropout off",
    bad=script('''
        model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Dropout(0.5), nn.Linear(32, 1))
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        train_loader = [(torch.randn(16, 10), torch.randn(16, 1)) for _ in range(6)]
        val_loader = [(torch.randn(16, 10), torch.randn(16, 1)) for _ in range(2)]
        dropout_on = []  # for each training forward: was dropout active?


        def record(module, args):
            if torch.is_grad_enabled():
                dropout_on.append(module.training)


        model[2].register_forward_pre_hook(record)


        def evaluate(model, loader):
            model.eval()
            with torch.no_grad():
                return sum(F.mse_loss(model(xb), yb, reduction="sum").item() for xb, yb in loader)


        model.train()
        for step, (xb, yb) in enumerate(train_loader, start=1):
            opt.zero_grad()
            loss = F.mse_loss(model(xb), yb)
            loss.backward()
            opt.step()
            if step % 3 == 0:
                val_loss = evaluate(model, val_loader)

        after = dropout_on[3:]  # training forwards after the first evaluation
        print(json.dumps({"before": sum(dropout_on[:3]) / 3, "after": sum(after) / len(after)}))
        '''),
    fix=(("        val_loss = evaluate(model, val_loader)\n",
          "        val_loss = evaluate(model, val_loader)\n        model.train()\n"),),
    at="val_loss = evaluate(model, val_loader)",
    show="dropout on in {after:.0%} of steps after eval",
    judge=lambda bad, good: bad["before"] == 1.0 and bad["after"] == 0.0 and good["after"] == 1.0,
)

DEMOS = (TL301, TL302, TL303)
