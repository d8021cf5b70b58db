"""A weights spec may name an imputation rule per component (v0.0.3: goodhart's category_lowest)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("leaderboard", "0019_probeversion_position_max"),
    ]

    operations = [
        migrations.AddField(
            model_name="weightsspec",
            name="imputation_rules",
            field=models.JSONField(
                blank=True,
                default=dict,
                help_text="component → imputation rule (category_lowest); else the default",
            ),
        ),
    ]
