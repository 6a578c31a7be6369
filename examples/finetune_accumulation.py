"""Fine-tune a classifier with gradient accumulation, resuming from a checkpoint.

This script has bugs trainlint reports (the `# expect:` comments mark them):
the optimizer's gradients are cleared on every micro-batch (so the step sees only the last
micro-batch's gradient; once the clear moves after the step, the undivided loss makes the
update K times too large, which trainlint then reports as TL102), the LR scheduler steps on
every micro-batch instead of once per update, and the resume path unpickles the checkpoint
with the full unpickler.
"""

import argparse
import os

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def build_model(num_features: int, num_classes: int) -> nn.Module:
    return nn.Sequential(
        nn.Linear(num_features, 256),
        nn.GELU(),
        nn.Dropout(0.1),
        nn.Linear(256, num_classes),
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--accum-steps", type=int, default=4)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--resume", default=None)
    parser.add_argument("--out", default="checkpoints")
    args = parser.parse_args()

    features = torch.randn(4096, 32)
    labels = torch.randint(0, 10, (4096,))
    loader = DataLoader(TensorDataset(features, labels), batch_size=64, shuffle=True, drop_last=True)

    model = build_model(32, 10)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.01)
    updates = args.epochs * len(loader) // args.accum_steps
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=updates)
    loss_fn = nn.CrossEntropyLoss()

    start_epoch = 0
    if args.resume:
        state = torch.load(args.resume, map_location="cpu", weights_only=False)  # expect: TL401
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        start_epoch = state["epoch"] + 1

    model.train()
    for epoch in range(start_epoch, args.epochs):
        for step, (x, y) in enumerate(loader):
            optimizer.zero_grad()  # expect: TL104
            loss = loss_fn(model(x), y)
            loss.backward()
            if (step + 1) % args.accum_steps == 0:
                optimizer.step()
            scheduler.step()  # expect: TL101

        os.makedirs(args.out, exist_ok=True)
        final = os.path.join(args.out, "last.pt")
        tmp = final + ".tmp"
        torch.save(
            {
                "model": model.state_dict(),
                "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict(),
                "epoch": epoch,
            },
            tmp,
        )
        os.replace(tmp, final)


if __name__ == "__main__":
    main()
