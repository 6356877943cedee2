"""Prometheus metrics: the state families computed from the read model at scrape time, live timings, health."""
