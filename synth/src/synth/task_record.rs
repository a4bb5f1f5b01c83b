//! A validated candidate written as a task record: its patches, statement, hints and test
//! lists.

use super::*;

impl Synthesizer {
    pub(super) fn make_task(
        &self,
        candidate: &Candidate,
        validated: &Validated,
        hint_level: u8,
    ) -> Result<Task> {
        let clean: FileTree = candidate
            .files
            .keys()
            .filter_map(|p| self.repo.files.get(p).map(|d| (p.clone(), d.clone())))
            .collect();
        let bug_patch = diff_trees(&clean, &candidate.files, 3);
        let (mut added, mut removed) = (0usize, 0usize);
        for line in bug_patch.lines() {
            if line.starts_with('+') && !line.starts_with("+++") {
                added += 1;
            } else if line.starts_with('-') && !line.starts_with("---") {
                removed += 1;
            }
        }
        let sites: Vec<&Site> = candidate.sites.iter().map(|&s| &self.sites[s]).collect();
        let roots = &self.repo.prepared.config.import_roots;
        let modules: Vec<String> = candidate
            .files
            .keys()
            .map(|p| module_name(p, roots))
            .collect();
        let scopes: Vec<String> = sites.iter().map(|s| s.mutation.scope.clone()).collect();
        let mut secret_lines = BTreeSet::new();
        for (path, buggy) in &candidate.files {
            let Some(original) = self.repo.files.get(path) else {
                continue;
            };
            let buggy_text = String::from_utf8_lossy(buggy);
            let buggy_lines: HashSet<&str> = buggy_text.lines().map(str::trim).collect();
            for line in String::from_utf8_lossy(original).lines() {
                let line = line.trim();
                if !line.is_empty() && !buggy_lines.contains(line) {
                    secret_lines.insert(line.to_string());
                }
            }
        }
        let excerpts = if hint_level >= 4 {
            sites
                .iter()
                .filter_map(|site| {
                    let buggy = candidate.files.get(&site.file)?;
                    Some(excerpt_around(
                        &site.file,
                        &String::from_utf8_lossy(buggy),
                        &site.mutation.scope,
                        site.mutation.start_line as usize,
                        site.mutation.end_line as usize,
                    ))
                })
                .collect()
        } else {
            Vec::new()
        };
        let fixes = if hint_level >= 5 {
            candidate
                .files
                .iter()
                .filter_map(|(path, buggy)| {
                    let clean = self.repo.files.get(path)?;
                    let mut symptoms: Vec<&str> = sites
                        .iter()
                        .filter(|site| &site.file == path)
                        .filter_map(|site| {
                            mutate::operators()
                                .iter()
                                .find(|info| info.name == site.mutation.operator)
                                .map(|info| info.symptom)
                        })
                        .collect();
                    symptoms.dedup();
                    fix_hunk(
                        path,
                        &String::from_utf8_lossy(clean),
                        &String::from_utf8_lossy(buggy),
                        &symptoms.join("; "),
                    )
                })
                .collect()
        } else {
            Vec::new()
        };
        let statement = write_statement(
            &StatementInput {
                modules: modules.clone(),
                scopes: scopes.clone(),
                failing: validated.failing_records.iter().collect(),
                secret_lines,
                excerpts,
                fixes,
            },
            hint_level,
        );
        let operators: Vec<&str> = sites.iter().map(|s| s.mutation.operator.as_str()).collect();
        let short_ops = operators.join("+");
        let id = format!(
            "{}__{}__{}",
            self.repo_name,
            short_ops,
            &candidate.key[..10]
        );
        let difficulty = Difficulty {
            operators: operators.iter().map(|o| o.to_string()).collect(),
            bug_count: sites.len(),
            hint_level,
            files_changed: candidate.files.len(),
            lines_changed: added.max(removed),
            lines_added: added,
            lines_removed: removed,
            fail_to_pass: validated.fail_to_pass.len(),
            pass_to_pass: validated.pass_to_pass.len(),
            scopes,
        };
        let mut task = Task {
            id,
            repo: self.source.clone(),
            bug_patch,
            gold_patch: None,
            test_patch: None,
            problem_statement: statement,
            fail_to_pass: validated.fail_to_pass.clone(),
            pass_to_pass: validated.pass_to_pass.clone(),
            test_args: Vec::new(),
            limits: self.task_limits(),
            metadata: serde_json::Map::new(),
        };
        // `difficulty` first, then `synth`: the order task files have always held them in.
        task.set_difficulty(&difficulty);
        task.metadata.insert(
            "synth".into(),
            serde_json::json!({
                "generator": concat!("frognano-synth ", env!("CARGO_PKG_VERSION")),
                "seed": self.config.seed,
                "combine_scope": self.config.scope.as_str(),
                "modules": modules,
                "selection": validated.selection.as_str(),
                "tests_run": validated.tests_run,
                "validation_runs": validated.runs,
                "edits": sites.iter().map(|s| serde_json::json!({
                    "file": s.file,
                    "operator": s.mutation.operator,
                    "lines": [s.mutation.start_line, s.mutation.end_line],
                    "description": s.mutation.description,
                })).collect::<Vec<_>>(),
            }),
        );
        task.validate()
            .map_err(|e| SynthError::InvalidOption(e.to_string()))?;
        Ok(task)
    }
}
