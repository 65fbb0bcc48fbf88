"""FlowPartitionStatus speaks the one lag vocabulary (docs/lag.md) and says when it was observed."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("controlplane", "0005_operations"),
    ]

    operations = [
        migrations.RenameField(
            model_name="flowpartitionstatus", old_name="lag_records", new_name="records_behind"
        ),
        migrations.RenameField(
            model_name="flowpartitionstatus", old_name="lag_seconds", new_name="seconds_behind"
        ),
        migrations.RenameField(
            model_name="flowpartitionstatus", old_name="updated_at", new_name="observed_at"
        ),
        migrations.AlterField(
            model_name="flowpartitionstatus",
            name="records_behind",
            field=models.BigIntegerField(
                blank=True, help_text="source end offset - next offset to replicate (docs/lag.md)", null=True
            ),
        ),
        migrations.AlterField(
            model_name="flowpartitionstatus",
            name="seconds_behind",
            field=models.FloatField(
                blank=True,
                help_text="age of the oldest source record not yet replicated (docs/lag.md)",
                null=True,
            ),
        ),
        migrations.AlterField(
            model_name="flowpartitionstatus",
            name="observed_at",
            field=models.DateTimeField(help_text="when the worker measured these figures (end of a slice)"),
        ),
    ]
