"""Latency of `trainlint lsp` from didChange to publishDiagnostics on a ~2,000-line training script.

Starts the real server (`python -m trainlint lsp`) and drives it over stdio with pygls' client
(via pytest-lsp's test client, which records notifications). Each of the N edits flips one
`torch.load` between `weights_only=True` and `weights_only=False`, and the clock runs from
sending didChange until the diagnostics for that version arrive. Edits are sequential (the next
is sent after the previous result), so every one is measured on its own.

Run three times: with the server's default settings (its debounce adapts to the document's last
check: none after a check under 30 ms, else that check's time beyond 30 ms, up to 150 ms; part of what a user
waits for), with the old fixed 150 ms (`debounceMs: 150`, the baseline the default is compared
with in the same run) and with `debounceMs: 0` (the server's own work: decoding, linting, encoding,
the round trip). Then, without
a server, the CPU time of `lint_source` from scratch on the same versions, and of the server's
`DocumentLinter`, which checks an edit as a slice of the document (CPU time stays honest on a busy
machine; the wall-clock latencies do not).
Each line gives the median and the 95th percentile.

    python scripts/lsp_latency.py [--edits 20] [--lines 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient
from pytest_lsp.client import DEFAULT_CLIENT_FEATURES, register_lsp_features

SERVER = [sys.executable, "-m", "trainlint", "lsp"]

HEADER = '''"""Experiment runner: pretraining, fine-tuning and evaluation of several model variants."""

import math
import os
import random

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.cuda.amp import GradScaler, autocast
from torch.utils.data import DataLoader, Dataset

'''

# One experiment's worth of code (about 100 lines); `{i}` makes every copy distinct.
BLOCK = '''

class Dataset{i}(Dataset):
    def __init__(self, root, split="train", seq_len=128):
        self.root = root
        self.split = split
        self.seq_len = seq_len
        self.items = sorted(os.listdir(os.path.join(root, split)))

    def __len__(self):
        return len(self.items)

    def __getitem__(self, index):
        path = os.path.join(self.root, self.split, self.items[index])
        sample = torch.load(path, weights_only=True)
        return sample["tokens"][: self.seq_len], sample["label"]


class Model{i}(nn.Module):
    def __init__(self, vocab=32000, dim=512, classes=10, dropout=0.1):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(dim, 8, 4 * dim, dropout), 4)
        self.head = nn.Linear(dim, classes)

    def forward(self, tokens):
        hidden = self.encoder(self.embed(tokens))
        return self.head(hidden.mean(dim=1))


def evaluate_{i}(model, loader, device):
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for tokens, labels in loader:
            tokens, labels = tokens.to(device), labels.to(device)
            logits = model(tokens)
            correct += (logits.argmax(dim=-1) == labels).sum().item()
            total += labels.numel()
    model.train()
    return correct / max(total, 1)


def save_{i}(path, model, optimizer, scheduler, scaler, epoch, step):
    tmp = path + ".tmp"
    torch.save(
        {{
            "model": model.state_dict(),
            "optimizer": optimizer.state_dict(),
            "scheduler": scheduler.state_dict(),
            "scaler": scaler.state_dict(),
            "epoch": epoch,
            "step": step,
            "rng": torch.get_rng_state(),
            "python_rng": random.getstate(),
        }},
        tmp,
    )
    os.replace(tmp, path)


def train_{i}(args, device="cuda"):
    model = Model{i}().to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    train_loader = DataLoader(Dataset{i}(args.data), batch_size=args.batch_size, shuffle=True)
    val_loader = DataLoader(Dataset{i}(args.data, "val"), batch_size=args.batch_size)
    accum = args.accumulation_steps
    updates_per_epoch = math.ceil(len(train_loader) / accum)
    scheduler = torch.optim.lr_scheduler.OneCycleLR(
        optimizer, max_lr=args.lr, total_steps=args.epochs * updates_per_epoch
    )
    scaler = GradScaler()
    start_epoch = 0
    if args.resume:
        state = torch.load(args.resume, map_location="cpu", weights_only=True)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        scaler.load_state_dict(state["scaler"])
        start_epoch = state["epoch"] + 1
    step = 0
    for epoch in range(start_epoch, args.epochs):
        model.train()
        optimizer.zero_grad(set_to_none=True)
        for batch, (tokens, labels) in enumerate(train_loader):
            tokens, labels = tokens.to(device), labels.to(device)
            with autocast():
                loss = F.cross_entropy(model(tokens), labels) / accum
            scaler.scale(loss).backward()
            if (batch + 1) % accum == 0 or batch + 1 == len(train_loader):
                scaler.unscale_(optimizer)
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                scaler.step(optimizer)
                scaler.update()
                optimizer.zero_grad(set_to_none=True)
                scheduler.step()
                step += 1
        accuracy = evaluate_{i}(model, val_loader, device)
        print(f"epoch {{epoch}} step {{step}} accuracy {{accuracy:.4f}}")
        save_{i}(os.path.join(args.out, "last.pt"), model, optimizer, scheduler, scaler, epoch, step)
'''


def training_script(lines: int) -> str:
    parts, count, i = [HEADER], HEADER.count("\n"), 0
    while count < lines:
        block = BLOCK.format(i=i)
        parts.append(block)
        count += block.count("\n")
        i += 1
    return "".join(parts)


def _record(ls, params: types.PublishDiagnosticsParams) -> None:
    ls.arrivals.append((time.perf_counter(), params))


def _client() -> LanguageClient:
    client = LanguageClient()
    client.arrivals = []
    features = dict(DEFAULT_CLIENT_FEATURES)
    features[types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS] = _record
    register_lsp_features(client, features)
    return client


async def _wait_for(client, version: int, timeout: float = 60.0):
    deadline = time.perf_counter() + timeout
    while time.perf_counter() < deadline:
        for arrived, params in client.arrivals:
            if params.version == version:
                return arrived, params
        await asyncio.sleep(0.0005)
    raise TimeoutError(f"no diagnostics for version {version}")


async def measure(text: str, edits: int, debounce_ms: int | None) -> tuple[list[float], int, float]:
    """Milliseconds from didChange to publishDiagnostics for each edit, the finding count, and the
    time the first diagnostics took after didOpen."""
    client = await ClientServerConfig(server_command=SERVER, client_factory=_client).start()
    options = {"debounceMs": debounce_ms} if debounce_ms is not None else None
    await client.initialize_session(types.InitializeParams(
        capabilities=types.ClientCapabilities(), initialization_options=options))
    with tempfile.TemporaryDirectory() as folder:
        uri = (Path(folder) / "train_experiments.py").as_uri()
        sent = time.perf_counter()
        client.text_document_did_open(types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)))
        arrived, _ = await _wait_for(client, 1)
        first = (arrived - sent) * 1000
        latencies, findings = [], 0
        for n, current in enumerate(edited(text, edits)):
            version = n + 2
            sent = time.perf_counter()
            client.text_document_did_change(types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
                content_changes=[types.TextDocumentContentChangeWholeDocument(text=current)]))
            arrived, params = await _wait_for(client, version)
            latencies.append((arrived - sent) * 1000)
            findings = max(findings, len(params.diagnostics))
    await client.shutdown_session()
    await client.stop()
    return latencies, findings, first


def edited(text: str, edits: int) -> list[str]:
    """The versions the edits produce: each flips the n-th resume load (every other one back to the
    original), so the findings really change with every edit."""
    safe = 'state = torch.load(args.resume, map_location="cpu", weights_only=True)'
    unsafe = safe.replace("weights_only=True", "weights_only=False")
    return [text.replace(safe, unsafe, n + 1).replace(unsafe, safe, n) if n % 2 == 0 else text
            for n in range(edits)]


def lint_in_process(text: str, edits: int) -> tuple[list[float], list[float], int]:
    """CPU milliseconds of checking each edited version without any server: `lint_source` from
    scratch, and the server's `DocumentLinter` (which saw the previous version); and how many
    versions it checked as a slice."""
    from trainlint.document import DocumentLinter
    from trainlint.engine import lint_source
    from trainlint.settings import Settings

    settings = Settings()
    fresh, incremental = [], []
    document = DocumentLinter()
    document.lint(text, "train_experiments.py", settings)
    versions = edited(text, edits)
    results = []
    for current in versions:  # one pass each: a fresh check's garbage is not collected in the other's time
        cpu = time.process_time()
        results.append(document.lint(current, "train_experiments.py", settings).findings)
        incremental.append((time.process_time() - cpu) * 1000)
    for current, got in zip(versions, results):
        cpu = time.process_time()
        expected = lint_source(current, "train_experiments.py", settings)
        fresh.append((time.process_time() - cpu) * 1000)
        if got != expected.findings:
            raise SystemExit("the document linter's findings differ from a check from scratch")
    return fresh, incremental, document.sliced


def _summary(name: str, latencies: list[float]) -> str:
    p95 = statistics.quantiles(latencies, n=20, method="inclusive")[18] if len(latencies) > 1 else latencies[0]
    return (f"{name}: median {statistics.median(latencies):.1f} ms, p95 {p95:.1f} ms "
            f"(min {min(latencies):.1f}, max {max(latencies):.1f}, n={len(latencies)})")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--edits", type=int, default=20)
    parser.add_argument("--lines", type=int, default=2000)
    args = parser.parse_args()
    text = training_script(args.lines)
    print(f"script: {text.count(chr(10))} lines, {len(text)} characters; {args.edits} sequential edits")
    adaptive, findings, first = await measure(text, args.edits, None)
    fixed, _, _ = await measure(text, args.edits, 150)
    without_debounce, _, _ = await measure(text, args.edits, 0)
    fresh, incremental, sliced = lint_in_process(text, args.edits)
    print(_summary("lint_source alone in this process, from scratch (CPU)", fresh))
    print(_summary(f"the server's document linter in this process ({sliced} of {len(incremental)} versions "
                   "checked as a slice; findings equal to a check from scratch) (CPU)", incremental))
    print(f"first diagnostics after didOpen: {first:.1f} ms; up to {findings} findings per publish")
    print(_summary("didChange -> publishDiagnostics, default settings (adaptive debounce)", adaptive))
    print(_summary("didChange -> publishDiagnostics, fixed 150 ms debounce (debounceMs: 150)", fixed))
    print(_summary("didChange -> publishDiagnostics, debounce 0 (lint + round trip)", without_debounce))
    print(f"default against the fixed 150 ms debounce: median {statistics.median(adaptive) / statistics.median(fixed):.2f}x, "
          f"against debounce 0: {statistics.median(adaptive) / statistics.median(without_debounce):.2f}x")


if __name__ == "__main__":
    asyncio.run(main())
