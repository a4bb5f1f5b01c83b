//! Runs a repository's test suite in the sandbox and prints the per-test report.
//!
//! ```sh
//! cargo run -p frognano-sandbox --example run_tests -- examples/repos/textkit
//! ```

use std::path::PathBuf;

use frognano_sandbox::{Sandbox, SandboxOptions, TestRequest};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let repo = std::env::args()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("examples/repos/textkit"));
    let sandbox = Sandbox::new(SandboxOptions::default(), &|step| {
        eprintln!("setup: {step}")
    })?;
    let report = sandbox.run_tests(&repo, &TestRequest::default())?;
    for test in &report.tests {
        println!(
            "{:<8} {:>8.4}s  {}",
            test.outcome.as_str(),
            test.duration_s,
            test.id
        );
    }
    println!(
        "{}: {} passed, {} failed, {} errors, {} skipped in {:.2} s",
        report.outcome.as_str(),
        report.passed,
        report.failed,
        report.errors,
        report.skipped,
        report.duration_s
    );
    Ok(())
}
