"""A probe may read the max-pooled residual: ``max`` joins the positions a version may declare
(evaluator.core.applicability.POSITIONS)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("leaderboard", "0018_run_kind_any_axis"),
    ]

    operations = [
        migrations.AlterField(
            model_name="probeversion",
            name="position",
            field=models.CharField(
                choices=[("last_token", "Last Token"), ("mean", "Mean"), ("max", "Max")], max_length=20
            ),
        ),
    ]
