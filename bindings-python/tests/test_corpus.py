"""Corpora from Python: corpus_add, corpus_entries and corpus_build (frognano corpus)."""

from pathlib import Path

import pytest

import frognano

REPOS = Path(__file__).resolve().parents[2] / "examples" / "repos"


def test_a_corpus_of_local_trees_builds_and_resumes(tmp_path, sandbox):
    corpus = tmp_path / "corpus"
    ids = frognano.corpus_add(corpus, [str(REPOS / "tinyparse"), str(REPOS / "ordstructs")])
    assert len(ids) == 2
    assert [e["status"] for e in frognano.corpus_entries(corpus)] == [None, None]
    steps = []
    summary = frognano.corpus_build(corpus, only=[ids[0]], sandbox=sandbox,
                                    progress=lambda entry, message: steps.append(entry))
    assert (summary["built"], summary["ready"]) == (1, 1)
    assert [m["id"] for m in summary["manifests"]] == [ids[0]]
    assert summary["manifests"][0]["tests"]["passed"] > 0
    assert set(steps) == {ids[0]}
    statuses = {e["id"]: e["status"] for e in frognano.corpus_entries(corpus)}
    assert statuses == {ids[0]: "ready", ids[1]: None}
    again = frognano.corpus_build(corpus, sandbox=sandbox)
    assert (again["built"], again["kept"], again["ready"]) == (1, 1, 2)

    written = frognano.corpus_summary(corpus)
    assert written == {"path": str(corpus / "summary.jsonl"), "entries": 2}
    lines = frognano.read_corpus_summary(written["path"])
    assert sorted(line["id"] for line in lines) == sorted(ids)
    assert all(line["status"] == "ready" and line["excluded"] == [] for line in lines)
    built = {m["id"]: m for m in summary["manifests"] + again["manifests"]}
    assert {line["id"]: line["tests"] for line in lines} == {i: built[i]["tests"] for i in ids}


def test_bad_corpus_arguments_are_clear_errors(tmp_path, sandbox):
    corpus = tmp_path / "corpus"
    frognano.corpus_add(corpus, [str(REPOS / "tinyparse")])
    with pytest.raises(frognano.InvalidArgumentError, match="timeout"):
        frognano.corpus_build(corpus, timeout=0, sandbox=sandbox)
    with pytest.raises(frognano.FrognanoError, match="not an entry"):
        frognano.corpus_build(corpus, only=["no-such-entry"], sandbox=sandbox)
    with pytest.raises(frognano.FrognanoError):
        frognano.corpus_entries(tmp_path / "not-a-corpus")
