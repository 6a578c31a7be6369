"""What a module's mode changes (`layers.verdict`), as TL302 reads it for its premise that the
evaluated model holds dropout or batch statistics: one mode-dependent part proves it, whatever else
is unknown; mode-free stays mode-free only when every part is known."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from trainlint.model.index import FileIndex
from trainlint.model.layers import DEPENDENT, FREE, LIBRARY, verdict


def _verdict_of_last_assignment(source: str):
    module = cst.parse_module(textwrap.dedent(source))
    index = FileIndex(module)
    assign = [node for node in module.body if isinstance(node, cst.SimpleStatementLine)][-1].body[0]
    return verdict(index, assign.value, index.module_scope)


@pytest.mark.parametrize("source, expected", [
    # a part built somewhere else, then a dropout: the dropout proves it
    ("import torch.nn as nn\nmodel = nn.Sequential(*layers, nn.Dropout(0.1))\n", DEPENDENT),
    ("import torch.nn as nn\nfrom somewhere import Conv\nmodel = nn.Sequential(Conv(3), nn.BatchNorm1d(4))\n",
     DEPENDENT),
    # the same unknown part alone: not known
    ("import torch.nn as nn\nmodel = nn.Sequential(*layers, nn.Linear(2, 2))\n", None),
    ("import torch.nn as nn\nmodel = nn.Sequential(nn.Linear(2, 2), nn.GELU())\n", FREE),
    # a library class not known to hold dropout, first: as before, the container is a library's
    ("import torch.nn as nn\nfrom diffusers import UNet2DModel\nmodel = nn.Sequential(UNet2DModel(), nn.Linear(2, 2))\n",
     LIBRARY),
])
def test_a_container_is_dependent_when_one_part_is(source, expected):
    assert _verdict_of_last_assignment(source) == expected


CLASS = """
import torch.nn as nn
from torch_geometric.nn import GCNConv


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = GCNConv(16, 16)
        self.drop = nn.Dropout(0.5)
        self.out = nn.Linear(16, 2)


model = Net()
"""


def test_a_class_with_a_dropout_beside_a_library_layer_is_dependent():
    assert _verdict_of_last_assignment(CLASS) == DEPENDENT
    # without the dropout, the graph convolution leaves it unknown: it may or may not hold one
    assert _verdict_of_last_assignment(CLASS.replace("        self.drop = nn.Dropout(0.5)\n", "")) is None


FACTORY = """
import torchvision


def build_pair():
    student = torchvision.models.resnet18()
    teacher = torchvision.models.resnet50()
    return student.to("cuda"), teacher


model = build_pair()
"""


def test_a_factory_returning_a_tuple_is_dependent_only_when_every_element_is():
    assert _verdict_of_last_assignment(FACTORY) == DEPENDENT
    mixed = FACTORY.replace("teacher = torchvision.models.resnet50()", "teacher = torch.nn.MSELoss()")
    assert _verdict_of_last_assignment("import torch\n" + mixed) is None
