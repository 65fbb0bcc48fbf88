# Mirrorplane: one image for web (gunicorn), Celery workers and beat (see docker-compose.yml).
FROM python:3.11-slim

# Java for the Spark report jobs (local[*] inside the worker; SPARK_MASTER for a cluster).
RUN apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jre-headless \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /app
COPY pyproject.toml README.md ./
COPY replication replication
COPY controlplane controlplane
COPY workers workers
COPY dashboards dashboards
COPY templates templates
COPY static static
COPY manage.py ./
RUN pip install --no-cache-dir . \
 && useradd --create-home mirrorplane \
 && mkdir -p /app/var /data/metrics \
 && chown -R mirrorplane /app/var /data/metrics
USER mirrorplane

ENV DJANGO_SETTINGS_MODULE=controlplane.settings \
    PYTHONUNBUFFERED=1
EXPOSE 8000
# The web's liveness; docker-compose.yml gives workers and beat their own probe (python -m workers.probe).
HEALTHCHECK --interval=15s --timeout=5s --start-period=60s --retries=3 \
  CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=4)"
CMD ["gunicorn", "controlplane.wsgi", "--bind", "0.0.0.0:8000", "--workers", "3", "--threads", "8"]
