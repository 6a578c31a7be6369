"""Mixed-precision image classification with periodic validation.

This script has bugs trainlint reports (the `# expect:` comments mark them):
gradients are clipped while still multiplied by the GradScaler's scale, every step's loss
tensor (and with it the autograd graph) is kept in a list, validation runs with grad recording
on, and after the first validation the model keeps training in eval mode.

Random images stand in for a real dataset, so it runs anywhere (on the CPU too):
`python train_amp.py --epochs 1 --eval-every 4 --num-images 700`.
"""

import argparse

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def build_model(num_classes: int = 10) -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
        nn.Flatten(), nn.Dropout(0.2), nn.Linear(32, num_classes),
    )


def evaluate(model, loader, device):
    model.eval()
    total_loss, total_correct, seen = 0.0, 0, 0
    for images, targets in loader:
        images, targets = images.to(device), targets.to(device)
        logits = model(images)  # expect: TL301
        total_loss += F.cross_entropy(logits, targets, reduction="sum").item()
        total_correct += (logits.argmax(dim=1) == targets).sum().item()
        seen += targets.size(0)
    return total_loss / seen, total_correct / seen


def train(epochs: int, eval_every: int, num_images: int) -> None:
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    train_set = TensorDataset(torch.randn(num_images, 3, 32, 32), torch.randint(0, 10, (num_images,)))
    val_set = TensorDataset(torch.randn(512, 3, 32, 32), torch.randint(0, 10, (512,)))
    train_loader = DataLoader(train_set, batch_size=128, shuffle=True)
    val_loader = DataLoader(val_set, batch_size=256, shuffle=False)

    model = build_model().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
    scaler = torch.amp.GradScaler(device.type)
    losses = []

    model.train()
    step = 0
    for epoch in range(epochs):
        for images, targets in train_loader:
            images, targets = images.to(device), targets.to(device)
            optimizer.zero_grad(set_to_none=True)
            with torch.autocast(device_type=device.type, dtype=torch.float16):
                loss = F.cross_entropy(model(images), targets)
            scaler.scale(loss).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=2.0)  # expect: TL201
            scaler.step(optimizer)
            scaler.update()
            losses.append(loss)  # expect: TL501
            step += 1
            if step % eval_every == 0:
                val_loss, val_acc = evaluate(model, val_loader, device)  # expect: TL303
                print(f"step {step}: val loss {val_loss:.3f}, acc {val_acc:.3f}")

    print("mean train loss", torch.stack(losses).mean().item())  # expect: TL601


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--eval-every", type=int, default=500)
    parser.add_argument("--num-images", type=int, default=4096)
    args = parser.parse_args()
    train(args.epochs, args.eval_every, args.num_images)
