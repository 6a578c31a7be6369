"""Step counters as the checkpoint model and TL702 read them: `global_steps` and `steps` are counters
like `global_step` (verl's trainer keeps `self.global_steps`), totals are not."""

from __future__ import annotations

import textwrap

import pytest

from trainlint.engine import lint_source
from trainlint.model.checkpoint_base import COUNTER_NAME
from trainlint.settings import Settings, resolve_selection


@pytest.mark.parametrize("name, counter", [
    ("global_steps", True), ("steps", True), ("global_step", True), ("step", True),
    ("total_steps", False), ("max_steps", False), ("epochs", False), ("num_steps", False),
])
def test_counter_names(name, counter):
    assert bool(COUNTER_NAME.match(name)) is counter


_TRAINER = """
    import torch


    class Trainer:
        def __init__(self, model, optimizer):
            self.model = model
            self.optimizer = optimizer
            self.{counter} = 0

        def fit(self, loader):
            for batch in loader:
                loss = self.model(batch)
                loss.backward()
                self.optimizer.step()
                self.optimizer.zero_grad()
                self.{counter} += 1
                if self.{counter} % 100 == 0:
                    torch.save({{"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
                                {saved}}}, "last.pt")

        def resume(self):
            state = torch.load("last.pt", map_location="cpu")
            self.model.load_state_dict(state["model"])
            self.optimizer.load_state_dict(state["optimizer"])
            self.{counter} = state.get("{counter}", self.{counter})
    """


@pytest.mark.parametrize("counter", ["global_steps", "steps"])
def test_a_plural_step_counter_left_out_of_the_checkpoint(counter):
    settings = Settings(select=resolve_selection(["TL404"], [], []))
    left_out = textwrap.dedent(_TRAINER.format(counter=counter, saved=""))
    kept = textwrap.dedent(_TRAINER.format(counter=counter, saved=f'"{counter}": self.{counter}'))
    assert [f"self.{counter}" in f.message for f in lint_source(left_out, "t.py", settings).findings] == [True]
    assert lint_source(kept, "t.py", settings).findings == []
