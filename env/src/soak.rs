//! [`soak`]: many episodes through an [`EnvPool`], measuring what a host that runs for days
//! cares about: resident memory, open file descriptors and temporary folders at the start and
//! the end, and whether every episode's record reached the records file. A digest of the
//! episodes' verdicts lets two soaks over the same tasks (one on an idle machine, one beside
//! other work) be compared: with a policy whose actions depend only on the episode (such as
//! frognano-policy's `EpisodeSeededRandom`), equal digests mean equal verdicts.

use std::collections::BTreeSet;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::time::Instant;

use frognano_core::{Policy, Task};
use serde::{Deserialize, Serialize};

use crate::env::EpisodeRecord;
use crate::pool::{EnvPool, RolloutEnv};
use crate::{EnvError, Result};

/// What a soak measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SoakReport {
    /// Episodes that ended (resets that failed are not episodes).
    pub episodes: usize,
    /// Records read back from the records file after the soak (each a whole JSON record).
    pub records_written: usize,
    /// Tasks whose reset failed.
    pub failed_resets: usize,
    /// Episodes the policy failed (it returned an error for them).
    pub failed_episodes: usize,
    /// Episodes resolved.
    pub resolved: usize,
    /// Resident memory before the first episode, in MiB (`None` where the platform does not
    /// say).
    pub rss_start_mb: Option<f64>,
    /// Resident memory after the first round of episodes (caches loaded), in MiB.
    pub rss_warm_mb: Option<f64>,
    /// Resident memory after the last episode, in MiB.
    pub rss_end_mb: Option<f64>,
    /// The most resident memory the process ever had, in MiB.
    pub rss_peak_mb: Option<f64>,
    /// Open file descriptors before the first episode.
    pub fds_start: Option<usize>,
    /// Open file descriptors after the first round (the pool's environments hold some).
    pub fds_warm: Option<usize>,
    /// Open file descriptors after the last episode, once the pool is dropped.
    pub fds_end: Option<usize>,
    /// FrogNano's temporary files and folders (`frognano-*` in the temporary directory) made
    /// during the soak and still there once the pool is dropped.
    pub temp_dirs_left: usize,
    /// Seconds the soak took.
    pub wall_s: f64,
    /// Episodes per second.
    pub episodes_per_s: f64,
    /// SHA-256 over the episodes' outcomes (task id, resolved, reward, steps, test runs, tool
    /// errors, ...), sorted by task id: equal digests, equal verdicts.
    pub verdict_digest: String,
}

/// Runs `episodes` episodes of `policy` through `pool`, cycling over `tasks`, then drops the
/// pool and takes the end figures (what outlives the pool has leaked); episode `k`
/// attempts task `k % tasks.len()` under the id `<id>~<k>`, so every episode is distinct (and a
/// policy seeded by the task id acts differently in each). Each record is appended to
/// `records` (JSON lines, flushed after every round); `on_progress` sees the episodes ended so
/// far. Returns the figures; a step that errors ends the soak with that error.
pub fn soak<E: RolloutEnv>(
    mut pool: EnvPool<E>,
    policy: &mut dyn Policy,
    tasks: &[Task],
    episodes: usize,
    records: &Path,
    mut on_progress: impl FnMut(usize),
) -> Result<SoakReport> {
    if tasks.is_empty() || episodes == 0 {
        return Err(EnvError::InvalidOption(
            "a soak needs tasks and at least one episode".into(),
        ));
    }
    let io = |what: &str| EnvError::io(format!("{what} {}", records.display()));
    let temp_before = frognano_temp_entries();
    let rss_start_mb = process_memory_mb("VmRSS");
    let fds_start = open_fds();
    let mut writer = frognano_repo::LineFile::create(records)?;
    let started = Instant::now();
    let round = (pool.len() * 4).max(1);
    let (mut ended, mut failed_resets, mut failed_episodes, mut resolved) = (0, 0, 0, 0);
    let (mut rss_warm_mb, mut fds_warm) = (None, None);
    let mut next = 0usize;
    while next < episodes {
        let batch: Vec<Task> = (next..episodes.min(next + round))
            .map(|k| {
                let mut task = tasks[k % tasks.len()].clone();
                task.id = format!("{}~{k}", task.id);
                task
            })
            .collect();
        next += batch.len();
        let mut write_error: Option<EnvError> = None;
        let stats = pool.rollout(
            policy,
            &batch,
            |record: EpisodeRecord| {
                let written = serde_json::to_string(&record)
                    .map_err(|e| EnvError::from(frognano_core::Error::from(e)))
                    .and_then(|line| Ok(writer.write_line(&line)?));
                if let (Err(e), None) = (written, &write_error) {
                    write_error = Some(e);
                }
            },
            |_, _| {},
        )?;
        if let Some(e) = write_error {
            return Err(e);
        }
        ended += stats.episodes;
        failed_resets += stats.failed_resets;
        failed_episodes += stats.failed_episodes;
        resolved += stats.resolved;
        if rss_warm_mb.is_none() {
            rss_warm_mb = process_memory_mb("VmRSS");
            fds_warm = open_fds();
        }
        on_progress(ended);
    }
    drop(writer);
    drop(pool);
    let wall_s = started.elapsed().as_secs_f64();
    let (records_written, verdict_digest) = read_back(records).map_err(io("read back"))?;
    let temp_after = frognano_temp_entries();
    Ok(SoakReport {
        episodes: ended,
        records_written,
        failed_resets,
        failed_episodes,
        resolved,
        rss_start_mb,
        rss_warm_mb,
        rss_end_mb: process_memory_mb("VmRSS"),
        rss_peak_mb: process_memory_mb("VmHWM"),
        fds_start,
        fds_warm,
        fds_end: open_fds(),
        temp_dirs_left: temp_after.difference(&temp_before).count(),
        wall_s,
        episodes_per_s: if wall_s > 0.0 {
            ended as f64 / wall_s
        } else {
            0.0
        },
        verdict_digest,
    })
}

/// The lines of `path` that parse as a whole episode record, and the digest of their outcomes
/// (sorted, so the order episodes ended in does not matter): the verdicts as written.
fn read_back(path: &Path) -> std::io::Result<(usize, String)> {
    let mut outcomes: Vec<String> = Vec::new();
    for line in BufReader::new(File::open(path)?).lines() {
        if let Ok(record) = serde_json::from_str::<EpisodeRecord>(&line?) {
            outcomes.push(serde_json::to_string(&record.outcome).map_err(std::io::Error::other)?);
        }
    }
    outcomes.sort();
    let digest = frognano_sandbox::assets::sha256_bytes(outcomes.join("\n").as_bytes());
    Ok((outcomes.len(), digest))
}

/// Names in the temporary directory that FrogNano's temporary files and folders carry.
fn frognano_temp_entries() -> BTreeSet<String> {
    std::fs::read_dir(std::env::temp_dir())
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|name| name.starts_with("frognano-"))
                .collect()
        })
        .unwrap_or_default()
}

/// A memory figure of this process from `/proc/self/status` (`VmRSS`, `VmHWM`), in MiB.
fn process_memory_mb(field: &str) -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status
        .lines()
        .find(|l| l.starts_with(&format!("{field}:")))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

/// Open file descriptors of this process (less the one that lists them).
fn open_fds() -> Option<usize> {
    let entries = std::fs::read_dir("/proc/self/fd").ok()?;
    Some(entries.count().saturating_sub(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_process_figures_read_this_process() {
        if !Path::new("/proc/self/status").exists() {
            return;
        }
        let rss = process_memory_mb("VmRSS").expect("rss");
        let peak = process_memory_mb("VmHWM").expect("peak");
        assert!(rss > 0.0 && peak >= rss, "{rss} {peak}");
        // Standard input, output and error at least (other tests open files concurrently, so
        // no exact count).
        assert!(open_fds().expect("fds") >= 3);
    }
}
