//! The agent's tools over one workspace directory. Every file operation goes through a
//! capability handle on the workspace (cap-std), so no path, `..` or symlink can reach a file
//! outside it; failures become error observations with a hint, never host errors.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use cap_std::ambient_authority;
use cap_std::fs::Dir;
use frognano_sandbox::GUEST_WORK;
use regex::RegexBuilder;

use crate::protocol::{ToolRequest, dedent, def_name, function_end, indent_of};
use crate::{EnvError, Result};

/// Largest file the agent may create or grow a file to.
const MAX_FILE_BYTES: usize = 1 << 20;
/// Files larger than this are skipped by search.
const MAX_SEARCH_FILE_BYTES: u64 = 1 << 20;
/// Directory entries visited by one listing or search at most.
const MAX_WALK_ENTRIES: usize = 20_000;
/// Longest line shown in search results.
const MAX_MATCH_LINE_CHARS: usize = 200;

/// Tunables of the tools' output.
#[derive(Debug, Clone, Copy)]
pub struct ToolLimits {
    /// Lines shown by `view` without a range.
    pub view_lines: usize,
    /// Matches shown by `search`.
    pub search_results: usize,
    /// Entries shown by `ls`.
    pub list_entries: usize,
}

impl Default for ToolLimits {
    fn default() -> Self {
        ToolLimits {
            view_lines: 200,
            search_results: 50,
            list_entries: 200,
        }
    }
}

/// What a tool call produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutput {
    /// The observation text.
    pub text: String,
    /// The call failed (the text says why and how to fix it).
    pub is_error: bool,
}

impl ToolOutput {
    pub(crate) fn ok(text: impl Into<String>) -> Self {
        ToolOutput {
            text: text.into(),
            is_error: false,
        }
    }
    pub(crate) fn error(text: impl Into<String>) -> Self {
        ToolOutput {
            text: text.into(),
            is_error: true,
        }
    }
}

/// One step of the undo history: a file and what it held before (None: it did not exist).
#[derive(Debug, Clone)]
struct UndoEntry {
    path: String,
    before: Option<Vec<u8>>,
}

/// A workspace the agent edits through the file tools.
#[derive(Debug)]
pub struct Workspace {
    root: PathBuf,
    dir: Dir,
    undo: Vec<UndoEntry>,
    written: std::collections::BTreeSet<String>,
    limits: ToolLimits,
}

/// Result of resolving an agent's path.
type Resolved = std::result::Result<String, String>;

impl Workspace {
    /// Opens a workspace rooted at `root`.
    pub fn open(root: &Path, limits: ToolLimits) -> Result<Self> {
        let dir = Dir::open_ambient_dir(root, ambient_authority())
            .map_err(EnvError::io(format!("open workspace {}", root.display())))?;
        Ok(Workspace {
            root: root.to_path_buf(),
            dir,
            undo: Vec::new(),
            written: std::collections::BTreeSet::new(),
            limits,
        })
    }

    /// Every path the tools wrote, created or removed since the workspace was opened.
    pub fn written(&self) -> &std::collections::BTreeSet<String> {
        &self.written
    }

    /// The host directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Turns an agent's path into a normalised repository-relative one ("" is the root), or
    /// explains why it is refused.
    pub fn resolve(raw: &str) -> Resolved {
        let trimmed = raw
            .trim()
            .trim_matches(|c| c == '`' || c == '"' || c == '\'');
        // Test runs see the repository at the sandbox's mount point; accept paths written
        // that way (they appear in tracebacks).
        let relative = match trimmed.strip_prefix(GUEST_WORK) {
            Some("") => "",
            Some(rest) if rest.starts_with('/') => &rest[1..],
            _ => trimmed,
        };
        if relative.starts_with('/') || relative.starts_with('~') || relative.contains('\\') {
            return Err(format!(
                "`{raw}` is outside the repository: paths are relative to its root, e.g. `pkg/module.py`."
            ));
        }
        if relative.contains('\0') {
            return Err("paths cannot contain NUL bytes.".into());
        }
        let mut parts: Vec<&str> = Vec::new();
        for part in relative.split('/') {
            match part {
                "" | "." => {}
                ".." => {
                    if parts.pop().is_none() {
                        return Err(format!(
                            "`{raw}` climbs out of the repository; paths must stay inside it."
                        ));
                    }
                }
                p => parts.push(p),
            }
        }
        Ok(parts.join("/"))
    }

    fn shown(path: &str) -> &str {
        if path.is_empty() { "." } else { path }
    }

    /// Executes a file tool. `RunTests` and `Submit` are the environment's; passing them here
    /// is a caller bug and returns an error output.
    pub fn execute(&mut self, request: &ToolRequest) -> ToolOutput {
        match request {
            ToolRequest::View { path, start, end } => self.view(path, *start, *end),
            ToolRequest::List { path } => self.list(path.as_deref().unwrap_or("")),
            ToolRequest::Search { pattern, path } => {
                self.search(pattern, path.as_deref().unwrap_or(""))
            }
            ToolRequest::Edit {
                path,
                search,
                replace,
            } => self.edit(path, search, replace),
            ToolRequest::Create { path, content } => self.create(path, content),
            ToolRequest::Insert { path, line, text } => self.insert(path, *line, text),
            ToolRequest::ReplaceFunction { path, name, source } => {
                self.replace_function(path.as_deref(), name, source)
            }
            ToolRequest::ReplaceLines { path, source } => {
                self.replace_lines(path.as_deref(), source)
            }
            ToolRequest::Undo => self.undo(),
            ToolRequest::RunTests { .. } | ToolRequest::Submit => {
                ToolOutput::error("internal: not a file tool")
            }
        }
    }

    /// The file path `tool` was given, or the observation refusing it.
    fn file_path(raw: &str, tool: &str) -> std::result::Result<String, ToolOutput> {
        match Self::resolve(raw) {
            Ok(p) if !p.is_empty() => Ok(p),
            Ok(_) => Err(ToolOutput::error(format!("{tool} needs a file path."))),
            Err(msg) => Err(ToolOutput::error(msg)),
        }
    }

    /// The path `tool` was given and the text of that file, or the observation refusing it.
    fn file_and_text(
        &self,
        raw: &str,
        tool: &str,
    ) -> std::result::Result<(String, String), ToolOutput> {
        let path = Self::file_path(raw, tool)?;
        let text = self.read_text(&path)?;
        Ok((path, text))
    }

    pub(crate) fn read_text(&self, path: &str) -> std::result::Result<String, ToolOutput> {
        match self.dir.read(path) {
            Ok(bytes) => String::from_utf8(bytes)
                .map_err(|_| ToolOutput::error(format!("{path} is not a UTF-8 text file."))),
            Err(e) => Err(self.io_error(path, e)),
        }
    }

    fn io_error(&self, path: &str, e: std::io::Error) -> ToolOutput {
        let path = Self::shown(path);
        match e.kind() {
            ErrorKind::NotFound => {
                let mut msg = format!("No such file: {path}.");
                if let Some(name) = path.rsplit('/').next()
                    && let Some(found) = self.find_by_name(name)
                {
                    msg.push_str(&format!(" Did you mean {found}?"));
                } else {
                    msg.push_str(" Use `ls` to see the files.");
                }
                ToolOutput::error(msg)
            }
            ErrorKind::PermissionDenied => ToolOutput::error(format!(
                "{path} cannot be accessed: it is outside the repository (through a link)."
            )),
            ErrorKind::IsADirectory => {
                ToolOutput::error(format!("{path} is a directory; use `ls {path}`."))
            }
            _ => ToolOutput::error(format!("{path}: {e}")),
        }
    }

    fn find_by_name(&self, name: &str) -> Option<String> {
        if name.is_empty() {
            return None;
        }
        self.walk("")
            .into_iter()
            .find(|p| p.rsplit('/').next() == Some(name))
    }

    /// Repository-relative paths of the regular files under `start` (hidden directories,
    /// caches and links skipped), sorted.
    pub(crate) fn walk(&self, start: &str) -> Vec<String> {
        let mut files = Vec::new();
        let mut stack = vec![start.to_string()];
        let mut visited = 0;
        while let Some(dir_path) = stack.pop() {
            let entries = if dir_path.is_empty() {
                self.dir.entries()
            } else {
                self.dir.read_dir(&dir_path)
            };
            let Ok(entries) = entries else { continue };
            for entry in entries.flatten() {
                visited += 1;
                if visited > MAX_WALK_ENTRIES {
                    break;
                }
                let Ok(name) = entry.file_name().into_string() else {
                    continue;
                };
                let Ok(kind) = entry.file_type() else {
                    continue;
                };
                let path = if dir_path.is_empty() {
                    name.clone()
                } else {
                    format!("{dir_path}/{name}")
                };
                if kind.is_dir() {
                    if !name.starts_with('.')
                        && name != "__pycache__"
                        && !name.ends_with(".egg-info")
                    {
                        stack.push(path);
                    }
                } else if kind.is_file() && !name.ends_with(".pyc") {
                    files.push(path);
                }
            }
        }
        files.sort();
        files
    }

    fn view(&self, raw: &str, start: Option<usize>, end: Option<usize>) -> ToolOutput {
        let path = match Self::resolve(raw) {
            Ok(p) => p,
            Err(msg) => return ToolOutput::error(msg),
        };
        if path.is_empty() || self.dir.metadata(&path).is_ok_and(|m| m.is_dir()) {
            return self.list(&path);
        }
        let text = match self.read_text(&path) {
            Ok(t) => t,
            Err(e) => return e,
        };
        let lines: Vec<&str> = text.lines().collect();
        let total = lines.len();
        if total == 0 {
            return ToolOutput::ok(format!("{path} is empty."));
        }
        let first = start.unwrap_or(1).max(1);
        if first > total {
            return ToolOutput::error(format!(
                "{path} has {total} lines; line {first} is past the end."
            ));
        }
        let ranged = start.is_some() || end.is_some();
        let last = match end {
            Some(e) => e.min(total),
            None if ranged => total,
            None => total.min(first + self.limits.view_lines - 1),
        };
        let mut out = String::new();
        for (i, line) in lines[first - 1..last].iter().enumerate() {
            out.push_str(&format!("{:>6}\t{line}\n", first + i));
        }
        if !ranged && last < total {
            out.push_str(&format!(
                "[showing lines {first}-{last} of {total}; use `view {path} START-END` for more]\n"
            ));
        }
        ToolOutput::ok(out)
    }

    fn list(&self, raw: &str) -> ToolOutput {
        let path = match Self::resolve(raw) {
            Ok(p) => p,
            Err(msg) => return ToolOutput::error(msg),
        };
        if !path.is_empty() {
            match self.dir.metadata(&path) {
                Ok(m) if m.is_dir() => {}
                Ok(_) => return ToolOutput::error(format!("{path} is a file; use `view {path}`.")),
                Err(e) => return self.io_error(&path, e),
            }
        }
        let mut lines = Vec::new();
        let depth_of = |p: &str| p.matches('/').count();
        let base_depth = if path.is_empty() {
            0
        } else {
            depth_of(&path) + 1
        };
        let mut dirs = std::collections::BTreeSet::new();
        let files = self.walk(&path);
        for f in &files {
            let rel_depth = depth_of(f) - base_depth;
            if rel_depth <= 1 {
                lines.push(f.clone());
            }
            // Directories up to two levels below the listed one.
            let parts: Vec<&str> = f.split('/').collect();
            for d in (base_depth + 1)..parts.len().min(base_depth + 3) {
                dirs.insert(format!("{}/", parts[..d].join("/")));
            }
        }
        lines.extend(dirs);
        lines.sort();
        let total = lines.len();
        let mut out = String::new();
        for line in lines.iter().take(self.limits.list_entries) {
            let shown = if path.is_empty() {
                line.as_str()
            } else {
                line.strip_prefix(&format!("{path}/")).unwrap_or(line)
            };
            out.push_str(shown);
            out.push('\n');
        }
        if total > self.limits.list_entries {
            out.push_str(&format!(
                "[... {} more entries]\n",
                total - self.limits.list_entries
            ));
        }
        if out.is_empty() {
            out = format!("{} is empty.\n", Self::shown(&path));
        }
        ToolOutput::ok(out)
    }

    fn search(&self, pattern: &str, raw: &str) -> ToolOutput {
        let path = match Self::resolve(raw) {
            Ok(p) => p,
            Err(msg) => return ToolOutput::error(msg),
        };
        let regex = match RegexBuilder::new(pattern)
            .size_limit(1 << 20)
            .dfa_size_limit(1 << 20)
            .build()
        {
            Ok(r) => r,
            Err(e) => {
                return ToolOutput::error(format!(
                    "`{pattern}` is not a valid regular expression: {e}. Escape special \
                     characters such as ( [ . * with a backslash."
                ));
            }
        };
        let files = if path.is_empty() || self.dir.metadata(&path).is_ok_and(|m| m.is_dir()) {
            self.walk(&path)
        } else {
            match self.dir.metadata(&path) {
                Ok(_) => vec![path.clone()],
                Err(e) => return self.io_error(&path, e),
            }
        };
        let mut shown = String::new();
        let mut count = 0usize;
        for file in files {
            if self
                .dir
                .metadata(&file)
                .is_ok_and(|m| m.len() > MAX_SEARCH_FILE_BYTES)
            {
                continue;
            }
            let Ok(bytes) = self.dir.read(&file) else {
                continue;
            };
            let Ok(text) = std::str::from_utf8(&bytes) else {
                continue;
            };
            for (i, line) in text.lines().enumerate() {
                if regex.is_match(line) {
                    count += 1;
                    if count <= self.limits.search_results {
                        let line: String =
                            line.trim_end().chars().take(MAX_MATCH_LINE_CHARS).collect();
                        shown.push_str(&format!("{file}:{}: {line}\n", i + 1));
                    }
                }
            }
        }
        if count == 0 {
            return ToolOutput::ok(format!(
                "No matches for `{pattern}` in {}.",
                Self::shown(&path)
            ));
        }
        if count > self.limits.search_results {
            shown.push_str(&format!(
                "[... {} more matches; narrow the pattern or the path]\n",
                count - self.limits.search_results
            ));
        }
        ToolOutput::ok(shown)
    }

    pub(crate) fn write(
        &mut self,
        path: &str,
        content: &[u8],
        before: Option<Vec<u8>>,
    ) -> Option<ToolOutput> {
        if content.len() > MAX_FILE_BYTES {
            return Some(ToolOutput::error(format!(
                "refused: {path} would be {} bytes; files are capped at {MAX_FILE_BYTES} bytes.",
                content.len()
            )));
        }
        if let Some((parent, _)) = path.rsplit_once('/')
            && let Err(e) = self.dir.create_dir_all(parent)
        {
            return Some(self.io_error(parent, e));
        }
        self.written.insert(path.to_string());
        if let Err(e) = self.dir.write(path, content) {
            return Some(self.io_error(path, e));
        }
        self.undo.push(UndoEntry {
            path: path.to_string(),
            before,
        });
        None
    }

    /// Numbered lines `first..=last` (1-based, clamped) of `text`, with a little context.
    pub(crate) fn excerpt(text: &str, first: usize, last: usize) -> String {
        let lines: Vec<&str> = text.lines().collect();
        let from = first.saturating_sub(2).max(1);
        let to = (last + 2).min(lines.len());
        let mut out = String::new();
        for n in from..=to {
            out.push_str(&format!("{n:>6}\t{}\n", lines[n - 1]));
        }
        out
    }

    fn edit(&mut self, raw: &str, search: &str, replace: &str) -> ToolOutput {
        let (path, text) = match self.file_and_text(raw, "edit") {
            Ok(found) => found,
            Err(e) => return e,
        };
        if search == replace {
            return ToolOutput::error("No change: the SEARCH and REPLACE parts are identical.");
        }
        let starts: Vec<usize> = text.match_indices(search).map(|(i, _)| i).collect();
        let line_of = |offset: usize| text[..offset].matches('\n').count() + 1;
        match starts.as_slice() {
            [] => {
                let mut msg = format!(
                    "No replacement was performed: the SEARCH text did not appear verbatim in {path}."
                );
                if let Some((a, b)) = whitespace_insensitive_match(&text, search) {
                    msg.push_str(&format!(
                        " Lines {a}-{b} match if whitespace is ignored: copy their exact \
                         indentation (`view {path} {a}-{b}`)."
                    ));
                } else {
                    msg.push_str(&format!(
                        " View the file and copy the lines exactly (`view {path}`)."
                    ));
                }
                ToolOutput::error(msg)
            }
            [start] => {
                let mut new = String::with_capacity(text.len() + replace.len());
                new.push_str(&text[..*start]);
                new.push_str(replace);
                new.push_str(&text[start + search.len()..]);
                if let Some(err) =
                    self.write(&path, new.as_bytes(), Some(text.clone().into_bytes()))
                {
                    return err;
                }
                let first = line_of(*start);
                let last = first + replace.matches('\n').count();
                ToolOutput::ok(format!(
                    "Edited {path}. Lines {}-{} now read:\n{}",
                    first.saturating_sub(2).max(1),
                    (last + 2).min(new.lines().count()),
                    Self::excerpt(&new, first, last)
                ))
            }
            many => {
                let lines: Vec<String> = many.iter().map(|s| line_of(*s).to_string()).collect();
                ToolOutput::error(format!(
                    "No replacement was performed: the SEARCH text occurs {} times in {path}, at \
                     lines [{}]. Include more surrounding lines so that it matches exactly once.",
                    many.len(),
                    lines.join(", ")
                ))
            }
        }
    }

    /// 0-based lines of `text` that define a function called `name`.
    fn definitions(text: &str, name: &str) -> Vec<usize> {
        text.lines()
            .enumerate()
            .filter(|(_, l)| def_name(l) == Some(name))
            .map(|(i, _)| i)
            .collect()
    }

    /// Where `name` is defined: in the file `raw` names when it defines it, else in the one
    /// Python file of the repository that does. The file, its text and the `def` line, or the
    /// observation saying why there is no single such place.
    fn function_site(
        &self,
        raw: Option<&str>,
        name: &str,
    ) -> std::result::Result<(String, String, usize), ToolOutput> {
        let how = "Name its file on the line before the code block (e.g. `pkg/module.py:`), or use \
                   `edit PATH` with a SEARCH/REPLACE block.";
        if let Some(raw) = raw
            && let Ok(path) = Self::resolve(raw)
            && !path.is_empty()
            && let Ok(text) = self.read_text(&path)
        {
            match Self::definitions(&text, name).as_slice() {
                [] => {}
                [line] => return Ok((path, text.clone(), *line)),
                many => {
                    let lines: Vec<String> = many.iter().map(|l| (l + 1).to_string()).collect();
                    return Err(ToolOutput::error(format!(
                        "No replacement was performed: `{name}` is defined {} times in {path} \
                         (lines {}). Use `edit {path}` with a SEARCH/REPLACE block to change \
                         one of them.",
                        many.len(),
                        lines.join(", ")
                    )));
                }
            }
        }
        let mut found = Vec::new();
        for file in self.walk("").into_iter().filter(|f| f.ends_with(".py")) {
            if self
                .dir
                .metadata(&file)
                .is_ok_and(|m| m.len() > MAX_SEARCH_FILE_BYTES)
            {
                continue;
            }
            let Ok(text) = self.read_text(&file) else {
                continue;
            };
            for line in Self::definitions(&text, name) {
                found.push((file.clone(), text.clone(), line));
            }
        }
        match found.len() {
            0 => Err(ToolOutput::error(format!(
                "No replacement was performed: no function `{name}` is defined in the \
                 repository. Check the name (`search \"def {name}\"`), or use `edit PATH` with \
                 a SEARCH/REPLACE block."
            ))),
            1 => Ok(found.remove(0)),
            _ => {
                let places: Vec<String> = found
                    .iter()
                    .map(|(file, _, line)| format!("{file}:{}", line + 1))
                    .collect();
                Err(ToolOutput::error(format!(
                    "No replacement was performed: `{name}` is defined in {} places ({}). {how}",
                    found.len(),
                    places.join(", ")
                )))
            }
        }
    }

    fn replace_function(&mut self, raw: Option<&str>, name: &str, source: &str) -> ToolOutput {
        let (path, text, start) = match self.function_site(raw, name) {
            Ok(site) => site,
            Err(e) => return e,
        };
        let lines: Vec<&str> = text.lines().collect();
        let end = function_end(&lines, start);
        // The new definition takes the old one's indentation (a method stays in its class).
        let prefix: String = lines[start].chars().take(indent_of(lines[start])).collect();
        let new_lines: Vec<&str> = source.lines().collect();
        let base = new_lines.first().map_or(0, |l| indent_of(l));
        let mut new = String::with_capacity(text.len() + source.len());
        for line in &lines[..start] {
            new.push_str(line);
            new.push('\n');
        }
        for line in dedent(&new_lines, base).lines() {
            if !line.is_empty() {
                new.push_str(&prefix);
            }
            new.push_str(line);
            new.push('\n');
        }
        for line in &lines[end..] {
            new.push_str(line);
            new.push('\n');
        }
        if !text.ends_with('\n') && !lines[end..].is_empty() {
            new.pop();
        }
        if new == text {
            return ToolOutput::error(format!(
                "No change: the function `{name}` you wrote is identical to the one in {path}."
            ));
        }
        if let Some(err) = self.write(&path, new.as_bytes(), Some(text.clone().into_bytes())) {
            return err;
        }
        let first = start + 1;
        let last = start + new_lines.len().max(1);
        ToolOutput::ok(format!(
            "Replaced function `{name}` in {path} (it was lines {first}-{end}). Lines {}-{} now \
             read:\n{}",
            first.saturating_sub(2).max(1),
            (last + 2).min(new.lines().count()),
            Self::excerpt(&new, first, last)
        ))
    }

    fn create(&mut self, raw: &str, content: &str) -> ToolOutput {
        let path = match Self::file_path(raw, "create") {
            Ok(p) => p,
            Err(e) => return e,
        };
        match self.dir.symlink_metadata(&path) {
            Ok(m) if m.is_dir() => {
                return ToolOutput::error(format!("{path} is a directory."));
            }
            Ok(_) => {
                return ToolOutput::error(format!("{path} already exists; use edit to change it."));
            }
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            Err(e) => return self.io_error(&path, e),
        }
        if let Some(err) = self.write(&path, content.as_bytes(), None) {
            return err;
        }
        ToolOutput::ok(format!(
            "Created {path} ({} lines).",
            content.lines().count()
        ))
    }

    fn insert(&mut self, raw: &str, line: usize, text: &str) -> ToolOutput {
        let (path, old) = match self.file_and_text(raw, "insert") {
            Ok(found) => found,
            Err(e) => return e,
        };
        let total = old.lines().count();
        if line > total {
            return ToolOutput::error(format!(
                "{path} has {total} lines; insert after a line between 0 (top) and {total}."
            ));
        }
        let mut block = text.to_string();
        if !block.ends_with('\n') {
            block.push('\n');
        }
        let mut new = String::with_capacity(old.len() + block.len() + 1);
        let mut inserted = line == 0;
        if inserted {
            new.push_str(&block);
        }
        for (i, l) in old.split_inclusive('\n').enumerate() {
            new.push_str(l);
            if i + 1 == line {
                if !l.ends_with('\n') {
                    new.push('\n');
                }
                new.push_str(&block);
                inserted = true;
            }
        }
        if !inserted {
            new.push_str(&block);
        }
        if let Some(err) = self.write(&path, new.as_bytes(), Some(old.into_bytes())) {
            return err;
        }
        let first = line + 1;
        let last = line + block.lines().count();
        ToolOutput::ok(format!(
            "Inserted {} lines into {path}:\n{}",
            block.lines().count(),
            Self::excerpt(&new, first, last)
        ))
    }

    fn undo(&mut self) -> ToolOutput {
        let Some(entry) = self.undo.pop() else {
            return ToolOutput::error("Nothing to undo.");
        };
        self.written.insert(entry.path.clone());
        let result = match &entry.before {
            Some(bytes) => self.dir.write(&entry.path, bytes),
            None => self.dir.remove_file(&entry.path),
        };
        match result {
            Ok(()) => ToolOutput::ok(match entry.before {
                Some(_) => format!("Reverted the last change to {}.", entry.path),
                None => format!("Removed {}, which the last command created.", entry.path),
            }),
            Err(e) => self.io_error(&entry.path, e),
        }
    }
}

/// The 1-based line range where `search` matches `text` line by line once surrounding
/// whitespace is ignored.
fn whitespace_insensitive_match(text: &str, search: &str) -> Option<(usize, usize)> {
    let wanted: Vec<&str> = search.lines().map(str::trim).collect();
    if wanted.iter().all(|l| l.is_empty()) {
        return None;
    }
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    (0..lines.len().saturating_sub(wanted.len() - 1))
        .find(|&i| lines[i..i + wanted.len()] == wanted[..])
        .map(|i| (i + 1, i + wanted.len()))
}

#[cfg(test)]
mod tests;
