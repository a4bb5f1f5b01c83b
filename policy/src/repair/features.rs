//! The features a candidate repair is scored by: the repair operators and their groups, the
//! feature names (the order of the weights), and [`FailureEvidence`], which turns what the
//! failures say about a file into each candidate's sparse feature vector.

use std::collections::BTreeSet;
use std::sync::OnceLock;

use super::mutate;
use super::source::{identifiers, literals, scope_at};
use super::test_run::TestRun;

/// Sparse features of one candidate: `(feature index, value)`.
pub(super) type SparseFeatures = Vec<(usize, f64)>;

/// The policy's groups of repair operators, for the failure-kind interaction features.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RepairGroup {
    /// Comparisons and their operands.
    Compare,
    /// Arithmetic operators.
    Arith,
    /// Constants and bounds off by one.
    Const,
    /// The order of arguments, statements and branches.
    Order,
    /// Returned values, negations and exception types.
    Value,
}

impl RepairGroup {
    /// Every group, in feature order.
    const ALL: [RepairGroup; 5] = [
        RepairGroup::Compare,
        RepairGroup::Arith,
        RepairGroup::Const,
        RepairGroup::Order,
        RepairGroup::Value,
    ];

    /// The name used in feature names.
    fn name(self) -> &'static str {
        match self {
            RepairGroup::Compare => "compare",
            RepairGroup::Arith => "arith",
            RepairGroup::Const => "const",
            RepairGroup::Order => "order",
            RepairGroup::Value => "value",
        }
    }
}

/// The operators of the mutation registry this policy applies as repairs, in feature order,
/// with their group: those whose inverse is themselves (or within their own family), so
/// applying them to buggy code can restore the original. The one table of the policy's
/// operators; their names are checked against [`mutate::operators`].
const SYNTH_REPAIRS: &[(&str, RepairGroup)] = &[
    ("op_change", RepairGroup::Arith),
    ("op_change_const", RepairGroup::Const),
    ("op_swap", RepairGroup::Compare),
    ("flip_operators", RepairGroup::Compare),
    ("boundary_condition", RepairGroup::Compare),
    ("off_by_one_range", RepairGroup::Const),
    ("off_by_one_slice", RepairGroup::Const),
    ("swap_call_args", RepairGroup::Order),
    ("ctrl_invert_if", RepairGroup::Order),
    ("ctrl_shuffle", RepairGroup::Order),
    ("wrong_return_value", RepairGroup::Value),
    ("drop_not", RepairGroup::Value),
    ("wrong_exception_type", RepairGroup::Value),
];

/// The repair this policy adds itself: insert a `not` (the inverse of `drop_not`).
pub(super) const ADD_NOT: &str = "add_not";

/// Kinds of failure the features distinguish.
const ERROR_KINDS: &[&str] = &[
    "assertion",
    "type",
    "lookup",
    "value",
    "name",
    "other",
    "limit",
];

/// Index in [`ERROR_KINDS`] of errors of no other kind.
const OTHER_ERROR: usize = 5;
/// Index in [`ERROR_KINDS`] of runs ended by a limit or crash.
const LIMIT_ERROR: usize = 6;

/// Features of where a candidate lies and what it changes.
const LOCATION_FEATURES: &[&str] = &[
    "on_traceback_line",
    "near_traceback",
    "in_traceback_scope",
    "scope_named_in_failures",
    "line_identifiers_in_failures",
    "line_literal_in_failures",
    "return_line",
    "condition_line",
    "small_change",
];

/// The registry's operators this policy applies as repairs, in feature order (the names
/// [`mutate::find_mutations`] is asked for).
pub(super) fn synth_repairs() -> &'static [&'static str] {
    static NAMES: OnceLock<Vec<&'static str>> = OnceLock::new();
    NAMES.get_or_init(|| {
        SYNTH_REPAIRS
            .iter()
            .filter_map(|(name, _)| {
                mutate::operators()
                    .iter()
                    .find(|info| info.name == *name)
                    .map(|info| info.name)
            })
            .collect()
    })
}

/// The group of a repair operator (operators outside the table, as `add_not`: values).
fn repair_group(operator: &str) -> RepairGroup {
    SYNTH_REPAIRS
        .iter()
        .find(|(name, _)| *name == operator)
        .map_or(RepairGroup::Value, |(_, group)| *group)
}

/// All repair operators, in feature order.
pub fn repair_operators() -> Vec<&'static str> {
    synth_repairs().iter().copied().chain([ADD_NOT]).collect()
}

/// The names of the features, in the order of [`RepairPolicy::weights`](super::RepairPolicy::weights).
pub fn feature_names() -> &'static [String] {
    static NAMES: OnceLock<Vec<String>> = OnceLock::new();
    NAMES.get_or_init(|| {
        let mut names: Vec<String> = repair_operators()
            .iter()
            .map(|op| format!("op:{op}"))
            .collect();
        names.extend(LOCATION_FEATURES.iter().map(|f| f.to_string()));
        for kind in ERROR_KINDS {
            for group in RepairGroup::ALL {
                names.push(format!("{kind}x{}", group.name()));
            }
        }
        names
    })
}

/// The index of a feature by name (0 for an unknown name).
pub(super) fn feature_index(name: &str) -> usize {
    feature_names()
        .iter()
        .position(|n| n == name)
        .unwrap_or_default()
}

/// What the failures say about one file.
pub(super) struct FailureEvidence {
    /// Traceback lines in this file.
    lines: Vec<usize>,
    /// Scopes (dotted) enclosing those lines.
    scopes: BTreeSet<String>,
    /// Identifiers in the failure text and failing test ids.
    names: BTreeSet<String>,
    /// Integer literals in the failure text.
    literals: BTreeSet<String>,
    /// Share of each failure kind, in the order of [`ERROR_KINDS`].
    kinds: [f64; ERROR_KINDS.len()],
}

impl FailureEvidence {
    /// The evidence of the current run `base` (and the first run's failing tests) about the
    /// file `path` whose text is `text`.
    pub(super) fn of(path: &str, base: &TestRun, first: Option<&TestRun>, text: &str) -> Self {
        let lines: Vec<usize> = base
            .locations
            .iter()
            .filter(|(p, _)| p == path)
            .map(|(_, l)| *l)
            .collect();
        let scopes = lines.iter().filter_map(|&l| scope_at(text, l)).collect();
        let mut failure_text = base.failure_text.clone();
        let mut ids: Vec<String> = base.failing.iter().cloned().collect();
        if let Some(first) = first {
            ids.extend(first.failing.iter().cloned());
        }
        failure_text.push_str(&ids.join(" "));
        let mut names = identifiers(&failure_text);
        // Test names like `test_wrap_long_words` also name `wrap`.
        for id in &ids {
            let name = id.rsplit("::").next().unwrap_or(id);
            let name = name.split('[').next().unwrap_or(name);
            for part in name.trim_start_matches("test_").split('_') {
                if part.len() > 2 {
                    names.insert(part.to_string());
                }
            }
        }
        let mut kinds = [0.0; ERROR_KINDS.len()];
        let mut total = 0.0;
        if base.abnormal {
            kinds[LIMIT_ERROR] = 1.0;
            total = 1.0;
        }
        for line in base.failure_text.lines() {
            let t = line.trim_start();
            let kind = if let Some(rest) = t.strip_prefix("E ") {
                let rest = rest.trim_start();
                let word = rest.split([':', ' ', '(']).next().unwrap_or("");
                Some(match word {
                    "AssertionError" | "assert" => 0,
                    "TypeError" => 1,
                    "IndexError" | "KeyError" | "StopIteration" => 2,
                    "ValueError" | "ZeroDivisionError" | "OverflowError" => 3,
                    "AttributeError" | "NameError" | "UnboundLocalError" => 4,
                    w if w.ends_with("Error") || w.ends_with("Exception") => OTHER_ERROR,
                    _ => continue,
                })
            } else {
                None
            };
            if let Some(k) = kind {
                kinds[k] += 1.0;
                total += 1.0;
            }
        }
        if total > 0.0 {
            for k in &mut kinds {
                *k /= total;
            }
        } else {
            kinds[OTHER_ERROR] = 1.0;
        }
        FailureEvidence {
            lines,
            scopes,
            names,
            literals: literals(&base.failure_text),
            kinds,
        }
    }

    /// Lines between the mutation's statement and the nearest traceback line of this file.
    fn distance(&self, mutation: &mutate::Mutation) -> Option<usize> {
        self.lines
            .iter()
            .map(|&l| {
                let (a, b) = (mutation.start_line as usize, mutation.end_line as usize);
                if l < a { a - l } else { l.saturating_sub(b) }
            })
            .min()
    }

    fn scope_named(&self, scope: &str) -> bool {
        scope
            .rsplit('.')
            .next()
            .is_some_and(|last| !last.is_empty() && self.names.contains(last))
    }

    fn in_traceback_scope(&self, scope: &str) -> bool {
        !scope.is_empty() && self.scopes.contains(scope)
    }

    /// How strongly the evidence points at a mutation's site (for truncation and order only).
    pub(super) fn closeness(&self, mutation: &mutate::Mutation) -> f64 {
        let mut c = 0.0;
        if let Some(d) = self.distance(mutation) {
            c += (-(d as f64) / 5.0).exp() * 2.0;
        }
        if self.in_traceback_scope(&mutation.scope) {
            c += 1.0;
        }
        if self.scope_named(&mutation.scope) {
            c += 1.0;
        }
        c
    }

    /// The features of repairing with `mutation` in the file of `lines`.
    pub(super) fn features(&self, mutation: &mutate::Mutation, lines: &[&str]) -> SparseFeatures {
        let mut f: SparseFeatures = Vec::new();
        let operator = mutation.operator.as_str();
        if let Some(i) = repair_operators().iter().position(|o| *o == operator) {
            f.push((i, 1.0));
        }
        let mut put = |name: &str, v: f64| {
            if v != 0.0 {
                f.push((feature_index(name), v));
            }
        };
        let flag = |on: bool| if on { 1.0 } else { 0.0 };
        let distance = self.distance(mutation);
        put("on_traceback_line", flag(distance == Some(0)));
        put(
            "near_traceback",
            distance.map_or(0.0, |d| (-(d as f64) / 3.0).exp()),
        );
        put(
            "in_traceback_scope",
            flag(self.in_traceback_scope(&mutation.scope)),
        );
        put(
            "scope_named_in_failures",
            flag(self.scope_named(&mutation.scope)),
        );
        let first = (mutation.start_line as usize).saturating_sub(1);
        let site: String = lines
            .get(first..(mutation.end_line as usize).min(lines.len()).max(first))
            .map(|l| l.join("\n"))
            .unwrap_or_default();
        let site_names = identifiers(&site);
        if !site_names.is_empty() {
            let shared = site_names.intersection(&self.names).count();
            put(
                "line_identifiers_in_failures",
                shared as f64 / site_names.len() as f64,
            );
        }
        put(
            "line_literal_in_failures",
            flag(
                literals(&site)
                    .intersection(&self.literals)
                    .next()
                    .is_some(),
            ),
        );
        let head = site.trim_start();
        put("return_line", flag(head.starts_with("return")));
        put(
            "condition_line",
            flag(
                head.starts_with("if ") || head.starts_with("elif ") || head.starts_with("while "),
            ),
        );
        let changed: usize = mutation
            .edits
            .iter()
            .map(|e| (e.end - e.start).max(e.replacement.len()))
            .sum();
        put("small_change", 1.0 / (1.0 + changed as f64 / 4.0));
        let group = RepairGroup::ALL
            .iter()
            .position(|g| *g == repair_group(operator))
            .unwrap_or_default();
        let offset = feature_index(&format!(
            "{}x{}",
            ERROR_KINDS[0],
            RepairGroup::ALL[0].name()
        ));
        for (k, share) in self.kinds.iter().enumerate() {
            if *share > 0.0 {
                f.push((offset + k * RepairGroup::ALL.len() + group, *share));
            }
        }
        f
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repair_operators_come_from_the_registry_in_feature_order() {
        assert_eq!(
            synth_repairs().len(),
            SYNTH_REPAIRS.len(),
            "every operator of the table is in the mutation registry"
        );
        let operators = repair_operators();
        assert_eq!(operators.first(), Some(&"op_change"));
        assert_eq!(operators.last(), Some(&ADD_NOT));
        let names = feature_names();
        assert_eq!(names[0], "op:op_change");
        assert_eq!(names[operators.len()], "on_traceback_line");
        assert_eq!(
            names.last().map(String::as_str),
            Some("limitxvalue"),
            "kind x group interactions close the list"
        );
        assert_eq!(
            names.len(),
            operators.len() + LOCATION_FEATURES.len() + ERROR_KINDS.len() * 5
        );
        assert_eq!(repair_group("op_swap"), RepairGroup::Compare);
        assert_eq!(repair_group(ADD_NOT), RepairGroup::Value);
    }

    #[test]
    fn evidence_points_at_the_traceback_line_and_the_failure_kind() {
        let text = "def clamp(x, lo, hi):\n    if x > hi:\n        return hi\n    return x\n";
        let base = TestRun {
            failed: 1,
            failing: ["tests/test_m.py::test_clamp_high".to_string()].into(),
            locations: vec![("pkg/m.py".to_string(), 2)],
            failure_text: "    E       TypeError: bad\n".into(),
            ..TestRun::default()
        };
        let evidence = FailureEvidence::of("pkg/m.py", &base, None, text);
        let mutation = mutate::Mutation {
            operator: "flip_operators".into(),
            edits: vec![mutate::Edit {
                start: 31,
                end: 32,
                replacement: "<".into(),
            }],
            start_line: 2,
            end_line: 3,
            scope: "clamp".into(),
            in_function_body: true,
            description: String::new(),
        };
        let lines: Vec<&str> = text.lines().collect();
        let features = evidence.features(&mutation, &lines);
        let value = |name: &str| {
            features
                .iter()
                .find(|(i, _)| *i == feature_index(name))
                .map(|(_, v)| *v)
        };
        assert_eq!(value("op:flip_operators"), Some(1.0));
        assert_eq!(value("on_traceback_line"), Some(1.0));
        assert_eq!(value("in_traceback_scope"), Some(1.0));
        assert_eq!(value("scope_named_in_failures"), Some(1.0));
        assert_eq!(value("condition_line"), Some(1.0));
        assert_eq!(value("typexcompare"), Some(1.0));
        assert_eq!(value("assertionxcompare"), None);
        assert!(evidence.closeness(&mutation) > 3.0);
    }
}
