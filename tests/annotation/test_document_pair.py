"""The document-pair page (a staff review): both documents side by side, aligned sentences as linked rows, each
judgeable, the pair judged as a whole; corpus text escaped; reviewers and plain users are refused."""

from __future__ import annotations

import pytest
from django.urls import reverse

from annotation.models import Label
from mining.models import DocumentPairCandidate, RunKind
from tests.factories.mining import (
    CorpusFactory,
    DocumentFactory,
    MiningRunFactory,
    SentenceFactory,
    SentencePairCandidateFactory,
)


@pytest.fixture
def doc_pair():
    corpus = CorpusFactory()
    den = DocumentFactory(corpus=corpus, lang="en")
    dfr = DocumentFactory(corpus=corpus, lang="fr")
    en = [
        SentenceFactory(document=den, position=i, text=t)
        for i, t in enumerate(["Hello there.", "<script>alert('x')</script> & co", "Goodbye."])
    ]
    fr = [SentenceFactory(document=dfr, position=i, text=t) for i, t in enumerate(["Bonjour.", "Au revoir."])]
    pair = DocumentPairCandidate.objects.create(
        run=MiningRunFactory(kind=RunKind.DOCUMENT, src_corpus=corpus), src=den, tgt=dfr, cosine=0.9, score=1.3, rank=1
    )
    align = MiningRunFactory(kind=RunKind.ALIGN, src_corpus=corpus)
    linked = [
        SentencePairCandidateFactory(run=align, src=en[0], tgt=fr[0], doc_pair=pair),
        SentencePairCandidateFactory(run=align, src=en[2], tgt=fr[1], doc_pair=pair),
    ]
    return pair, linked


@pytest.mark.django_db
def test_document_pair_page_links_rows_and_escapes_text(staff_client, doc_pair):
    pair, linked = doc_pair
    page = staff_client.get(reverse("document-pair", args=[pair.pk]))
    assert page.status_code == 200
    body = page.content.decode()
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt; &amp; co" in body
    assert "<script>alert(" not in body
    for cand in linked:  # its source row, its target row and its row in the table of aligned pairs
        assert body.count(f'data-pair="{cand.pk}"') == 3
    assert body.count('class="linked"') == 4  # the unaligned middle source sentence is not linked


@pytest.mark.django_db
def test_sentence_pairs_and_the_whole_pair_are_judged_once(staff_client, staff_user, doc_pair):
    pair, linked = doc_pair
    url = reverse("document-pair", args=[pair.pk])
    assert staff_client.post(url, {"sentence_pair": linked[0].pk, "verdict": "GOOD"}).status_code == 302
    staff_client.post(url, {"sentence_pair": linked[0].pk, "verdict": "BAD"})  # a second time: refused
    assert staff_client.post(url, {"document_pair": pair.pk, "verdict": "BAD"}).status_code == 302
    labels = Label.objects.filter(reviewer=staff_user).order_by("verdict")
    assert [(x.verdict, x.mode, x.campaign_id) for x in labels] == [("BAD", "staff", None), ("GOOD", "staff", None)]
    assert Label.objects.get(sentence_pair=linked[0]).verdict == "GOOD"
    page = staff_client.get(url).content.decode()
    assert "your verdict on the whole pair: BAD" in page


@pytest.mark.django_db
@pytest.mark.parametrize("who", ["reviewer_user", "other_user"])
def test_document_pair_page_is_staff_only(client, request, who, doc_pair):
    pair, linked = doc_pair
    client.force_login(request.getfixturevalue(who))
    url = reverse("document-pair", args=[pair.pk])
    assert client.get(url).status_code == 403
    assert client.post(url, {"sentence_pair": linked[0].pk, "verdict": "GOOD"}).status_code == 403
    assert Label.objects.count() == 0
