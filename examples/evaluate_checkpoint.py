"""Evaluate a saved classifier on a held-out set.

This script has bugs trainlint reports (the `# expect:` comments mark them):
the checkpoint is read with `pickle.load` (arbitrary code on a crafted file), the validation
loader shuffles, the model is never switched to eval mode (dropout stays on), and accuracy is
the mean of per-batch means, which overweights the short last batch.
"""

import argparse
import pickle

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Classifier(nn.Module):
    def __init__(self, num_features: int = 32, num_classes: int = 10) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(num_features, 128), nn.ReLU(), nn.Dropout(0.5))
        self.head = nn.Linear(128, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("checkpoint")
    args = parser.parse_args()

    with open(args.checkpoint, "rb") as handle:
        state = pickle.load(handle)  # expect: TL401
    model = Classifier()
    model.load_state_dict(state["model"])

    held_out = TensorDataset(torch.randn(1000, 32), torch.randint(0, 10, (1000,)))
    val_loader = DataLoader(held_out, batch_size=64, shuffle=True)  # expect: TL602

    accuracy_sum = 0.0
    with torch.no_grad():
        for x, y in val_loader:
            logits = model(x)  # expect: TL302
            accuracy_sum += (logits.argmax(dim=-1) == y).float().mean().item()
    accuracy = accuracy_sum / len(val_loader)  # expect: TL601
    print(f"accuracy: {accuracy:.4f}")


if __name__ == "__main__":
    main()
