"""TL4xx at run time: what torch.save writes and torch.load runs, interrupted saves, exact resume.

Everything is written to a temporary directory that the demo removes.
"""

from trainlint.runtime.demo import Demo, script

TL401 = Demo(
    code="TL401",
    hazard="weights_only=False runs code from the file (a marker appears); weights_only=True refuses it",
    bad=script('''
        class Payload:
            """Unpickling this calls open(path, "w"): a harmless stand-in for what a crafted file can run."""

            def __init__(self, path):
                self.path = path

            def __reduce__(self):
                return (open, (self.path, "w"))


        with tempfile.TemporaryDirectory() as workdir:
            marker = os.path.join(workdir, "code-ran")
            path = os.path.join(workdir, "checkpoint.pt")
            torch.save({"weights": torch.ones(3), "extra": Payload(marker)}, path)
            try:
                state = torch.load(path, weights_only=False)
                refused = False
            except pickle.UnpicklingError:
                refused = True
            code_ran = os.path.exists(marker)

        print(json.dumps({"code_ran": code_ran, "refused": refused}))
        ''', imports="import os\nimport pickle\nimport tempfile"),
    fix=(("torch.load(path, weights_only=False)", "torch.load(path, weights_only=True)"),),
    at="torch.load(",
    show="file's code ran: {code_ran}; refused: {refused}",
    judge=lambda bad, good: bad["code_ran"] and not bad["refused"] and good["refused"] and not good["code_ran"],
)

TL402 = Demo(
    code="TL402",
    hazard="a save dying midway destroys last.pt when written in place; atomically, last.pt stays intact",
    bad=script('''
        class Preempted:
            """Pickling this fails, as a save does when the process is killed while writing."""

            def __reduce__(self):
                raise RuntimeError("killed while writing the checkpoint")


        model = nn.Linear(10, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        loader = [(torch.randn(8, 10), torch.randn(8, 1)) for _ in range(3)]
        workdir = tempfile.mkdtemp()
        ckpt = os.path.join(workdir, "last.pt")
        saved = None  # the bytes of the last save that completed

        try:
            for step, (xb, yb) in enumerate(loader, start=1):
                opt.zero_grad()
                loss = F.mse_loss(model(xb), yb)
                loss.backward()
                opt.step()
                state = {"model": model.state_dict(), "optimizer": opt.state_dict(), "step": step}
                if step == 3:
                    state["preempted"] = Preempted()
                torch.save(state, ckpt)
                with open(ckpt, "rb") as f:
                    saved = f.read()
        except RuntimeError:
            pass

        intact = os.path.exists(ckpt) and open(ckpt, "rb").read() == saved
        try:
            resumable_step = torch.load(ckpt, weights_only=True)["step"]
        except Exception:
            resumable_step = None
        shutil.rmtree(workdir)
        print(json.dumps({"previous_intact": intact, "resumable_step": resumable_step}))
        ''', imports="import os\nimport shutil\nimport tempfile"),
    fix=(("        torch.save(state, ckpt)\n",
          '        torch.save(state, ckpt + ".tmp")\n        os.replace(ckpt + ".tmp", ckpt)\n'),),
    at="torch.save(state, ckpt)",
    show="last.pt intact: {previous_intact}; resumable step: {resumable_step}",
    judge=lambda bad, good: (not bad["previous_intact"] and bad["resumable_step"] is None
                             and good["previous_intact"] and good["resumable_step"] == 2),
)

TL403 = Demo(
    code="TL403",
    hazard="saving a 2-row slice of a 100,000-row table writes the whole storage; a clone writes 2 rows",
    bad=script('''
        table = torch.randn(100_000, 4)  # e.g. an embedding table

        with tempfile.TemporaryDirectory() as workdir:
            path = os.path.join(workdir, "head.pt")
            torch.save(table[:2], path)
            written = os.path.getsize(path)

        print(json.dumps({"bytes": written, "storage_bytes": table.numel() * table.element_size()}))
        ''', imports="import os\nimport tempfile"),
    fix=(("torch.save(table[:2], path)", "torch.save(table[:2].clone(), path)"),),
    at="torch.save(",
    show="{bytes} B written",
    judge=lambda bad, good: (bad["bytes"] > 0.9 * bad["storage_bytes"]
                             and good["bytes"] * 50 < bad["bytes"]),
)

# Train k steps, checkpoint, rebuild everything with another seed (as a new process would), load,
# train m more; compare with k+m uninterrupted steps. Data position = the step number.
_RESUME = '''
x, y = torch.randn(64, 8), torch.randn(64, 1)
batches = list(zip(x.split(8), y.split(8)))
K_STEPS, M_STEPS = 4, 4


def build(seed):
    """Every training object, fresh; initialisation draws from the RNG as in a new process."""
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Dropout(0.2), nn.Linear(32, 1))
    opt = torch.optim.AdamW(model.parameters(), lr=0.01)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: 1 - step / 10)  # linear decay
    return model, opt, sched


def train(model, opt, sched, start, stop):
    for step in range(start, stop):
        xb, yb = batches[step]
        opt.zero_grad()
        loss = F.mse_loss(model(xb), yb)
        loss.backward()
        opt.step()
        sched.step()


model, opt, sched = build(0)
train(model, opt, sched, 0, K_STEPS + M_STEPS)
uninterrupted = [p.detach().clone() for p in model.parameters()]

model, opt, sched = build(0)
train(model, opt, sched, 0, K_STEPS)
workdir = tempfile.mkdtemp()
path = os.path.join(workdir, "last.pt")


def save_checkpoint(path, model, optimizer, scheduler, step):
    """Write, then rename: a reader sees the old checkpoint or the new one."""
    {save}
    os.replace(path + ".tmp", path)


save_checkpoint(path, model, opt, sched, K_STEPS)
model, opt, sched = build(1)
ckpt = torch.load(path, weights_only=True)
shutil.rmtree(workdir)
model.load_state_dict(ckpt["model"])
if "optimizer" in ckpt:
    opt.load_state_dict(ckpt["optimizer"])
if "scheduler" in ckpt:
    sched.load_state_dict(ckpt["scheduler"])
if "rng" in ckpt:
    torch.set_rng_state(ckpt["rng"])
train(model, opt, sched, ckpt["step"], K_STEPS + M_STEPS)

resumed = [p.detach() for p in model.parameters()]
print(json.dumps({{"bitwise_equal": all(torch.equal(a, b) for a, b in zip(resumed, uninterrupted)),
                  "max_diff": max((a - b).abs().max().item() for a, b in zip(resumed, uninterrupted))}}))
'''

_COMPLETE = ('    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),\n'
             '                "scheduler": scheduler.state_dict(), "step": step, "rng": torch.get_rng_state()},\n'
             '               path + ".tmp")\n')

TL404 = Demo(
    code="TL404",
    hazard="resume from a model-only checkpoint diverges; a complete one continues bitwise equal",
    bad=script(_RESUME.format(save='torch.save({"model": model.state_dict(), "step": step}, path + ".tmp")'),
               imports="import os\nimport shutil\nimport tempfile"),
    fix=(('    torch.save({"model": model.state_dict(), "step": step}, path + ".tmp")\n', _COMPLETE),),
    at="torch.save(",
    show="resume bitwise equal: {bitwise_equal} (max diff {max_diff:.1e})",
    judge=lambda bad, good: not bad["bitwise_equal"] and bad["max_diff"] > 0 and good["bitwise_equal"],
)

TL701 = Demo(
    code="TL701",
    hazard="a resume checkpoint without RNG state: dropout masks after the resume differ, the run diverges",
    bad=script(_RESUME.format(save='torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),\n'
                                   '                "scheduler": scheduler.state_dict(), "step": step},\n'
                                   '               path + ".tmp")'),
               imports="import os\nimport shutil\nimport tempfile"),
    fix=(('"step": step},\n', '"step": step, "rng": torch.get_rng_state()},\n'),),
    at="torch.save(",
    show="resume bitwise equal: {bitwise_equal} (max diff {max_diff:.1e})",
    judge=lambda bad, good: not bad["bitwise_equal"] and bad["max_diff"] > 0 and good["bitwise_equal"],
)

DEMOS = (TL401, TL402, TL403, TL404, TL701)
