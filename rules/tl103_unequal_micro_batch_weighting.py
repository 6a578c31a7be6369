"""TL103 unequal-micro-batch-weighting."""

from __future__ import annotations

import re

import libcst as cst

from trainlint.model.accumulation import MEAN, LossTracer, Trace
from trainlint.finding import Severity
from trainlint.gate import named
from trainlint.model import file_facts, frameworks
from trainlint.model.framework_classes import ancestors
from trainlint.model.index import dotted_name, keyword_arg, positional_args, walk
from trainlint.model.roles import MODULE_ROLES, roles
from trainlint.rule import Rule, bad, good
from trainlint.model.dataflow import dataflow
from trainlint.model.training import training_model
from trainlint.model.shipped import k_condition
from trainlint.model.premises import premise, unknown
from trainlint.model.proofs import accumulation_premises, loop_premises, role_premise, training_premises


class UnequalMicroBatchWeighting(Rule):
    code = "TL103"
    name = "unequal-micro-batch-weighting"
    severity = Severity.WARNING
    summary = "A mean loss divided by the number of micro-batches where micro-batches can differ in size"
    message = "dividing each micro-batch mean by K misweights micro-batches of different sizes"
    triggers = (("backward", "step("),)
    # a training loop (a backward and an optimizer step), or a framework's train hook that runs the
    # backward of one micro-batch (an HF Trainer's `training_step` override)
    gate = named("backward") & (named("^step$") | named("^training_step$"))
    what_it_does = """
        Under gradient accumulation, flags the division of a per-micro-batch mean loss by a
        constant number of micro-batches (`loss / K`, `loss /= grad_accum`, `loss / len(batches)`)
        when the micro-batches of one window can hold different numbers of examples or tokens:

        - a token-level loss with padding (`ignore_index`, a loss normalised by a mask count, or a
          language model's own `outputs.loss` in a file whose code masks label positions: the
          integer -100 written into a value or compared with labels, an `ignore_index` a label can
          hold, a collator that pads labels with -100): valid-token counts differ in every window.
          A causal/seq2seq/masked LM class name alone does not prove it (its labels may be its
          input ids padded to a fixed length, every position counted): that premise is unknown
          and required, reported only with `--include-unproven`;
        - micro-batches taken from a list or window of batches whose sizes are not fixed;
        - a `DataLoader` without `drop_last=True`: the last micro-batch of an epoch can be short,
          so the last window of each epoch is misweighted (not when every batch holds one example,
          `batch_size` 1, or the dataset is a literal list a literal batch size divides:
          `DataLoader([graph])` gives one full batch per epoch).

        Equal micro-batches (a loader with `drop_last=True`, fixed-size sampling such as
        `get_batch`, per-example losses) make `loss / K` exact and are not flagged. An
        `ignore_index=-1` that nothing in the file ever writes into the labels (a packed token
        stream) is no evidence of padding, nor is a language model scored against its own input ids
        as given (`model(**batch, labels=batch["input_ids"])`) in a file that never writes -100:
        every label position counts, a number the batch's shape fixes, and when the loss comes from a module class of the same
        file, `transformers` model names elsewhere in the file are none either.

        A framework that owns the loop says where the window's size lives: in a train hook of a
        subclass of such a framework class (the framework models' `window_size` facts: an HF
        `Trainer`'s `training_step` override), dividing the loss by the fixed K
        (`self.args.gradient_accumulation_steps`) is flagged: the last window of an epoch whose
        length is not a multiple of K holds fewer micro-batches, and the Trainer divides by
        `self.current_gradient_accumulation_steps` for that reason.

        When K is 1 as the code ships (an argparse option, a config/dataclass field or a parameter
        that defaults to 1, `cfg.get("accum", 1)`, `ACCUM = 1`), nothing accumulates until someone
        raises it: the finding then says it holds only when K is set above 1 and is reported one
        severity lower (info).

        A backward that a read always raising comes before is never reached: nothing is weighted,
        nothing is flagged (an unbound local, or, in the code a script runs under `if __name__ ==
        "__main__":`, a global no code of the file binds: `optimiser.zero_grad()` with only
        `optimizer` bound, no star import or `exec` that could bind it).
        """
    why_bad = """
        Dividing each micro-batch's mean by K gives every micro-batch the same weight in the
        update. That equals the large-batch mean only when every micro-batch holds the same number
        of examples (or valid tokens). When they differ, examples in small micro-batches count more
        than examples in large ones: with chunks of 12, 12 and 8 examples, each example of the
        short chunk weighs 1.5 times as much. For a padded language-model batch the valid-token
        count varies in every micro-batch, so every update is biased. Sum the losses (or
        `reduction="sum"`) and divide by the window's total example or valid-token count, or weight
        each micro-batch mean by its share of the window.
        """
    references = (
        "https://huggingface.co/blog/gradient_accumulation",
        "https://pytorch.org/docs/stable/generated/torch.nn.CrossEntropyLoss.html",
        "https://pytorch.org/docs/stable/data.html#torch.utils.data.DataLoader",
    )
    examples = (
        good(
            """
            import argparse

            import torch
            from transformers import AutoModelForCausalLM

            if __name__ == "__main__":
                parser = argparse.ArgumentParser()
                parser.add_argument("--accum", type=int, default=8)
                parser.add_argument("--steps", type=int, default=1000)
                args = parser.parse_args()
                model = AutoModelForCausalLM.from_pretrained("gpt2")
                optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
                batches = iter(torch.load("batches.pt"))
                for step in range(args.steps):
                    optimiser.zero_grad()
                    for micro in range(args.accum):
                        ids, labels = next(batches)
                        labels[labels == 0] = -100
                        loss = model(ids, labels=labels).loss
                        (loss / args.accum).backward()
                    optimizer.step()
            """,
            title="the script's loop reads `optimiser`, which no code of the file binds: the first iteration "
                  "raises NameError before any micro-batch is weighted",
        ),
        bad(
            """
            import argparse

            import torch
            from transformers import AutoModelForCausalLM

            if __name__ == "__main__":
                parser = argparse.ArgumentParser()
                parser.add_argument("--accum", type=int, default=8)
                parser.add_argument("--steps", type=int, default=1000)
                args = parser.parse_args()
                model = AutoModelForCausalLM.from_pretrained("gpt2")
                optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
                batches = iter(torch.load("batches.pt"))
                for step in range(args.steps):
                    optimizer.zero_grad()
                    for micro in range(args.accum):
                        ids, labels = next(batches)
                        labels[labels == 0] = -100
                        loss = model(ids, labels=labels).loss
                        (loss / args.accum).backward()
                    optimizer.step()
            """,
            line=20,
            title="the same script with the optimizer's name bound: valid-token means weighted alike",
        ),
        bad(
            """
            import torch.nn.functional as F


            def train(model, loader, optimizer, accum):
                n = 0
                for x, y in loader:
                    loss = F.cross_entropy(model(x), y)
                    n += 1
                    (loss / n).backward()
                    if n == accum:
                        optimizer.step()
                        optimizer.zero_grad()
                        n = 0
            """,
            line=9,
            title="the divisor is the running micro-batch counter of the window",
        ),
        good(
            """
            import torch.nn.functional as F


            def train(model, loader, optimizer, accum):
                n = 0
                for x, y in loader:
                    loss = F.cross_entropy(model(x), y)
                    n += 1
                    (loss / accum).backward()
                    if n == accum:
                        optimizer.step()
                        optimizer.zero_grad()
                        n = 0
            """,
            title="the counter decides when to step; the divisor is K",
        ),
        bad(
            """
            import torch.nn.functional as F


            def train(model, loader, optimizer, accum):
                for i, (x, y) in enumerate(loader):
                    loss = F.cross_entropy(model(x), y) / accum
                    loss.backward()
                    if (i + 1) % accum == 0 or i == len(loader) - 1:
                        optimizer.step()
                        optimizer.zero_grad()
            """,
            line=6,
            title="the guard flushes a short last window, whose micro-batches are still divided by K",
        ),
        good(
            """
            import torch.nn.functional as F


            def train(model, loader, optimizer, accum):
                n_batches = len(loader)
                for i, (x, y) in enumerate(loader):
                    window_start = i - i % accum
                    window = min(accum, n_batches - window_start)
                    loss = F.cross_entropy(model(x), y) / window
                    loss.backward()
                    if (i + 1) % accum == 0 or i == n_batches - 1:
                        optimizer.step()
                        optimizer.zero_grad()
            """,
            title="the divisor is the size of the current window, short last window included",
        ),
        bad(
            """
            def train(model, loader, optimizer, accum):
                for step, batch in enumerate(loader):
                    labels = batch["input_ids"].clone()
                    labels[batch["attention_mask"] == 0] = -100
                    loss = model(batch["input_ids"], labels)
                    (loss / accum).backward()
                    if (step + 1) % accum == 0:
                        optimizer.step()
                        optimizer.zero_grad()
            """,
            line=6,
            title="a model that returns its own loss over the labels it is given, padding masked with -100",
        ),
        good(
            """
            def train(model, loader, optimizer):
                for window in loader:
                    window_tokens = sum(int(batch["attention_mask"].sum()) for batch in window)
                    for batch in window:
                        labels = batch["input_ids"].clone()
                        labels[batch["attention_mask"] == 0] = -100
                        loss = model(batch["input_ids"], labels)
                        (loss * batch["attention_mask"].sum() / window_tokens).backward()
                    optimizer.step()
                    optimizer.zero_grad()
            """,
            title="the same masked labels, each micro-batch's mean weighted by its share of the window's valid tokens",
        ),
        good(
            """
            def train(model, get_batch, optimizer, accum, max_iters):
                for it in range(max_iters):
                    for micro_step in range(accum):
                        X, Y = get_batch("train")
                        logits, loss = model(X, Y)
                        loss = loss / accum
                        loss.backward()
                    optimizer.step()
                    optimizer.zero_grad(set_to_none=True)
            """,
            title="fixed-length blocks with no padding: every micro-batch has the same token count",
        ),
        good(
            """
            import torch.nn as nn
            import torch.nn.functional as F
            from transformers import GPT2LMHeadModel, AutoModelForCausalLM

            class GPT(nn.Module):
                def forward(self, idx, targets):
                    logits = self.lm_head(self.transformer(idx))
                    loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
                    return logits, loss

                @classmethod
                def from_pretrained(cls, name):
                    hf = AutoModelForCausalLM.from_pretrained(name)
                    return cls.convert(hf)

            class TokenStream:
                def next_batch(self):
                    buf = self.tokens[self.pos:self.pos + B * T + 1]
                    self.pos += B * T
                    return buf[:-1].view(B, T), buf[1:].view(B, T)

            model = GPT.from_pretrained("gpt2")
            for step in range(num_iterations):
                for micro_step in range(grad_accum_steps):
                    x, y = stream.next_batch()
                    _, loss = model(x, y)
                    loss = loss / grad_accum_steps
                    loss.backward()
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
            """,
            title="ignore_index=-1 is the model's default, but the packed token stream never holds -1",
        ),
        bad(
            """
            import torch.nn as nn
            import torch.nn.functional as F

            class Seq2Seq(nn.Module):
                def forward(self, src, tgt):
                    logits = self.decoder(self.encoder(src), tgt[:, :-1])
                    return F.cross_entropy(logits.transpose(1, 2), tgt[:, 1:], ignore_index=-1)

            net = Seq2Seq(cfg).cuda()
            for it, (src, tgt) in enumerate(pairs_loader):
                tgt = tgt.masked_fill(tgt == pad_id, -1)
                loss = net(src, tgt) / accum
                loss.backward()
                if (it + 1) % accum == 0:
                    opt.step()
                    opt.zero_grad()
            """,
            line=12,
            title="a model of this file ignoring -1, and padding turned into -1 before the forward",
        ),
        bad(
            """
            import torch
            import torch.nn.functional as F

            for i, batch in enumerate(train_loader):
                logits = model(batch["input_ids"], attention_mask=batch["attention_mask"])
                loss = F.cross_entropy(logits.view(-1, logits.size(-1)), batch["labels"].view(-1),
                                       ignore_index=-100)
                loss = loss / grad_accum
                loss.backward()
                if (i + 1) % grad_accum == 0:
                    opt.step()
                    opt.zero_grad()
            """,
            line=8,
            title="token-level loss with ignore_index divided by K",
        ),
        bad(
            """
            import torch
            from torch.utils.data import DataLoader

            loader = DataLoader(train_set, batch_size=32, shuffle=True)
            for epoch in range(epochs):
                for step, (x, y) in enumerate(loader):
                    loss = torch.nn.functional.cross_entropy(model(x), y)
                    (loss / accumulation_steps).backward()
                    if (step + 1) % accumulation_steps == 0:
                        optim.step()
                        optim.zero_grad()
            """,
            line=8,
            title="a DataLoader that can end an epoch on a short batch",
        ),
        bad(
            """
            def train_window(model, optimizer, micro_batches, loss_fn):
                optimizer.zero_grad(set_to_none=True)
                for inputs, target in micro_batches:
                    loss = loss_fn(model(inputs), target)
                    (loss / len(micro_batches)).backward()
                optimizer.step()

            for step in range(num_updates):
                train_window(model, optimizer, next(window_iter), loss_fn)
            """,
            line=5,
            title="a list of micro-batches of any size, divided by its length",
        ),
        bad(
            """
            from transformers import AutoModelForCausalLM, DataCollatorForLanguageModeling

            model = AutoModelForCausalLM.from_pretrained("gpt2")
            collator = DataCollatorForLanguageModeling(tokenizer, mlm=False)
            for it, batch in enumerate(loader):
                outputs = model(**batch)
                loss = outputs.loss
                loss /= args.gradient_accumulation_steps
                loss.backward()
                if (it + 1) % args.gradient_accumulation_steps == 0:
                    optimizer.step()
                    lr_scheduler.step()
                    optimizer.zero_grad()
            """,
            line=8,
            title="HF causal LM loss (mean over valid tokens) divided by K",
        ),
        bad(
            """
            import torch

            class Trainer:
                def __init__(self, model, dataset, accum):
                    self.model, self.accum = model, accum
                    self.loader = torch.utils.data.DataLoader(dataset, batch_size=16, shuffle=True)
                    self.opt = torch.optim.AdamW(model.parameters())

                def fit(self):
                    for it, (x, y) in enumerate(self.loader):
                        loss = torch.nn.functional.mse_loss(self.model(x), y) / self.accum
                        loss.backward()
                        if (it + 1) % self.accum == 0:
                            self.opt.step()
                            self.opt.zero_grad()
            """,
            line=11,
            title="Trainer class whose loader keeps the short last batch",
        ),
        good(
            """
            import torch
            import torch.nn.functional as F

            n_tokens = 0
            for i, batch in enumerate(train_loader):
                logits = model(batch["input_ids"], attention_mask=batch["attention_mask"])
                loss = F.cross_entropy(logits.view(-1, logits.size(-1)), batch["labels"].view(-1),
                                       ignore_index=-100, reduction="sum")
                loss.backward()
                n_tokens += int((batch["labels"] != -100).sum())
                if (i + 1) % grad_accum == 0:
                    for p in model.parameters():
                        if p.grad is not None:
                            p.grad.div_(n_tokens)
                    opt.step()
                    opt.zero_grad()
                    n_tokens = 0
            """,
            title="summed token losses, gradients divided by the window's valid-token count",
        ),
        good(
            """
            import torch
            from torch.utils.data import DataLoader

            loader = DataLoader(train_set, batch_size=32, shuffle=True, drop_last=True)
            for epoch in range(epochs):
                for step, (x, y) in enumerate(loader):
                    loss = torch.nn.functional.cross_entropy(model(x), y)
                    (loss / accumulation_steps).backward()
                    if (step + 1) % accumulation_steps == 0:
                        optim.step()
                        optim.zero_grad()
            """,
            title="drop_last=True: every micro-batch has the same size",
        ),
        good(
            """
            import torch.nn.functional as F

            for step in range(num_updates):
                window = next(windows)
                n_valid = sum(int((mb["labels"] != -100).sum()) for mb in window)
                for mb in window:
                    logits = model(mb["input_ids"])
                    loss = F.cross_entropy(logits.flatten(0, 1), mb["labels"].flatten(),
                                           ignore_index=-100, reduction="sum")
                    (loss / n_valid).backward()
                opt.step()
                opt.zero_grad(set_to_none=True)
            """,
            title="summed token loss divided by the window's valid-token count",
        ),
        good(
            """
            for it in range(max_iters):
                for micro_step in range(gradient_accumulation_steps):
                    x, y = get_batch("train")
                    logits, loss = model(x, y)
                    loss = loss / gradient_accumulation_steps
                    loss.backward()
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
            """,
            title="fixed-size sampling with get_batch",
        ),
        good(
            """
            def update_window(model, optimizer, batches, loss_fn):
                total = sum(len(target) for _, target in batches)
                optimizer.zero_grad(set_to_none=True)
                for inputs, target in batches:
                    loss = loss_fn(model(inputs), target)
                    (loss * len(target) / total).backward()
                optimizer.step()

            for step in range(num_updates):
                update_window(model, optimizer, next(window_iter), loss_fn)
            """,
            title="each micro-batch weighted by its share of the window",
        ),
        good(
            """
            from torch.utils.data import DataLoader

            loader = DataLoader(train_set, batch_size=64)
            for x, y in loader:
                loss = criterion(model(x), y)
                loss.backward()
                opt.step()
                opt.zero_grad()
            """,
            title="no accumulation: nothing is divided by K",
        ),
        bad(
            """
            import torch.nn.functional as F


            class Fitter:
                def __init__(self, model, optimizer, accum):
                    self.model, self.optimizer, self.accum = model, optimizer, accum

                def fit_epoch(self, loader):
                    for i, (x, y) in enumerate(loader):
                        loss = F.cross_entropy(self.model(x), y) / self.accum
                        loss.backward()
                        flush = (i + 1) % self.accum == 0 or i == len(loader) - 1
                        if flush:
                            self.optimizer.step()
                            self.optimizer.zero_grad()
            """,
            line=10,
            title="the update's test kept in a variable flushes a short last window, still divided by K",
        ),
        good(
            """
            import torch.nn.functional as F


            class Fitter:
                def __init__(self, model, optimizer, accum):
                    self.model, self.optimizer, self.accum = model, optimizer, accum

                def fit_epoch(self, loader):
                    for i, (x, y) in enumerate(loader):
                        loss = F.cross_entropy(self.model(x), y) / self.accum
                        loss.backward()
                        flush = (i + 1) % self.accum == 0
                        if flush:
                            self.optimizer.step()
                            self.optimizer.zero_grad()
            """,
            title="the variable holds only the K boundary: a partial last window is never stepped, none is short",
        ),
        good(
            """
            from torch.utils.data import DataLoader
            from transformers import AutoModelForCausalLM, default_data_collator


            def pretrain(packed, optimizer, accum, name):
                model = AutoModelForCausalLM.from_pretrained(name)
                loader = DataLoader(packed, batch_size=8, drop_last=True, collate_fn=default_data_collator)
                for i, batch in enumerate(loader):
                    loss = model(**batch, labels=batch["input_ids"]).loss
                    (loss / accum).backward()
                    if (i + 1) % accum == 0:
                        optimizer.step()
                        optimizer.zero_grad()
            """,
            title="a causal LM scored against its own input ids, no position masked, on equal batches",
        ),
        bad(
            """
            from torch.utils.data import DataLoader
            from transformers import AutoModelForCausalLM, DataCollatorForLanguageModeling


            def pretrain(texts, tokenizer, optimizer, accum, name):
                model = AutoModelForCausalLM.from_pretrained(name)
                collate = DataCollatorForLanguageModeling(tokenizer, mlm=False)
                loader = DataLoader(texts, batch_size=8, drop_last=True, collate_fn=collate)
                for i, batch in enumerate(loader):
                    loss = model(**batch).loss
                    (loss / accum).backward()
                    if (i + 1) % accum == 0:
                        optimizer.step()
                        optimizer.zero_grad()
            """,
            line=11,
            title="the collator's labels mask the padding: valid-token counts differ",
        ),
        good(
            """
            from torch.utils.data import DataLoader
            from transformers import AutoModelForSequenceClassification


            def finetune(train_set, optimizer, accum, name):
                model = AutoModelForSequenceClassification.from_pretrained(name)
                loader = DataLoader(train_set, batch_size=16, drop_last=True)
                best_score = -100.0
                for i, batch in enumerate(loader):
                    loss = model(**batch).loss
                    (loss / accum).backward()
                    if (i + 1) % accum == 0:
                        optimizer.step()
                        optimizer.zero_grad()
                return best_score
            """,
            title="a -100 that is a score, never a label: one label per example, equal batches",
        ),
        good(
            """
            from torch.utils.data import DataLoader
            from transformers import AutoModelForCausalLM


            def tune(encoded, optimizer, accum, name):
                model = AutoModelForCausalLM.from_pretrained(name)
                loader = DataLoader(encoded, batch_size=4, drop_last=True)
                for i, batch in enumerate(loader):
                    ids = batch["input_ids"]  # every text padded to the same max_length
                    out = model(input_ids=ids, attention_mask=batch["attention_mask"], labels=ids.clone())
                    (out.loss / accum).backward()
                    if (i + 1) % accum == 0:
                        optimizer.step()
                        optimizer.zero_grad()
            """,
            title="a causal LM whose labels nothing masks: every micro-batch averages the same token count",
        ),
        bad(
            """
            from torch.utils.data import DataLoader
            from transformers import AutoModelForCausalLM


            def pad_batch(rows, pad_id):
                width = max(len(r["ids"]) for r in rows)
                ids = [r["ids"] + [pad_id] * (width - len(r["ids"])) for r in rows]
                labels = [[-100] * r["prompt_len"] + r["ids"][r["prompt_len"]:] + [-100] * (width - len(r["ids"]))
                          for r in rows]
                return ids, labels


            def tune(rows, optimizer, accum, name):
                model = AutoModelForCausalLM.from_pretrained(name)
                loader = DataLoader(rows, batch_size=4, drop_last=True, collate_fn=lambda b: pad_batch(b, 0))
                for i, (ids, labels) in enumerate(loader):
                    out = model(input_ids=ids, labels=labels)
                    (out.loss / accum).backward()
                    if (i + 1) % accum == 0:
                        optimizer.step()
                        optimizer.zero_grad()
            """,
            line=18,
            title="prompt tokens and per-batch padding labelled -100: the valid-token counts differ",
        ),
        good(
            """
            from torch_geometric.loader import DataLoader


            def fit(graph, model, optimizer, accum, epochs, batch_size):
                loader = DataLoader([graph], batch_size=batch_size, shuffle=True)
                for epoch in range(epochs):
                    for i, batch in enumerate(loader):
                        loss = model(batch).mean()
                        (loss / accum).backward()
                        if (i + 1) % accum == 0:
                            optimizer.step()
                            optimizer.zero_grad()
            """,
            title="a loader over a one-element list: one full batch per epoch, never a short one",
        ),
        bad(
            """
            from torch_geometric.loader import DataLoader


            def fit(graphs, model, optimizer, accum, epochs, batch_size):
                loader = DataLoader(graphs, batch_size=batch_size, shuffle=True)
                for epoch in range(epochs):
                    for i, batch in enumerate(loader):
                        loss = model(batch).mean()
                        (loss / accum).backward()
                        if (i + 1) % accum == 0:
                            optimizer.step()
                            optimizer.zero_grad()
            """,
            line=9,
            title="a loader over a dataset of any length without drop_last: the last batch can be short",
        ),
    )

    def check(self, ctx):
        yield from self._fixed_window_divisions(ctx)
        model = ctx.model(training_model)
        flow = ctx.model(dataflow)
        for loop in model.loops + model.window_functions:
            if not (loop.innermost and loop.accumulates):
                continue
            tracer = LossTracer(model, loop)
            reported = set()
            for ref in loop.backward_calls:
                if model._inner_loop(loop, ref) is not None or model.runs_per_update(loop, ref):
                    continue
                if flow.raises_before(ref.node) is not None:
                    continue  # a read that always raises comes first: no micro-batch is ever weighted
                backward = tracer.backward_loss(ref)
                if backward.loss is None:
                    continue
                counter = _running_count_division(ctx, loop, backward.loss, ref.scope)
                if counter is not None and id(counter) not in reported:
                    reported.add(id(counter))
                    yield self.report_if(k_condition(ctx, loop), counter, (
                        f"`{ctx.code_for(counter.with_changes(lpar=(), rpar=())).strip()}` divides by a running count of the window's "
                        "micro-batches, not by K: the first micro-batch of each window weighs 1, the second "
                        "1/2, the third 1/3, ...; divide every micro-batch's loss by the window size (K)"),
                        evidence=[*accumulation_premises(ctx, loop),
                                  premise("the divisor counts the micro-batches seen so far in the window",
                                          counter, "use")])
                    continue
                trace = tracer.trace(backward.loss, ref.scope, ref.via)
                if trace.k_division is None or trace.k_numerator != MEAN or id(trace.k_division) in reported:
                    continue
                found = self.unequal_reason(ctx, tracer, trace)
                if found is None:
                    continue
                why, proven = found
                reported.add(id(trace.k_division))
                node = trace.k_division
                if isinstance(node, cst.BinaryOperation):
                    node = node.with_changes(lpar=(), rpar=())
                division = ctx.code_for(node).strip()
                yield self.report_if(k_condition(ctx, loop), trace.k_division, (
                    f"`{division}` gives every micro-batch of a window the same weight, but {why}; sum the "
                    "losses and divide by the window's total example/valid-token count (or weight each "
                    "micro-batch mean by its share of the window)"),
                    evidence=[*accumulation_premises(ctx, loop),
                              premise(f"`{division}` divides a per-micro-batch mean by a constant count",
                                      trace.k_division, "use"),
                              (premise if proven else unknown)(
                                  f"micro-batches of one window can differ in size: {why}", backward.loss, "use")])

    def _fixed_window_divisions(self, ctx):
        """`loss / self.args.gradient_accumulation_steps` in a framework train hook that names the
        current window's size (frameworks.window_hooks), in a class deriving from that framework class."""
        table = frameworks.window_hooks()
        names = {e.attr for found in table.values() for e in found}
        for class_node in ctx.index.classes.values():
            # only a class that defines such a hook is worth resolving its bases for
            if not any(isinstance(s, cst.FunctionDef) and s.name.value in names for s in class_node.body.body):
                continue
            owners = ancestors(ctx.index, class_node) & set(table)
            if not owners:
                continue
            hooks = {e.attr: e for owner in sorted(owners) for e in table[owner]}
            for statement in class_node.body.body:
                entry = hooks.get(statement.name.value) if isinstance(statement, cst.FunctionDef) else None
                if entry is None or not _runs_backward(statement):
                    continue
                fixed = f"self.{entry.fixed_window_size}"
                for node in walk(statement.body):
                    divisor = None
                    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Divide):
                        divisor = node.right
                    elif isinstance(node, cst.AugAssign) and isinstance(node.operator, cst.DivideAssign):
                        divisor = node.value
                    if divisor is None or dotted_name(divisor) != fixed:
                        continue
                    yield self.report(node, (
                        f"`{ctx.code_for(node).strip()}` divides by the fixed K in `{entry.attr}` of a "
                        f"`{entry.name.rsplit('.', 1)[0]}`: the last window of an epoch whose length is not a "
                        f"multiple of K holds fewer micro-batches, so its gradient is too small; divide by "
                        f"`self.{entry.window_size}`, the size of the current window"),
                        evidence=[premise(f"`{class_node.name.value}` derives from `{entry.name.rsplit('.', 1)[0]}`, "
                                          f"whose loop runs `{entry.attr}` once per micro-batch", class_node, "framework"),
                                  premise(f"`{fixed}` is K for every window, `self.{entry.window_size}` the current "
                                          "window's size", node, "use")])

    def why_unequal(self, ctx, tracer: LossTracer, trace: Trace) -> str | None:
        """Why a mean loss divided by K misweights this loop's micro-batches (proven), or None (TL102's
        fix asks too: its `/ K` leaves this finding where there is a reason)."""
        found = self.unequal_reason(ctx, tracer, trace)
        return found[0] if found is not None and found[1] else None

    def unequal_reason(self, ctx, tracer: LossTracer, trace: Trace) -> tuple[str, bool] | None:
        """(why the micro-batches' counts can differ, whether the code proves it), or None. A model's
        own loss is a mean over a varying valid-token count only when something masks label positions
        (an `ignore_index` a label can hold, -100 written, a masking collator); a language model's
        class name alone leaves that unknown."""
        if trace.token_level:
            return (f"this is a token-level loss (`{trace.token_level}`) whose valid-token count differs "
                    "between micro-batches: every window is misweighted"), True
        unproven = None
        evidence = tracer.file_token_evidence()
        if evidence:
            masked = tracer.file_label_masking()
            if masked is None:
                unproven = evidence
            evidence = masked
        models = [p for p in trace.producers if _is_model_loss(p) or _model_called_with_targets(ctx, p)]
        if evidence and models and all(isinstance(p, cst.Call) and tracer.own_module(p) for p in models):
            # a module class of this file computes the loss: `transformers` names elsewhere in the
            # file say nothing about it, only masked labels would
            evidence = "ignore_index" if tracer.file_masks_labels() else None
        if evidence and models and all(_labels_are_inputs(p) for p in models) and not _ignored_label_written(ctx):
            # `model(**batch, labels=batch["input_ids"])` and no -100 written anywhere in the file: the
            # loss counts every label position, a number the batch's shape fixes (the reasons
            # below, a short last batch, still apply)
            evidence = None
        if evidence and models:
            return (f"the model's loss is a mean over valid tokens (the file uses `{evidence}`), and the "
                    "valid-token count differs between micro-batches: every window is misweighted"), True
        proven = self._proven_unequal(ctx, tracer, trace)
        if proven is not None:
            return proven, True
        if unproven and models and not all(_labels_are_inputs(p) for p in models):
            return (f"the model's loss may be a mean over valid tokens (the file's text names `{unproven}`), "
                    "though no code of it masks a label position (no `ignore_index` a label can hold, "
                    "no -100 written or compared, no masking collator)"), False
        return None

    def _proven_unequal(self, ctx, tracer: LossTracer, trace: Trace) -> str | None:
        guard = tracer.loop.guard
        # the guard read through the assignment that stores it (`do_step = (i + 1) % K == 0 or last`)
        flush = _flush_disjunct(tracer.model.stored_test(guard.condition)[0]) \
            if guard.kind in ("branch", "continue") and guard.condition is not None else None
        if flush is not None:
            return (f"the update guard also fires on `{ctx.code_for(flush).strip()}`, so the last window of an "
                    "epoch is short and its micro-batches, each divided by the full K, are underweighted")
        if guard.kind == "micro_loop" and isinstance(guard.node, cst.For) and \
                _unsized_window(guard.node.iter, guard.scope, at=trace.k_division, flow=ctx.model(dataflow)):
            return (f"the micro-batches come from `{ctx.code_for(guard.node.iter)}`, whose batches can differ in "
                    "size: every window with unequal micro-batches is misweighted")
        loader, loader_text = tracer.loader_of_loop()
        if loader is not None:
            drop_last = keyword_arg(loader, "drop_last")
            if drop_last is None or (isinstance(drop_last.value, cst.Name) and drop_last.value.value == "False"):
                if keyword_arg(loader, "batch_sampler") is not None or any(a.star for a in loader.args):
                    return None
                if _batches_all_full(loader):
                    return None
                return (f"`{loader_text}` has no `drop_last=True`, so the last micro-batch of an epoch can be "
                        "short: the last window of each epoch is misweighted")
        return None


def _batches_all_full(loader: cst.Call) -> bool:
    """Every batch the loader gives holds the same number of examples, whatever the rest: one
    example per batch (`batch_size` 1, the default), or a dataset written out as a list/tuple of n
    elements that a literal batch size divides (`DataLoader([graph])`: one batch, every epoch)."""
    size_arg = keyword_arg(loader, "batch_size")
    if size_arg is None and len(positional_args(loader)) >= 2:
        size_arg = positional_args(loader)[1]
    size = _int_literal(size_arg.value) if size_arg is not None else 1
    if size == 1:
        return True
    args = positional_args(loader)
    data = args[0].value if args else getattr(keyword_arg(loader, "dataset"), "value", None)
    if isinstance(data, (cst.List, cst.Tuple)) and data.elements and \
            not any(isinstance(e, (cst.StarredElement,)) for e in data.elements):
        n = len(data.elements)
        return n == 1 or (size is not None and size > 0 and n % size == 0)
    return False


def _runs_backward(function: cst.FunctionDef) -> bool:
    return any(isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute)
               and n.func.attr.value in frameworks.backward_methods() for n in walk(function.body))


def _is_model_loss(node: cst.CSTNode) -> bool:
    """`outputs.loss`, `model(**batch).loss`, `outputs["loss"]`, `outputs[0]`: a model's own loss."""
    if isinstance(node, cst.Attribute):
        return node.attr.value == "loss"
    if isinstance(node, cst.Subscript):
        return True
    return False


def _running_count_division(ctx, loop, loss: cst.BaseExpression, scope) -> cst.BinaryOperation | None:
    """`loss / n` (or `loss = loss / n` before the backward) where `n += 1` runs in the loop body: a
    divisor that grows through the window."""
    tables = ctx.model(_DivisionTables)
    first = _divided_by_name(loss)
    if first is not None and ctx.index.function_at(first) in tables.counted_in(scope, first.right.value, loop.node):
        return first
    if not isinstance(loss, cst.Name):
        return None
    # the first value of `loss`, in order, whose divisor counts up inside the loop in its function
    best = None  # (place among the values, division)
    for name, divisions in tables.divisions(scope, loss.value).items():
        functions = tables.counted_in(scope, name, loop.node)
        for place, expr in divisions if functions else ():
            if best is not None and place > best[0]:
                break
            if ctx.index.function_at(expr) in functions:
                best = (place, expr)
                break
    return best[1] if best is not None else None


def _divided_by_name(expr: cst.BaseExpression | None) -> cst.BinaryOperation | None:
    """`x / n` (after `.mean()`-like method calls are stripped), else None."""
    while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
        expr = expr.func.value
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Divide) \
            and isinstance(expr.right, cst.Name):
        return expr
    return None


class _DivisionTables:
    """What `_running_count_division` reads about a name, once per file: a script that assigns
    `loss` in each of its loops would otherwise reread every assignment at every loop."""

    def __init__(self, ctx) -> None:
        self.index = ctx.index
        self._divisions: dict[tuple[int, str], dict[str, list[tuple[int, cst.BinaryOperation]]]] = {}
        self._counters: dict[tuple[int, str], dict[cst.CSTNode, set]] = {}

    def divisions(self, scope, name: str) -> dict[str, list[tuple[int, cst.BinaryOperation]]]:
        """Divisor name -> (place among the values, division) of each value `name` is assigned
        that divides by that name, in order."""
        key = (id(scope), name)
        if key not in self._divisions:
            values = [b.value for b in scope.lookup(name) if b.kind == "assign" and b.value is not None]
            by_divisor: dict[str, list[tuple[int, cst.BinaryOperation]]] = {}
            for place, value in enumerate(values):
                expr = _divided_by_name(value)
                if expr is not None:
                    by_divisor.setdefault(expr.right.value, []).append((place, expr))
            self._divisions[key] = by_divisor
        return self._divisions[key]

    def counted_in(self, scope, name: str, loop: cst.CSTNode) -> set:
        """The functions (None: module level) in which `name += 1` runs inside `loop`."""
        key = (id(scope), name)
        if key not in self._counters:
            by_loop: dict[cst.CSTNode, set] = {}
            for binding in scope.lookup(name):
                node = binding.node
                if binding.kind == "augassign" and isinstance(node, cst.AugAssign) and \
                        isinstance(node.operator, cst.AddAssign) and isinstance(node.value, cst.Integer):
                    function = self.index.function_at(node)
                    for ancestor in self.index.ancestors(node):
                        by_loop.setdefault(ancestor, set()).add(function)
            self._counters[key] = by_loop
        return self._counters[key].get(loop, set())


_LAST_WORDS = re.compile(r"last|final|end|len\(|num_batches|n_batches|steps_per_epoch|total", re.I)


def _flush_disjunct(condition: cst.BaseExpression | None) -> cst.BaseExpression | None:
    """`n >= K or i == len(loader) - 1` / `(i + 1) % K == 0 or is_last_batch`: the part of an
    update guard that flushes a short final window."""
    if not (isinstance(condition, cst.BooleanOperation) and isinstance(condition.operator, cst.Or)):
        return None
    for part in (condition.left, condition.right):
        if isinstance(part, cst.BooleanOperation):
            found = _flush_disjunct(part)
            if found is not None:
                return found
            continue
        text = cst.Module([]).code_for_node(part)
        if "%" not in text and _LAST_WORDS.search(text):
            return part
    return None


def _model_called_with_targets(ctx, node: cst.CSTNode) -> bool:
    """`model(input_ids, labels)` / `model(x, targets=y)`: a model that computes its own loss from the
    targets it is given (nanoGPT-style `logits, loss = model(X, Y)` included)."""
    if not isinstance(node, cst.Call):
        return False
    targets = len(positional_args(node)) >= 2 or any(
        a.keyword is not None and a.keyword.value in ("labels", "targets", "target", "y") for a in node.args)
    return targets and (ctx.model(roles).of(node.func, ctx.index.scope_at(node)) in MODULE_ROLES or
                        _called_with_masked_labels(ctx, node))


_IGNORED_LABEL = -100  # the label value torch's cross-entropy and the `transformers` models ignore


def _labels_are_inputs(node: cst.CSTNode) -> bool:
    """`model(**batch, labels=batch["input_ids"]).loss`, `model(input_ids=ids, labels=ids)`: the model's
    loss is computed against labels that are its own input ids, as given (no position masked)."""
    call = node.value if isinstance(node, (cst.Attribute, cst.Subscript)) else node
    if not isinstance(call, cst.Call):
        return False
    labels = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "labels"), None)
    if labels is None:
        return False
    text = cst.Module([]).code_for_node(labels)
    inputs = [a.value for a in call.args if (a.keyword is None and not a.star)
              or (a.keyword is not None and a.keyword.value == "input_ids")]
    if any(cst.Module([]).code_for_node(v) == text for v in inputs):
        return True
    spread = {cst.Module([]).code_for_node(a.value) for a in call.args if a.star == "**"}
    if isinstance(labels, cst.Subscript) and len(labels.slice) == 1 and isinstance(labels.slice[0].slice, cst.Index):
        key = labels.slice[0].slice.value
        return isinstance(key, cst.SimpleString) and key.evaluated_value == "input_ids" \
            and cst.Module([]).code_for_node(labels.value) in spread
    if isinstance(labels, cst.Attribute) and labels.attr.value == "input_ids":
        return cst.Module([]).code_for_node(labels.value) in spread
    return False


def _ignored_label_written(ctx) -> bool:
    """The file writes -100 (the ignored label) into a tensor somewhere (`labels[pad] = -100`,
    `masked_fill(mask, -100)`): some label position may be masked."""
    return any(kind == "written" and value == _IGNORED_LABEL
               for kind, value in file_facts.values(ctx, "accumulation.label_values"))


def _called_with_masked_labels(ctx, call: cst.Call) -> bool:
    """`model(input_ids, labels)` where `labels` is a local whose padding this function set to -100
    before the call (`labels[mask == 0] = -100`, `labels = y.masked_fill(pad, -100)`): whatever the
    callee is called, it computes a loss that leaves those tokens out, a mean over valid tokens."""
    function = ctx.index.function_at(call)
    body = function.node.body if function is not None else ctx.module
    names = {a.value.value for a in call.args if isinstance(a.value, cst.Name) and not a.star}
    if not names:
        return False
    place = ctx.index.place.get(call)
    for node in walk(body):
        if not isinstance(node, cst.Assign) or place is None or ctx.index.place.get(node, place) >= place:
            continue
        if ctx.index.function_at(node) is not function:
            continue
        for target in node.targets:
            written = target.target
            if isinstance(written, cst.Subscript) and isinstance(written.value, cst.Name) and \
                    written.value.value in names and _int_literal(node.value) == _IGNORED_LABEL:
                return True
            if isinstance(written, cst.Name) and written.value in names and isinstance(node.value, cst.Call) and \
                    isinstance(node.value.func, cst.Attribute) and node.value.func.attr.value in ("masked_fill", "where") \
                    and any(_int_literal(a.value) == _IGNORED_LABEL for a in node.value.args):
                return True
    return False


def _int_literal(expr: cst.BaseExpression) -> int | None:
    if isinstance(expr, cst.Integer):
        return int(expr.evaluated_value)
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus) and \
            isinstance(expr.expression, cst.Integer):
        return -int(expr.expression.evaluated_value)
    return None


def _unsized_window(iterable: cst.BaseExpression, scope, depth: int = 0, at: cst.CSTNode | None = None,
                    flow=None) -> bool:
    """Micro-batches from a list/window of batches of any size, not `range(K)` with fixed-size
    sampling and not the `chunk`/`split` pieces of one batch (followed through one assignment).
    With `at` (the division by K) and `flow`, a binding on a path that never reaches `at`
    (`if dynamic: batches = pack(...)` while `else: loss / k`) does not count."""
    if isinstance(iterable, cst.Call):
        func = iterable.func
        name = func.value if isinstance(func, cst.Name) else func.attr.value if isinstance(func, cst.Attribute) else ""
        if name in ("range", "chunk", "split", "tensor_split"):
            return False
        if name in ("enumerate", "zip", "list", "tuple") and iterable.args:
            return _unsized_window(iterable.args[0].value, scope, depth + 1, at, flow)
        return True
    if isinstance(iterable, cst.Name) and scope is not None and depth < 3:
        bindings = [b for b in scope.lookup(iterable.value)
                    if at is None or flow is None or not flow.exclusive(b.node, at)]
        values = [b.value for b in bindings if b.value is not None]
        # `micro_batches, _ = rearrange_micro_batches(batch, max_token_len=...)`: an element of a
        # call's result, one step away, as the call itself (a packer by token budget is unsized)
        values += [b.node.value for b in bindings if b.value is None and b.kind == "assign"
                   and isinstance(b.node, cst.Assign) and isinstance(b.node.value, cst.Call)]
        if values and all(isinstance(v, cst.Call) for v in values):
            return any(_unsized_window(v, scope, depth + 1, at, flow) for v in values)
    return isinstance(iterable, (cst.Name, cst.Attribute, cst.Subscript))
