"""A training script trainlint has nothing to say about.

Gradient accumulation with mixed precision, done the careful way: the loss is divided by the
number of micro-batches, gradients are unscaled before clipping, clipping, the optimizer step,
the scheduler step and clearing the gradients happen once per update, validation runs in eval
mode without grad recording and training mode is restored afterwards, metrics are sums over
samples divided by sample counts, and checkpoints are written atomically with everything a
resume needs and read back with the restricted unpickler.
"""

import argparse
import os

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def build_model() -> nn.Module:
    return nn.Sequential(nn.Linear(32, 256), nn.GELU(), nn.Dropout(0.1), nn.Linear(256, 10))


def evaluate(model: nn.Module, loader: DataLoader, device: torch.device) -> tuple[float, float]:
    model.eval()
    loss_sum, correct, seen = 0.0, 0, 0
    with torch.no_grad():
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            logits = model(x)
            loss_sum += nn.functional.cross_entropy(logits, y, reduction="sum").item()
            correct += (logits.argmax(dim=-1) == y).sum().item()
            seen += y.size(0)
    model.train()
    return loss_sum / seen, correct / seen


def save_checkpoint(path: str, **state) -> None:
    tmp = f"{path}.tmp"
    torch.save(state, tmp)
    os.replace(tmp, path)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--accum-steps", type=int, default=4)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--resume", default=None)
    parser.add_argument("--out", default="checkpoints")
    args = parser.parse_args()

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    train_set = TensorDataset(torch.randn(8192, 32), torch.randint(0, 10, (8192,)))
    val_set = TensorDataset(torch.randn(1000, 32), torch.randint(0, 10, (1000,)))
    train_loader = DataLoader(train_set, batch_size=64, shuffle=True, drop_last=True)
    val_loader = DataLoader(val_set, batch_size=256, shuffle=False)

    model = build_model().to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.01)
    updates_per_epoch = len(train_loader) // args.accum_steps
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.epochs * updates_per_epoch)
    scaler = torch.amp.GradScaler(device.type, enabled=device.type == "cuda")

    start_epoch, update = 0, 0
    if args.resume:
        state = torch.load(args.resume, map_location=device, weights_only=True)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        scaler.load_state_dict(state["scaler"])
        start_epoch, update = state["epoch"] + 1, state["update"]

    model.train()
    for epoch in range(start_epoch, args.epochs):
        loss_sum, seen = 0.0, 0
        for step, (x, y) in enumerate(train_loader):
            x, y = x.to(device), y.to(device)
            with torch.autocast(device_type=device.type, enabled=device.type == "cuda"):
                loss = nn.functional.cross_entropy(model(x), y)
            scaler.scale(loss / args.accum_steps).backward()
            loss_sum += loss.item() * y.size(0)
            seen += y.size(0)
            if (step + 1) % args.accum_steps == 0:
                scaler.unscale_(optimizer)
                torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
                scaler.step(optimizer)
                scaler.update()
                scheduler.step()
                optimizer.zero_grad(set_to_none=True)
                update += 1

        val_loss, val_acc = evaluate(model, val_loader, device)
        print(f"epoch {epoch}: train loss {loss_sum / seen:.4f}, "
              f"val loss {val_loss:.4f}, val acc {val_acc:.4f}")
        os.makedirs(args.out, exist_ok=True)
        save_checkpoint(
            os.path.join(args.out, "last.pt"),
            model=model.state_dict(),
            optimizer=optimizer.state_dict(),
            scheduler=scheduler.state_dict(),
            scaler=scaler.state_dict(),
            epoch=epoch,
            update=update,
        )


if __name__ == "__main__":
    main()
