"""Review latency with 1,000,000 candidates in Postgres: the next-item request and the label POST, p50 and p95 over
200 requests each, through the Django test client (the whole middleware and template stack, no network).

    ./run python bench/review_latency.py            # builds the scratch database pcapp_bench_review once
    ./run python bench/review_latency.py --n 100000 # smaller

Target: both under 50 ms at the 95th percentile on this machine.
"""

from __future__ import annotations

import argparse
import statistics
import time

from _django import setup


def fill(n: int) -> None:
    """A corpus with n source and n target sentences and a run with n candidates, written with COPY (once)."""
    from django.db import transaction

    from mining.db.bulk import copy_rows, reserve_ids
    from mining.models import Corpus, Document, MiningRun, RunKind, Sentence, SentencePairCandidate

    if SentencePairCandidate.objects.filter(run__name=f"bench-{n}").count() == n:
        return
    with transaction.atomic():
        corpus = Corpus.objects.create(name=f"bench-review-{n}-{time.time():.0f}", languages=["en", "fr"])
        docs = {lang: Document.objects.create(corpus=corpus, lang=lang, external_id="bench") for lang in ("en", "fr")}
        ids = {lang: reserve_ids(Sentence, n) for lang in ("en", "fr")}
        for lang in ("en", "fr"):
            copy_rows(
                Sentence,
                ["id", "corpus_id", "document_id", "lang", "position", "text", "norm_hash", "detected_lang"],
                (
                    (int(ids[lang][i]), corpus.pk, docs[lang].pk, lang, i, f"{lang} sentence number {i} here.", i, lang)
                    for i in range(n)
                ),
                ["int8", "int8", "int8", "text", "int4", "text", "int8", "text"],
            )
        run = MiningRun.objects.create(
            kind=RunKind.SENTENCE,
            name=f"bench-{n}",
            src_corpus=corpus,
            tgt_corpus=corpus,
            src_lang="en",
            tgt_lang="fr",
            status="succeeded",
        )
        copy_rows(
            SentencePairCandidate,
            ["run_id", "src_id", "tgt_id", "cosine", "score", "rank", "strategy", "filter_reason", "evidence"],
            (
                (
                    run.pk,
                    int(ids["en"][i]),
                    int(ids["fr"][i]),
                    0.8,
                    2.0 - i / n,
                    i + 1,
                    "max_score",
                    "",
                    {
                        "cosine": 0.8,
                        "margin": 2.0 - i / n,
                        "fwd_mean": 0.4,
                        "bwd_mean": 0.4,
                        "src_neighbours": [[int(ids["fr"][(i + k) % n]), 0.5] for k in range(4)],
                        "tgt_neighbours": [[int(ids["en"][(i + k) % n]), 0.5] for k in range(4)],
                    },
                )
                for i in range(n)
            ),
            ["int8", "int8", "int8", "float8", "float8", "int4", "text", "text", "jsonb"],
        )


def pct(xs: list[float], q: float) -> float:
    return sorted(xs)[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--requests", type=int, default=200)
    args = parser.parse_args()
    setup("pcapp_bench_review")
    from django.contrib.auth import get_user_model
    from django.test import Client
    from django.urls import reverse

    from annotation.models import Assignment
    from annotation.services import campaign_create
    from annotation.spec import CampaignSpec
    from mining.models import MiningRun, SentencePairCandidate

    t0 = time.perf_counter()
    fill(args.n)
    print(
        f"{SentencePairCandidate.objects.count():,} candidates in the database ({time.perf_counter() - t0:.0f} s "
        "to prepare)"
    )
    user, _ = get_user_model().objects.get_or_create(username="bench-reviewer", defaults={"is_staff": True})
    run = MiningRun.objects.filter(name=f"bench-{args.n}").latest("created_at")
    t0 = time.perf_counter()
    campaign = campaign_create(
        spec=CampaignSpec(name="latency", sample_size=args.requests + 10, seed=1), runs=[run], reviewers=[user]
    )
    print(
        f"campaign of {campaign.items.count()} items sampled uniformly from {args.n:,} in "
        f"{time.perf_counter() - t0:.2f} s"
    )
    client = Client()
    client.force_login(user)
    url = reverse("campaign-review", args=[campaign.pk])
    label_url = reverse("campaign-label", args=[campaign.pk])
    client.get(url)  # warm up
    gets, posts = [], []
    for _ in range(args.requests):
        t = time.perf_counter()
        r = client.get(url, headers={"HX-Request": "true"})
        gets.append((time.perf_counter() - t) * 1000)
        assert r.status_code == 200
        item = Assignment.objects.get(campaign=campaign, reviewer=user).item_id
        t = time.perf_counter()
        r = client.post(label_url, {"item": item, "verdict": "GOOD", "seconds": "1"}, headers={"HX-Request": "true"})
        posts.append((time.perf_counter() - t) * 1000)
        assert r.status_code == 200, r.content[:300]
    for name, xs in (("next item (GET)", gets), ("label (POST, answers the next item)", posts)):
        print(f"{name:<38} p50 {statistics.median(xs):6.1f} ms   p95 {pct(xs, 0.95):6.1f} ms   max {max(xs):6.1f} ms")


if __name__ == "__main__":
    main()
