"""Make backprop visible: the computation graph, its gradient shortcuts, and the gradient
that flowed along each edge.

    with mg.viz.record_grads():
        loss.backward()
    graph = mg.viz.draw_graph(loss, params=model)     # a graphviz.Digraph
    mg.viz.render(graph, "gpt.svg")
    mg.viz.find_shortcuts(loss)                       # the residual connections, from the graph
    mg.viz.explore(loss, params=model).save("gpt.html")  # step through the backward pass
"""

from minigrad.viz.draw import draw_graph, format_norm
from minigrad.viz.explore import ExplorerPage, explore
from minigrad.viz.graph import Edge, Graph, collect_graph
from minigrad.viz.record import record_grads
from minigrad.viz.render import render
from minigrad.viz.shortcuts import Shortcut, find_shortcuts

__all__ = [
    "Edge", "ExplorerPage", "Graph", "Shortcut", "collect_graph", "draw_graph", "explore",
    "find_shortcuts", "format_norm", "record_grads", "render",
]  # fmt: skip
