"""Prometheus metrics of the tree: the ``[metrics]`` settings (settings.py), the instruments every child
records into (record.py: a no-op when metrics are off, prometheus_client never imported then), and the
names the page exports (names.py)."""
