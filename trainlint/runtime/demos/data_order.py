"""TL702 and TL8xx at run time: which examples each epoch (and each resumed run) sees, and in what order.

The datasets hold their own index as the label, so a run can record exactly which examples it
trained on.
"""

from trainlint.runtime.demo import Demo, script

TL801 = Demo(
    code="TL801",
    hazard="a DistributedSampler without set_epoch: every epoch replays the same permutation",
    bad=script('''
        model = nn.Linear(4, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        train_set = TensorDataset(torch.randn(16, 4), torch.arange(16))
        sampler = DistributedSampler(train_set, num_replicas=1, rank=0, shuffle=True, seed=0)
        loader = DataLoader(train_set, batch_size=4, sampler=sampler)

        orders = []
        for epoch in range(3):
            order = []
            for x, ids in loader:
                optimizer.zero_grad()
                model(x).pow(2).mean().backward()
                optimizer.step()
                order += ids.tolist()
            orders.append(order)

        print(json.dumps({"epochs": len(orders), "distinct_orders": len({tuple(o) for o in orders}),
                          "first": orders[0][:6]}))
        ''', imports="from torch.utils.data import DataLoader, DistributedSampler, TensorDataset"),
    fix=(("    order = []\n", "    sampler.set_epoch(epoch)\n    order = []\n"),),
    at="sampler = DistributedSampler(",
    show="{distinct_orders} distinct order(s) in {epochs} epochs",
    judge=lambda bad, good: bad["distinct_orders"] == 1 and good["distinct_orders"] == good["epochs"] > 1,
)

TL702 = Demo(
    code="TL702",
    hazard="a resume that restores the step but restarts the loader: the batches before the checkpoint are seen twice",
    bad=script('''
        model = nn.Linear(4, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        loader = DataLoader(TensorDataset(torch.randn(24, 4), torch.arange(24)), batch_size=4)
        path = os.path.join(tempfile.mkdtemp(), "last.pt")
        seen = []  # (run, example) for every example trained on
        consumed_at_save = {}


        def train(run, resume=False, stop_at=None):
            step = 0
            if resume:
                ckpt = torch.load(path, weights_only=True)
                model.load_state_dict(ckpt["model"])
                optimizer.load_state_dict(ckpt["optimizer"])
                step = ckpt["step"]
            for x, ids in loader:
                optimizer.zero_grad()
                model(x).pow(2).mean().backward()
                optimizer.step()
                step += 1
                seen.extend((run, i) for i in ids.tolist())
                if step % 2 == 0:
                    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": step},
                               path + ".tmp")
                    os.replace(path + ".tmp", path)
                    consumed_at_save[run] = [i for r, i in seen if r == run]
                if step == stop_at:
                    return  # the job is preempted after the checkpoint


        train("first", stop_at=3)
        train("resumed", resume=True)
        before = set(consumed_at_save["first"])
        after = [i for r, i in seen if r == "resumed"]
        print(json.dumps({"seen_twice": len(before & set(after)), "checkpointed": len(before),
                          "resumed_examples": len(after), "dataset": 24}))
        ''', imports="import itertools\nimport os\nimport tempfile\nfrom torch.utils.data import DataLoader, TensorDataset"),
    fix=(("    for x, ids in loader:\n", "    for x, ids in itertools.islice(loader, step, None):\n"),),
    at="for x, ids in loader:",
    show="{seen_twice} of {checkpointed} checkpointed examples trained on again",
    judge=lambda bad, good: bad["seen_twice"] == bad["checkpointed"] > 0 and good["seen_twice"] == 0
    and good["resumed_examples"] == good["dataset"] - good["checkpointed"],
)

DEMOS = (TL702, TL801)
