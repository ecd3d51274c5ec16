"""One module per screen (Textual modes): dashboard, roofline, probes, processes."""
