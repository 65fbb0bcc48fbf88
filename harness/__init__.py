"""The processes a test or a benchmark starts around the product, as operators run them: Celery workers
with the documented pool and flags, gunicorn as the Dockerfile runs it, steady traffic and arrival
recorders, a rolling upgrade (`harness.runtime`). Shared by `tests/` and `bench/`, imported by neither
the product packages nor the other way round (import-linter contracts in pyproject.toml); not shipped."""
