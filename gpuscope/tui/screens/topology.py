"""The topology screen (key 5): CPUs/NUMA nodes, PCIe switches, GPUs and NICs drawn as a tree
with the NVLink fabric, each link's live rate against its expected rate, and the links that
fall short (:mod:`gpuscope.tui.screens.topology_graph` draws; the app's
:class:`~gpuscope.tui.screens.topology_feed.TopologyFeed` reads the topology off the UI thread)."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from gpuscope.telemetry.records import Sample
from gpuscope.tui.format import reason_text
from gpuscope.tui.screens.base import GpuscopeScreen
from gpuscope.tui.screens.topology_graph import draw_topology

__all__ = ["TopologyScreen"]


class TopologyScreen(GpuscopeScreen):
    MODE = "topology"
    DEFAULT_HINT = "now/expected GB/s, one direction · ! falls short · the matrix: gpuscope topo"
    DEFAULT_CSS = """
    TopologyScreen #topology-body { height: 1fr; }
    TopologyScreen #topology-graph { width: auto; height: auto; }
    """

    def __init__(self, name: str | None = None, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self._graph = Static("", id="topology-graph", markup=False)
        self._body = VerticalScroll(id="topology-body")
        #: the form of the last drawing (full, compact, dense), for tests and the hint
        self.detail = ""

    def compose_body(self) -> ComposeResult:
        with self._body:
            yield self._graph

    def on_resize(self) -> None:
        self.redraw()

    def on_screen_resume(self) -> None:
        super().on_screen_resume()
        self.gpuscope.topology_feed.refresh_if_stale()  # hidden, it was read only every idle period

    def show_sample(self, sample: Sample) -> None:
        self.redraw(sample)

    def redraw(self, sample: Sample | None = None) -> None:
        """Draw the topology in the body's size with the latest sample's rates."""
        app = self.gpuscope
        sample = sample or app.latest_sample
        feed = app.topology_feed
        topology = feed.topology
        # the screen less the top bar, the alert line (when shown), the hint and the key bar
        width = self.size.width or 80
        height = max(1, (self.size.height or 24) - 3 - (1 if app.alerts else 0))
        if topology is None:
            missing = feed.watch.unavailable
            why = (missing.detail or reason_text(missing)) if missing else "not read yet"
            self._graph.update(Text(f"No topology: {why}"))
            self.detail = ""
            return
        lines, self.detail = draw_topology(topology, sample, feed.watch.findings, width, height)
        self._graph.update(Text("\n").join(lines))
