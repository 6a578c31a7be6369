"""Mixed-precision image classification with periodic validation.

This script has bugs trainlint reports (the `# expect:` comments mark them):
gradients are clipped while still multiplied by the GradScaler's scale, every step's loss
tensor (and with it the autograd graph) is kept in a list, validation runs with grad recording
on, and after the first validation the model keeps training in eval mode.
"""

import os

import torch
import torch.nn.functional as F
import torchvision
from torch.utils.data import DataLoader


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


def train(data_dir: str, epochs: int = 10, eval_every: int = 500) -> None:
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    transform = torchvision.transforms.ToTensor()
    train_set = torchvision.datasets.CIFAR10(data_dir, train=True, download=True, transform=transform)
    val_set = torchvision.datasets.CIFAR10(data_dir, train=False, download=True, transform=transform)
    train_loader = DataLoader(train_set, batch_size=128, shuffle=True, num_workers=4)
    val_loader = DataLoader(val_set, batch_size=512, shuffle=False, num_workers=4)

    model = torchvision.models.resnet18(num_classes=10).to(device)
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
    os.makedirs("runs", exist_ok=True)


if __name__ == "__main__":
    train("data")
