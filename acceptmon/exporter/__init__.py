"""Prometheus: the collector over the live state, the /metrics server, and its web config (TLS, basic auth)."""
