"""The web tier loads no numeric library: ``django.setup()`` (which loads every app's admin), the URLconf (every
view module) and the serializers and forms import none of torch, faiss, numba, scipy, scikit-learn, pyarrow or
transformers. Those load only where a search, an encoding or a model fit runs (in a worker)."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
NUMERIC = ("torch", "faiss", "numba", "scipy", "sklearn", "pyarrow", "transformers", "sentence_transformers")

PROBE = f"""
import json, sys
NUMERIC = {NUMERIC!r}
import django
django.setup()
from django.contrib import admin
from django.urls import get_resolver
get_resolver().url_patterns
admin.autodiscover()
import mining.api.serializers, mining.forms, annotation.forms, feedback.forms, mining.services.params
import mining.core.enums, mining.core.knn, mining.core.docsites, mining.core.candidates, mining.core.docvote
from mining.core.knn import KnnMethod
from mining.core.encoders.configs import AdapterConfig, DanConfig
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in NUMERIC)))
"""


def test_django_setup_and_the_urlconf_import_no_numeric_library(tmp_path: Path) -> None:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "pcapp.settings", "PCAPP_DATA_DIR": str(tmp_path)}
    result = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-4000:]
    loaded = json.loads(result.stdout.strip().splitlines()[-1])
    assert loaded == []


def test_the_old_import_paths_of_the_enums_still_work() -> None:
    from mining.core import candidates, docsites, docvote, enums, filters, knn, margin
    from mining.core.encoders import adapter, configs, dan

    assert knn.KnnMethod is enums.KnnMethod and margin.Margin is enums.Margin
    assert candidates.Strategy is enums.Strategy and docsites.SiteScope is enums.SiteScope
    assert docvote.VoteForm is enums.VoteForm and filters.FilterReason is enums.FilterReason
    assert dan.DanConfig is configs.DanConfig and adapter.AdapterConfig is configs.AdapterConfig
    assert knn.knn_exact is knn.exact.knn_exact and knn.build_ivf is knn.ivf.build_ivf
