//! Run profiles: the milestones FrogNano's pytest plugin records with the interpreter's clock,
//! turned into the phases of a [`RunProfile`] (the same for sandboxed and native runs).

use frognano_core::RunProfile;

/// The guest's clock (seconds) at the milestones of one pytest session.
#[derive(Debug, Default, Clone, Copy, serde::Deserialize)]
pub(crate) struct GuestMarks {
    start: Option<f64>,
    session: Option<f64>,
    collected: Option<f64>,
    loop_start: Option<f64>,
    loop_end: Option<f64>,
    finish: Option<f64>,
}

impl GuestMarks {
    /// Fills the guest phases of `profile`; `tests_s` is the time inside tests. A milestone the
    /// session never reached (a collection-only run has no run loop) counts as zero.
    pub(crate) fn fill(&self, profile: &mut RunProfile, tests_s: f64) {
        let span = |from: Option<f64>, to: Option<f64>| match (from, to) {
            (Some(from), Some(to)) if to >= from => to - from,
            _ => 0.0,
        };
        profile.startup_s = span(self.start, self.session);
        profile.collection_s = span(self.session, self.collected);
        let run_loop = span(self.loop_start, self.loop_end);
        profile.tests_s = tests_s.min(run_loop);
        profile.per_test_overhead_s = run_loop - profile.tests_s;
        profile.finish_s = span(self.loop_end.or(self.collected), self.finish);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_come_from_the_milestones() {
        let marks: GuestMarks = serde_json::from_value(serde_json::json!({
            "start": 10.0, "session": 10.5, "collected": 11.5, "loop_start": 11.5,
            "loop_end": 15.5, "finish": 15.75
        }))
        .expect("marks");
        let mut profile = RunProfile::default();
        marks.fill(&mut profile, 3.0);
        assert_eq!(profile.startup_s, 0.5);
        assert_eq!(profile.collection_s, 1.0);
        assert_eq!(profile.tests_s, 3.0);
        assert_eq!(profile.per_test_overhead_s, 1.0);
        assert_eq!(profile.finish_s, 0.25);
    }

    #[test]
    fn missing_milestones_count_as_zero() {
        // A collection-only session has no run loop.
        let marks: GuestMarks = serde_json::from_value(serde_json::json!({
            "start": 1.0, "session": 1.25, "collected": 2.0, "finish": 2.5
        }))
        .expect("marks");
        let mut profile = RunProfile::default();
        marks.fill(&mut profile, 0.0);
        assert_eq!((profile.collection_s, profile.tests_s), (0.75, 0.0));
        assert_eq!((profile.per_test_overhead_s, profile.finish_s), (0.0, 0.5));
    }
}
