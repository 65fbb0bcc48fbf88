"""The metrics face: `GET /metrics` (Prometheus text, `views`, families in `prometheus`) and `/healthz`,
`/readyz` (`health_views`). Imported only by controlplane.urls."""
