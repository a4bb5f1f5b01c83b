//! Corpus builds on real inputs: a registry sdist (pinned, hash-checked), local trees and
//! archives, and inputs that cannot serve (a malformed sdist, a source without tests, a suite
//! that hangs, one that floods its output, a wrong pin), each with its reason; an interrupted
//! build resumed without redoing finished entries; tasks across the corpus and their export.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use frognano_corpus::{
    BuildEvent, BuildOptions, Corpus, CorpusSynthOptions, FailureKind, Spec, Status,
};
use frognano_sandbox::testing::{shared_sandbox, workspace_root, write_repo};

const ISODATE: &str =
    "isodate==0.7.2 --hash=sha256:4cd1aa0f43ca76f4a6c6c0292a85f40b35ec2e43e315b59f06e6d32171a953e6";

fn tar_gz(dir: &Path, name: &str, files: &[(&str, &str)]) -> std::path::PathBuf {
    let path = dir.join(format!("{name}.tar.gz"));
    let file = std::fs::File::create(&path).expect("create");
    let gz = flate2::write::GzEncoder::new(file, flate2::Compression::fast());
    let mut tar = tar::Builder::new(gz);
    for (rel, contents) in files {
        let mut header = tar::Header::new_gnu();
        header.set_size(contents.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        tar.append_data(&mut header, format!("{name}/{rel}"), contents.as_bytes())
            .expect("append");
    }
    tar.into_inner().expect("tar").finish().expect("gz");
    path
}

#[test]
fn a_corpus_builds_explains_failures_and_resumes() {
    let sandbox = shared_sandbox();
    let work = tempfile::tempdir().expect("tmp");
    let inputs = work.path().join("inputs");
    std::fs::create_dir_all(&inputs).expect("mkdir");
    let tinyparse = workspace_root().join("examples/repos/tinyparse");
    let sdist = tar_gz(
        &inputs,
        "shapes-1.0",
        &[
            ("shapes.py", "def area(w, h):\n    return w * h\n"),
            (
                "tests/test_shapes.py",
                "from shapes import area\n\n\ndef test_area():\n    assert area(2, 3) == 6\n",
            ),
            // A module needing what WebAssembly lacks is excluded, not a broken collection.
            (
                "tests/test_terminal.py",
                "import termios\n\n\ndef test_tty():\n    assert termios\n",
            ),
        ],
    );
    std::fs::write(
        inputs.join("broken-1.0.tar.gz"),
        b"this is not a gzip stream",
    )
    .expect("write");
    let no_tests = write_repo(&[("lib.py", "X = 1\n"), ("README.md", "no tests here\n")]);
    let hangs = write_repo(&[(
        "test_hang.py",
        "def test_quick():\n    pass\n\n\ndef test_forever():\n    while True:\n        pass\n",
    )]);
    let floods = write_repo(&[(
        "test_flood.py",
        "import os\n\n\ndef test_flood():\n    while True:\n        os.write(1, b'x' * 65536)\n",
    )]);
    let wrong_pin = "semver==3.1.2 --hash=sha256:0000000000000000000000000000000000000000000000000000000000000000";
    let list = format!(
        "# a test corpus\n{ISODATE}\n{}\n{}\n{}\n{}\n{}\n{}\n{wrong_pin}\n",
        tinyparse.display(),
        sdist.display(),
        inputs.join("broken-1.0.tar.gz").display(),
        no_tests.path().display(),
        hangs.path().display(),
        floods.path().display(),
    );
    let corpus_dir = work.path().join("corpus");
    let corpus = Corpus::create(&corpus_dir).expect("create");
    let specs = frognano_corpus::parse_list(&list, work.path(), "list").expect("list");
    assert_eq!(corpus.add(&specs).expect("add"), 8);

    // First build: stopped after two entries finish (as Ctrl-C would).
    let cancel = Arc::new(AtomicBool::new(false));
    let options = BuildOptions {
        jobs: 1,
        timeout_s: 8.0,
        cancel: Some(cancel.clone()),
        ..BuildOptions::default()
    };
    let finished = std::sync::Mutex::new(Vec::new());
    let first = corpus
        .build(&sandbox, &options, &|event| {
            if let BuildEvent::Finished { manifest } = event {
                let mut done = finished.lock().expect("lock");
                done.push(manifest.id.clone());
                if done.len() == 2 {
                    cancel.store(true, Ordering::SeqCst);
                }
            }
        })
        .expect("first build");
    assert_eq!(first.built, 2, "{first:?}");
    assert_eq!(first.unfinished, 6, "{first:?}");
    let done_first = finished.lock().expect("lock").clone();
    let stamps: Vec<_> = done_first
        .iter()
        .map(|id| {
            std::fs::metadata(corpus_dir.join("manifests").join(format!("{id}.json")))
                .and_then(|m| m.modified())
                .expect("manifest written")
        })
        .collect();

    // Second build: finishes the rest, redoes nothing.
    let options = BuildOptions {
        jobs: 2,
        timeout_s: 8.0,
        ..BuildOptions::default()
    };
    let second = corpus
        .build(&sandbox, &options, &|_| {})
        .expect("second build");
    assert_eq!((second.kept, second.built), (2, 6), "{second:?}");
    for (id, stamp) in done_first.iter().zip(&stamps) {
        let now = std::fs::metadata(corpus_dir.join("manifests").join(format!("{id}.json")))
            .and_then(|m| m.modified())
            .expect("manifest");
        assert_eq!(&now, stamp, "{id} was built again");
    }

    let manifests = corpus.manifests().expect("manifests");
    assert_eq!(manifests.len(), 8);
    let by_id = |id: &str| {
        manifests
            .iter()
            .find(|m| m.id == id)
            .unwrap_or_else(|| panic!("no manifest {id}: {manifests:#?}"))
    };
    let isodate = by_id("isodate-0.7.2");
    assert_eq!(isodate.status, Status::Ready, "{isodate:#?}");
    assert!(isodate.tests.passed >= 250, "{:?}", isodate.tests);
    assert_eq!(
        isodate.sdist_sha256.as_deref(),
        Some("4cd1aa0f43ca76f4a6c6c0292a85f40b35ec2e43e315b59f06e6d32171a953e6")
    );
    assert!(isodate.suite_seconds.is_some_and(|s| s > 0.0));
    let tiny = by_id("tinyparse");
    assert_eq!(tiny.status, Status::Ready, "{tiny:#?}");
    assert_eq!(tiny.package.as_deref(), Some("tinyparse"));
    let shapes = by_id("shapes-1.0");
    assert_eq!(shapes.status, Status::Ready, "{shapes:#?}");
    assert_eq!(shapes.tests.passed, 1);
    assert!(
        shapes
            .excluded
            .iter()
            .any(|t| t.id == "tests/test_terminal.py" && t.reason == "platform: termios"),
        "{:#?}",
        shapes.excluded
    );
    let reason = |id: &str| {
        by_id(id)
            .failure
            .clone()
            .unwrap_or_else(|| panic!("{id} did not fail"))
    };
    assert_eq!(reason("broken-1.0").kind, FailureKind::MalformedSdist);
    let no_tests_id = Spec::Directory(no_tests.path().to_path_buf()).id();
    assert_eq!(reason(&no_tests_id).kind, FailureKind::NoTests);
    // The test that hangs is deselected (in the entry's frognano.toml, never in the input
    // directory) and the rest of its suite runs; a suite with nothing else fails for its cause.
    let hang_id = Spec::Directory(hangs.path().to_path_buf()).id();
    let hang = by_id(&hang_id);
    assert_eq!(hang.status, Status::Ready, "{hang:#?}");
    assert_eq!(hang.tests.passed, 1);
    assert!(
        hang.excluded
            .iter()
            .any(|t| t.id == "test_hang.py::test_forever"
                && t.reason == "deselected: the suite reached its time limit in it"),
        "{:#?}",
        hang.excluded
    );
    let written = std::fs::read_to_string(corpus.repo_dir(&hang_id).join("frognano.toml"))
        .expect("the entry's configuration");
    assert!(
        written.contains("\"test_hang.py::test_forever\""),
        "{written}"
    );
    assert!(!hangs.path().join("frognano.toml").exists());
    let flood = reason(&Spec::Directory(floods.path().to_path_buf()).id());
    assert_eq!(flood.kind, FailureKind::Output, "{flood:?}");
    let pin = reason("semver-3.1.2");
    assert_eq!(pin.kind, FailureKind::HashMismatch, "{pin:?}");
    assert!(pin.message.contains("not the pinned"), "{pin:?}");
    for m in &manifests {
        if let Some(f) = &m.failure {
            assert!(
                !f.message.contains("Some("),
                "{}: a Debug value: {}",
                m.id,
                f.message
            );
        }
    }
    let groups = frognano_corpus::failures_by_kind(&manifests);
    assert_eq!(groups.values().map(Vec::len).sum::<usize>(), 4);
    let ready = corpus.ready_repos().expect("ready");
    assert_eq!(ready.len(), 4);
    assert_eq!(
        frognano_corpus::expand_repos(std::slice::from_ref(&corpus_dir)).expect("expand"),
        ready
    );

    // Tasks across the ready entries, balanced, and their export.
    let options = CorpusSynthOptions {
        count: 2,
        only: vec!["tinyparse".into(), "shapes-1.0".into()],
        ..CorpusSynthOptions::default()
    };
    let made = frognano_corpus::synthesize(&corpus, &sandbox, &options, &|_| {}).expect("synth");
    assert_eq!(made.entries.len(), 2);
    assert!(!made.tasks.is_empty(), "{:?}", made.entries);
    assert!(made.tasks.len() <= 2);
    for (id, summary) in &made.entries {
        assert!(
            summary.tasks <= 1,
            "{id} took more than its share: {summary:?}"
        );
        let manifest = corpus.manifest(id).expect("manifest");
        assert_eq!(manifest.synthesis.as_ref(), Some(summary));
    }
    let out = work.path().join("dataset");
    let exported = frognano_corpus::export(&corpus, &made.tasks, &out).expect("export");
    assert_eq!(exported.tasks, made.tasks.len());
    let records = std::fs::read_to_string(&exported.dataset).expect("dataset");
    for line in records.lines() {
        let record: serde_json::Value = serde_json::from_str(line).expect("json");
        for field in [
            "instance_id",
            "patch",
            "FAIL_TO_PASS",
            "PASS_TO_PASS",
            "bug_patch",
        ] {
            assert!(record.get(field).is_some(), "{field} missing: {record}");
        }
        assert!(
            record["repo"] == "tinyparse" || record["repo"] == "shapes-1.0",
            "{record}"
        );
    }
    let reloaded = frognano_env::taskset::load_tasks(&exported.dataset).expect("reload");
    assert_eq!(reloaded.len(), made.tasks.len());
    let card = std::fs::read_to_string(&exported.card).expect("card");
    assert!(card.contains("## Tasks per repository"), "{card}");
    assert!(card.contains("## Tasks per operator"), "{card}");
    assert!(card.contains("## Tasks per difficulty"), "{card}");

    // Native agreement, kept in the manifest: the module needing termios passes natively only.
    // Entries are compared on worker threads, and one that cannot be compared (never built)
    // reports its error without stopping the others.
    let ids = ["not-built-1.0".to_string(), "shapes-1.0".to_string()];
    let heard = std::sync::Mutex::new(Vec::new());
    let comparisons =
        frognano_corpus::compare_entries(&corpus, &sandbox, &ids, "python3", 120.0, 2, &|c| {
            heard.lock().expect("lock").push(c.id.clone())
        });
    assert_eq!(heard.lock().expect("lock").len(), 2);
    let [missing, compared] = comparisons.as_slice() else {
        panic!("{comparisons:?}");
    };
    assert_eq!(missing.id, "not-built-1.0");
    assert!(
        missing
            .error
            .as_deref()
            .is_some_and(|e| e.contains("has not been built")),
        "{missing:?}"
    );
    assert_eq!(compared.error, None, "{compared:?}");
    assert_eq!(
        (
            compared.sandbox_passed,
            compared.native_passed,
            compared.both_passed
        ),
        (1, 2, 1),
        "{compared:?}"
    );
    let native = corpus.manifest("shapes-1.0").and_then(|m| m.native);
    assert_eq!(native, Some(compared.counts()));
    assert!((compared.counts().native_share() - 0.5).abs() < 1e-9);

    // The summary: every entry in one small file, readable without the corpus.
    let summary = work.path().join("summary.jsonl");
    assert_eq!(
        frognano_corpus::write_summary(&corpus, &summary).expect("summary"),
        8
    );
    let lines = frognano_corpus::read_summary(&summary).expect("read summary");
    let manifests = corpus.manifests().expect("manifests");
    assert_eq!(lines.len(), manifests.len());
    for line in &lines {
        let full = manifests
            .iter()
            .find(|m| m.id == line.id)
            .expect("same entries");
        assert_eq!(line, &frognano_corpus::summary_line(full));
        assert!(line.excluded.is_empty() && line.requirements.is_null());
    }
    let shapes = lines.iter().find(|m| m.id == "shapes-1.0").expect("shapes");
    assert_eq!(shapes.excluded_by_reason.get("platform: termios"), Some(&1));
    assert!(
        shapes.synthesis.is_some() && shapes.native.is_some(),
        "{shapes:?}"
    );
    std::fs::write(&summary, "{\"not\": \"a manifest\"}\n").expect("write");
    let err = frognano_corpus::read_summary(&summary).expect_err("malformed");
    assert!(err.to_string().contains("line 1"), "{err}");
}

#[test]
fn the_starter_list_is_pinned_and_large() {
    let specs =
        frognano_corpus::parse_list(frognano_corpus::STARTER_LIST, Path::new("."), "starter")
            .expect("the starter list parses");
    assert!(specs.len() >= 300, "{} packages", specs.len());
    for spec in &specs {
        assert!(
            matches!(
                spec,
                Spec::Registry {
                    sha256: Some(_),
                    ..
                }
            ),
            "{spec} is not a hash-pinned registry package"
        );
    }
}
