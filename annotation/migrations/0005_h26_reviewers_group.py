# The `reviewers` group exists from the first install, so that the admin's group chooser offers it the first time a
# staff member makes someone a reviewer (pcapp.roles.REVIEWERS_GROUP; AnnotationConfig.ready makes it again after a
# flush). Reversing leaves the group: it may have members.

from django.db import migrations

REVIEWERS_GROUP = "reviewers"  # pcapp.roles.REVIEWERS_GROUP, copied: a migration does not import the app's code


def create_reviewers_group(apps, schema_editor):
    apps.get_model("auth", "Group").objects.get_or_create(name=REVIEWERS_GROUP)


class Migration(migrations.Migration):
    dependencies = [
        ("annotation", "0004_sentence_pair_statement_guard"),
        ("auth", "0012_alter_user_first_name_max_length"),
    ]

    operations = [migrations.RunPython(create_reviewers_group, migrations.RunPython.noop)]
