//! Candidate repairs of a file: the registry's mutations whose inverse restores common bugs,
//! the policy's own `not` insertions, each turned into one SEARCH/REPLACE edit, filtered to the
//! untried ones and ordered by how close they lie to the failure.

use std::collections::{BTreeSet, VecDeque};
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, OnceLock};

use regex::Regex;

use super::RepairConfig;
use super::features::{ADD_NOT, FailureEvidence, SparseFeatures, feature_index, synth_repairs};
use super::mutate;
use super::source::scope_at;
use super::test_run::TestRun;

/// A repair the policy may try.
#[derive(Debug, Clone)]
pub(super) struct Candidate {
    /// The file to edit.
    pub(super) path: String,
    /// The operator that produced it.
    pub(super) operator: String,
    /// The snippet to replace (occurs once in the file).
    pub(super) search: String,
    /// Its replacement.
    pub(super) replace: String,
    /// The features the weights score it by.
    pub(super) features: SparseFeatures,
}

/// Untried repairs of `path` (whose current text is `text`), with features, closest to the
/// failures of `base` first; `first` is the episode's first run, `tried` the edits tried so far
/// as (path, search, replace).
pub(super) fn candidates(
    path: &str,
    text: &str,
    base: &TestRun,
    first: Option<&TestRun>,
    tried: &BTreeSet<(String, String, String)>,
    config: &RepairConfig,
) -> Vec<Candidate> {
    let mutations = repair_mutations(text);
    let evidence = FailureEvidence::of(path, base, first, text);
    let lines: Vec<&str> = text.lines().collect();
    let mut seen_targets = BTreeSet::new();
    let mut out: Vec<(f64, Candidate)> = Vec::new();
    for mutation in mutations.iter() {
        let Ok(target) = mutate::apply(text, &mutation.edits) else {
            continue;
        };
        if target == text || !seen_targets.insert(target.clone()) {
            continue;
        }
        let Some((search, replace)) = single_edit(text, &target) else {
            continue;
        };
        if tried.contains(&(path.to_string(), search.clone(), replace.clone())) {
            continue;
        }
        let features = evidence.features(mutation, &lines);
        let closeness = evidence.closeness(mutation);
        out.push((
            closeness,
            Candidate {
                path: path.to_string(),
                operator: mutation.operator.clone(),
                search,
                replace,
                features,
            },
        ));
    }
    // Focus: when some candidates lie in the functions the failures point at, only those.
    let in_focus = |c: &Candidate| {
        c.features.iter().any(|&(i, v)| {
            v > 0.0
                && (i == feature_index("in_traceback_scope")
                    || i == feature_index("scope_named_in_failures"))
        })
    };
    let mut focused: Vec<(f64, Candidate)> = if out.iter().any(|(_, c)| in_focus(c)) {
        out.into_iter().filter(|(_, c)| in_focus(c)).collect()
    } else {
        out
    };
    // Stable order (by closeness, then text) so sampling is reproducible.
    focused.sort_by(|a, b| {
        b.0.total_cmp(&a.0)
            .then_with(|| a.1.search.cmp(&b.1.search))
            .then_with(|| a.1.replace.cmp(&b.1.replace))
    });
    focused.truncate(config.max_candidates);
    focused.into_iter().map(|(_, c)| c).collect()
}

/// Every repair mutation of `text`, cached by content: the rollouts of a group (and the
/// decisions of an episode) read the same files.
fn repair_mutations(text: &str) -> Arc<Vec<mutate::Mutation>> {
    type Cache = Mutex<VecDeque<(u64, Arc<Vec<mutate::Mutation>>)>>;
    static CACHE: OnceLock<Cache> = OnceLock::new();
    const ENTRIES: usize = 64;
    let key = {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        text.hash(&mut h);
        h.finish()
    };
    let cache = CACHE.get_or_init(|| Mutex::new(VecDeque::new()));
    if let Ok(entries) = cache.lock()
        && let Some((_, found)) = entries.iter().find(|(k, _)| *k == key)
    {
        return found.clone();
    }
    let mut mutations = mutate::find_mutations(text, synth_repairs()).unwrap_or_default();
    mutations.extend(add_not_mutations(text));
    let mutations = Arc::new(mutations);
    if let Ok(mut entries) = cache.lock() {
        if entries.len() >= ENTRIES {
            entries.pop_front();
        }
        entries.push_back((key, mutations.clone()));
    }
    mutations
}

/// Candidates that insert a `not` before the condition of an `if`/`elif`/`while`, a returned
/// value, or an operand of `and`/`or` (the inverse of a dropped `not`).
fn add_not_mutations(text: &str) -> Vec<mutate::Mutation> {
    static RE: OnceLock<Regex> = OnceLock::new();
    let re = RE.get_or_init(|| {
        Regex::new(r"\b(if|elif|while|return|and|or)\s+([A-Za-z_(])")
            .unwrap_or_else(|e| panic!("{e}"))
    });
    let mut out = Vec::new();
    let mut offset = 0;
    for (i, line) in text.split_inclusive('\n').enumerate() {
        let code = line.split('#').next().unwrap_or(line);
        for c in re.captures_iter(code) {
            let Some(operand) = c.get(2) else { continue };
            if code[operand.start()..].starts_with("not ") {
                continue;
            }
            let at = offset + operand.start();
            let edit = mutate::Edit {
                start: at,
                end: at,
                replacement: "not ".into(),
            };
            let Ok(candidate) = mutate::apply(text, std::slice::from_ref(&edit)) else {
                continue;
            };
            if !mutate::parses(&candidate) {
                continue;
            }
            out.push(mutate::Mutation {
                operator: ADD_NOT.into(),
                edits: vec![edit],
                start_line: i as u32 + 1,
                end_line: i as u32 + 1,
                scope: scope_at(text, i + 1).unwrap_or_default(),
                in_function_body: true,
                description: "insert `not`".into(),
            });
        }
        offset += line.len();
    }
    out
}

/// One SEARCH/REPLACE edit turning `current` into `target`: the differing lines, grown with
/// context until the snippet occurs once in `current`.
fn single_edit(current: &str, target: &str) -> Option<(String, String)> {
    if current == target {
        return None;
    }
    let old: Vec<&str> = current.split_inclusive('\n').collect();
    let new: Vec<&str> = target.split_inclusive('\n').collect();
    let (prefix, suffix) = frognano_core::lines::common_ends(&old, &new);
    let (mut lo, mut hi) = (prefix, old.len() - suffix);
    let new_mid = new[prefix..new.len() - suffix].concat();
    let unique = |lo: usize, hi: usize| {
        let search = old[lo..hi].concat();
        !search.trim().is_empty() && current.matches(search.as_str()).count() == 1
    };
    // Grow one line below, then one above, until the snippet occurs once.
    while !unique(lo, hi) {
        if hi == old.len() && lo == 0 {
            return None;
        }
        if hi < old.len() {
            hi += 1;
        }
        if !unique(lo, hi) && lo > 0 {
            lo -= 1;
        }
    }
    let search = old[lo..hi].concat();
    let replace = format!(
        "{}{}{}",
        old[lo..prefix].concat(),
        new_mid,
        old[old.len() - suffix..hi].concat()
    );
    Some((search, replace))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SOURCE: &str = "def clamp(x, lo, hi):\n    if x > hi:\n        return hi\n    if x < lo:\n        return lo\n    return x\n";

    #[test]
    fn single_edit_is_unique_and_reproduces_the_target() {
        let target = SOURCE.replace("x > hi", "x >= hi");
        let (search, replace) = single_edit(SOURCE, &target).expect("edit");
        assert_eq!(SOURCE.matches(&search).count(), 1);
        assert_eq!(SOURCE.replacen(&search, &replace, 1), target);
        // A repeated line needs context to be unique.
        let repeated = "a = 1\nb = 2\na = 1\nc = 3\n";
        let changed = "a = 1\nb = 2\na = 2\nc = 3\n";
        let (search, replace) = single_edit(repeated, changed).expect("edit");
        assert_eq!(repeated.matches(&search).count(), 1);
        assert_eq!(repeated.replacen(&search, &replace, 1), changed);
        assert!(single_edit(repeated, repeated).is_none());
    }

    #[test]
    fn add_not_inserts_parseable_negations() {
        let muts = add_not_mutations(
            "def f(a, b):\n    if a and b:\n        return a\n    return not b\n",
        );
        let texts: Vec<String> = muts
            .iter()
            .filter_map(|m| {
                mutate::apply(
                    "def f(a, b):\n    if a and b:\n        return a\n    return not b\n",
                    &m.edits,
                )
                .ok()
            })
            .collect();
        assert!(texts.iter().any(|t| t.contains("if not a and b")));
        assert!(texts.iter().any(|t| t.contains("a and not b")));
        assert!(texts.iter().any(|t| t.contains("return not a")));
        assert!(!texts.iter().any(|t| t.contains("not not")));
    }

    #[test]
    fn candidates_restore_the_bug_and_skip_tried_edits() {
        let buggy = SOURCE.replace("x > hi", "x >= hi");
        let base = TestRun {
            failed: 1,
            failing: ["tests/test_m.py::test_clamp_high".to_string()].into(),
            locations: vec![("pkg/m.py".to_string(), 2)],
            ..TestRun::default()
        };
        let config = RepairConfig::default();
        let found = candidates("pkg/m.py", &buggy, &base, None, &BTreeSet::new(), &config);
        assert!(!found.is_empty() && found.len() <= config.max_candidates);
        let fix = found
            .iter()
            .find(|c| buggy.replacen(&c.search, &c.replace, 1) == SOURCE)
            .expect("the inverse of the bug is offered");
        let tried = [(fix.path.clone(), fix.search.clone(), fix.replace.clone())].into();
        let again = candidates("pkg/m.py", &buggy, &base, None, &tried, &config);
        assert!(
            again
                .iter()
                .all(|c| (&c.search, &c.replace) != (&fix.search, &fix.replace))
        );
    }
}
