"""TL6xx at run time: a validation metric must not depend on batching or on the RNG.

40 validation examples in batches of 32 leave a short last batch of 8; the true value is the
metric computed over all 40 at once.
"""

from trainlint.runtime.demo import Demo, script

TL601 = Demo(
    code="TL601",
    hazard="a short last batch: the mean of batch means differs from the mean over all examples",
    bad=script('''
        model = nn.Linear(10, 1)
        x_val, y_val = torch.randn(40, 10), torch.randn(40, 1)
        val_loader = DataLoader(TensorDataset(x_val, y_val), batch_size=32)  # batches of 32 and 8

        model.eval()
        total, count = 0.0, 0
        with torch.no_grad():
            for xb, yb in val_loader:
                total += F.mse_loss(model(xb), yb).item()
                count += 1
            true_loss = F.mse_loss(model(x_val), y_val).item()
        val_loss = total / count

        print(json.dumps({"error": abs(val_loss - true_loss) / true_loss}))
        ''', imports="from torch.utils.data import DataLoader, TensorDataset"),
    fix=(("total += F.mse_loss(model(xb), yb).item()", 'total += F.mse_loss(model(xb), yb, reduction="sum").item()'),
         ("count += 1", "count += len(yb)")),
    at="val_loss = total / count",
    show="metric off the true mean by {error:.1e}",
    judge=lambda bad, good: bad["error"] > 1e-3 and good["error"] < 1e-5,
)

TL602 = Demo(
    code="TL602",
    hazard="a shuffling, dropping validation loader: the same model scores differently run to run",
    bad=script('''
        model = nn.Linear(10, 1)
        val_set = TensorDataset(torch.randn(40, 10), torch.randn(40, 1))
        val_loader = DataLoader(val_set, batch_size=16, shuffle=True, drop_last=True)


        def evaluate(model, loader):
            model.eval()
            total, count = 0.0, 0
            with torch.no_grad():
                for xb, yb in loader:
                    total += F.mse_loss(model(xb), yb, reduction="sum").item()
                    count += len(yb)
            return total / count, count


        first, examples = evaluate(model, val_loader)
        second, _ = evaluate(model, val_loader)
        print(json.dumps({"first": first, "second": second, "examples": examples, "dataset": len(val_set)}))
        ''', imports="from torch.utils.data import DataLoader, TensorDataset"),
    fix=(("DataLoader(val_set, batch_size=16, shuffle=True, drop_last=True)", "DataLoader(val_set, batch_size=16)"),),
    at="DataLoader(val_set",
    show="two evals {first:.4f}/{second:.4f}, {examples} of {dataset}",
    judge=lambda bad, good: (bad["first"] != bad["second"] and good["first"] == good["second"]
                             and good["examples"] == good["dataset"]),
)

TL603 = Demo(
    code="TL603",
    hazard="an evaluation that returns its last batch's loss: far from the loss over the whole set",
    bad=script('''
        model = nn.Linear(10, 1)
        x_val, y_val = torch.randn(40, 10), torch.randn(40, 1)
        val_loader = DataLoader(TensorDataset(x_val, y_val), batch_size=16)  # batches of 16, 16 and 8


        @torch.no_grad()
        def evaluate(model, loader):
            model.eval()
            for xb, yb in loader:
                loss = F.mse_loss(model(xb), yb)
            return loss.item()


        val_loss = evaluate(model, val_loader)
        with torch.no_grad():
            true_loss = F.mse_loss(model(x_val), y_val).item()
        print(json.dumps({"reported": val_loss, "true": true_loss, "error": abs(val_loss - true_loss) / true_loss}))
        ''', imports="from torch.utils.data import DataLoader, TensorDataset"),
    fix=(("    for xb, yb in loader:\n        loss = F.mse_loss(model(xb), yb)\n    return loss.item()\n",
          "    total, count = 0.0, 0\n    for xb, yb in loader:\n"
          "        total += F.mse_loss(model(xb), yb, reduction=\"sum\").item()\n"
          "        count += len(yb)\n    return total / count\n"),),
    at="return loss.item()",
    show="reported {reported:.3f}, whole set {true:.3f}",
    judge=lambda bad, good: bad["error"] > 0.05 and good["error"] < 1e-5,
)

DEMOS = (TL601, TL602, TL603)
