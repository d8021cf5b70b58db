"""The system account (leaderboard.SystemAccount): the reference probes' owner, made by the
reference-probe install. And a file is accepted once among the versions not set aside for a
reference probe's install (``displaced_by_reference``), instead of once overall.

A board installed before this migration has a ``probebench`` user made by the old install, with an
unusable password: it is adopted as the system account (made inactive, its API token removed). A
``probebench`` user with a usable password was made by a person (someone signed up under the name
first) and is not adopted: the next install refuses it, saying so."""

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models


SYSTEM_USERNAME = "probebench"


def old_install_account_adopt(apps, schema_editor):
    User = apps.get_model(settings.AUTH_USER_MODEL)
    SystemAccount = apps.get_model("leaderboard", "SystemAccount")
    ApiToken = apps.get_model("leaderboard", "ApiToken")
    user = User.objects.filter(username=SYSTEM_USERNAME).first()
    if user is None or not user.password.startswith("!"):  # "!": Django's unusable password
        return
    User.objects.filter(pk=user.pk).update(is_active=False, is_staff=False, is_superuser=False)
    ApiToken.objects.filter(user_id=user.pk).delete()
    SystemAccount.objects.create(user_id=user.pk)


class Migration(migrations.Migration):

    dependencies = [
        ('leaderboard', '0012_probeversion_metadata_normalised'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='SystemAccount',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
            ],
        ),
        migrations.AddField(
            model_name='probeversion',
            name='displaced_by_reference',
            field=models.BooleanField(default=False),
        ),
        migrations.AlterField(
            model_name='probeversion',
            name='artifact_sha256',
            field=models.CharField(max_length=64),
        ),
        migrations.AddConstraint(
            model_name='probeversion',
            constraint=models.UniqueConstraint(condition=models.Q(('displaced_by_reference', False)), fields=('artifact_sha256',), name='uniq_version_artifact'),
        ),
        migrations.AddField(
            model_name='systemaccount',
            name='user',
            field=models.OneToOneField(on_delete=django.db.models.deletion.PROTECT, related_name='system_account', to=settings.AUTH_USER_MODEL),
        ),
        migrations.RunPython(old_install_account_adopt, migrations.RunPython.noop),
    ]
