from django.db import migrations

from sessionhub.db.compression import compress_with_lz4


class Migration(migrations.Migration):
    dependencies = [
        ("lifecycle", "0003_hot_session_updates"),
    ]

    operations = [
        compress_with_lz4("lifecycle_lifecycleevent", ["payload", "facts"]),
    ]
