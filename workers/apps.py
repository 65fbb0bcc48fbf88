from django.apps import AppConfig


class WorkersConfig(AppConfig):
    """The Celery runtime as a Django app: it holds the commands that run the workers' jobs in-process."""

    name = "workers"
    verbose_name = "Mirrorplane workers"
