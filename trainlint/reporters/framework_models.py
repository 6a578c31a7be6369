"""The framework models as `trainlint explain` prints them: the section a rule's documentation gets
(the frameworks whose entries name the rule) and the list of every model (`explain --frameworks`).
Derived from trainlint/frameworks/*.toml through the model's loader, never written by hand."""

from __future__ import annotations

from trainlint.model import frameworks


def _describe(entry: frameworks.Entry) -> str:
    """`accelerate.Accelerator.accumulate` (accumulation_context, owns accumulation, clock: sync)."""
    notes = [entry.kind]
    if entry.role:
        notes.append(f"role: {entry.role}")
    if entry.step:
        notes.append(f"step: {entry.step}")
    if entry.owns_accumulation:
        notes.append("owns accumulation")
    if entry.clock or entry.scheduler_clock:
        notes.append(f"clock: {entry.clock or entry.scheduler_clock}")
    if entry.unscales:
        notes.append("unscales fp16 gradients")
    if entry.sets_epoch:
        notes.append("sets the loader's epoch")
    if entry.state:
        notes.append(("restores " if entry.kind == "load_state" else "saves ") + ", ".join(entry.state))
    if entry.window_size:
        notes.append(f"window size: self.{entry.window_size}, not self.{entry.fixed_window_size}")
    if entry.returns:
        notes.append(f"returns {entry.returns}" + "".join(f", {word}=True: {cls}" for word, cls in entry.keyword_returns))
    if entry.kind == "dataset_shuffle":
        notes.append("keyed on an epoch only set_epoch moves" if frameworks.epoch_keyed(entry) else "one permutation")
    if entry.saves or entry.into:
        notes.append(f"{'saves' if entry.saves else 'loads into'} the dict `{entry.saves or entry.into}`, "
                     f"at `{entry.path}`")
    if entry.weight:
        notes.append(f"epoch mean weighted by `{entry.weight}`"
                     + (f"; on_epoch by default in {', '.join(entry.epoch_hooks)}" if entry.epoch_hooks else ""))
    if entry.unpacks:
        notes.append("returns (" + ", ".join(entry.unpacks) + ")")
    if entry.accumulation_config_keyword:
        notes.append(f"K: `{entry.accumulation_config_keyword}`'s \"{entry.accumulation_config_key}\"")
    if entry.receiver:
        notes.append(f"on the {entry.receiver}")
    if entry.partial_keywords:
        notes.append("less with " + ", ".join(f"`{k}=`" for k in entry.partial_keywords))
    if entry.values:
        notes.append(f"logs each value of `{entry.values}`")
    if entry.train_step:
        notes.append(f"`.{entry.train_step}()` runs forward and backward of `{entry.micro_batches}` micro-batches "
                     f"of `{entry.loss}`, gradients divided by their number unless "
                     f"`{entry.grad_scaling_keyword}={not entry.grad_scaling_default}`")
    if entry.aliases:
        notes.append("also " + ", ".join(f"`{alias}`" for alias in entry.aliases))
    name = entry.name + (".*" if entry.prefix else "")
    return f"`{name}` ({'; '.join(notes)})"


def rule_section(code: str) -> str:
    """Markdown appended to `trainlint explain CODE`: the framework entries that name the rule."""
    lines = ["", "## Frameworks", ""]
    found = False
    for fw in frameworks.frameworks():
        mine = [e for e in fw.entries if code in e.rules]
        if mine:
            found = True
            lines.append(f"- {fw.title} ({fw.path}): " + ", ".join(_describe(e) for e in mine))
    if not found:
        lines.append("No framework model names this rule (`trainlint explain --frameworks` lists them).")
    else:
        lines[3:3] = ["This rule understands these framework calls, classes and hooks "
                      "(trainlint/frameworks/*.toml; `trainlint explain --frameworks` lists every model):", ""]
    return "\n".join(lines) + "\n"


def render_models() -> str:
    """Every framework model: its file, packages, documentation and entries with the rules they serve."""
    out = []
    for fw in frameworks.frameworks():
        out.append(f"{fw.id}: {fw.title} ({fw.path}; packages: {', '.join(fw.packages)}; "
                   f"{len(fw.entries)} entries, {len(fw.examples)} examples)")
        if fw.docs:
            out.append(f"  {fw.docs}")
        for entry in fw.entries:
            out.append(f"  - {_describe(entry)}  [{', '.join(entry.rules)}]")
        out.append("")
    return "\n".join(out)
