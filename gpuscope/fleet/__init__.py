"""The fleet: every node and GPU of a cluster in one typed snapshot, read from a Prometheus
server or straight from ``gpuscope serve`` exporters. No Textual import (the screen is in
gpuscope.tui.screens.fleet)."""

from gpuscope.fleet.snapshot import FLEET_SCHEMA, FleetAlert, FleetGpu, FleetNode, FleetSnapshot, FleetStraggler

__all__ = ["FLEET_SCHEMA", "FleetAlert", "FleetGpu", "FleetNode", "FleetSnapshot", "FleetStraggler"]
