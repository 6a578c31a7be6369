"""TL5xx at run time: what autograd keeps alive.

The graph behind a tensor is walked from its `grad_fn`: the nodes it keeps, and the tensors those
nodes still hold for a backward pass (`_saved_*`; reading one that backward freed raises).
"""

from trainlint.runtime.demo import Demo, script

_GRAPH = '''
def graph_nodes(objects):
    """Autograd graph nodes kept alive by the tensors among `objects`."""
    stack = [t.grad_fn for t in objects if torch.is_tensor(t)]
    seen = set()
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        stack.extend(child for child, _ in node.next_functions)
    return seen


def saved_bytes(tensor):
    """Bytes of the tensors that the graph behind `tensor` still holds for a backward pass."""
    total = 0
    for node in graph_nodes([tensor]):
        for name in dir(node):
            if name.startswith("_saved_"):
                try:
                    value = getattr(node, name)
                except RuntimeError:  # already freed by backward
                    continue
                if torch.is_tensor(value):
                    total += value.numel() * value.element_size()
    return total
'''

TL501 = Demo(
    code="TL501",
    hazard="keeping the loss tensor keeps its graph: what is held grows every iteration, flat with .item()",
    bad=script(_GRAPH, '''
        model = nn.Sequential(nn.Linear(10, 32), nn.Tanh(), nn.Linear(32, 1))
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        loader = [(torch.randn(8, 10), torch.randn(8, 1)) for _ in range(10)]
        losses = []
        held = []  # graph nodes kept alive by `losses`, after each iteration

        for xb, yb in loader:
            opt.zero_grad()
            loss = F.mse_loss(model(xb), yb)
            loss.backward()
            opt.step()
            losses.append(loss)
            held.append(len(graph_nodes(losses)))

        print(json.dumps({"after_1": held[0], "after_5": held[4], "after_10": held[9]}))
        '''),
    fix=(("    losses.append(loss)\n", "    losses.append(loss.item())\n"),),
    at="losses.append(loss)",
    show="graph nodes held at 1/5/10: {after_1}/{after_5}/{after_10}",
    judge=lambda bad, good: (0 < bad["after_1"] < bad["after_5"] < bad["after_10"]
                             and good["after_1"] == good["after_5"] == good["after_10"] == 0),
)

TL502 = Demo(
    code="TL502",
    hazard="retain_graph=True with no second backward: the saved activations stay alive after backward",
    bad=script(_GRAPH, '''
        model = nn.Sequential(nn.Linear(10, 256), nn.Tanh(), nn.Linear(256, 1))
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        loader = [(torch.randn(64, 10), torch.randn(64, 1)) for _ in range(3)]

        for xb, yb in loader:
            opt.zero_grad()
            loss = F.mse_loss(model(xb), yb)
            loss.backward(retain_graph=True)
            opt.step()

        # The last iteration's graph, still referenced by `loss`.
        print(json.dumps({"saved_bytes": saved_bytes(loss)}))
        '''),
    fix=(("loss.backward(retain_graph=True)", "loss.backward()"),),
    at="loss.backward(",
    show="{saved_bytes} B saved after backward",
    judge=lambda bad, good: bad["saved_bytes"] > 64 * 256 * 4 and good["saved_bytes"] == 0,
)

DEMOS = (TL501, TL502)
