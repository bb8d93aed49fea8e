//! Project instructions: the user's own `AGENTS.md` (in toolhost's config folder) and the one at
//! the workspace root, put after the system prompt so the model follows a project's conventions
//! as Codex and Claude Code users expect, each capped, with a note of what was included for the
//! session log.
//!
//! The workspace's file is read as the file tools read: beneath the root, through no symlink that
//! leads out of it, regular files only. A checkout cannot make the agent send the model a file
//! from outside it (an `AGENTS.md` linked to a key file is refused, not read).

use std::io::Read;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::workspace::Workspace;

/// The most of one instructions file the system prompt takes, in bytes (cut at a character
/// boundary, with a note saying so). Codex keeps 32 KiB of a project's doc too.
pub const MAX_INSTRUCTIONS_BYTES: usize = 32 * 1024;

/// The instructions file's name, at the workspace root and in the user's config folder.
pub const INSTRUCTIONS_FILE: &str = "AGENTS.md";

/// What one instructions file gave, as the session log notes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Included {
    /// Where it was read: `AGENTS.md` for the workspace's, the full path for the user's.
    pub path: String,
    /// Its size.
    pub bytes: u64,
    /// How many of its bytes went into the system prompt (less than `bytes` when cut).
    pub included: u64,
}

/// The instructions found, ready to go after the system prompt.
#[derive(Debug, Clone, Default)]
pub struct Instructions {
    /// The text for the system prompt, empty when no file was found.
    pub text: String,
    /// Each file included, in the order the text has them.
    pub files: Vec<Included>,
    /// Files that exist but were not read, and why (for a warning).
    pub problems: Vec<String>,
}

/// Reads the user's instructions (`user_dir`/AGENTS.md, when `user_dir` is given) and then the
/// workspace's (`AGENTS.md` at its root). Missing files are not a problem; unreadable ones are
/// noted in [`Instructions::problems`] and left out.
pub fn gather(workspace: &Workspace, user_dir: Option<&Path>) -> Instructions {
    let mut found = Instructions::default();
    if let Some(dir) = user_dir {
        let path = dir.join(INSTRUCTIONS_FILE);
        if path.exists() {
            let read = crate::source::read_bytes(&path, READ_CAP)
                .map_err(|e| format!("{}: {e}", path.display()))
                .map(|bytes| (bytes.len() as u64, bytes));
            found.add(path.display().to_string(), "your own instructions", read);
        }
    }
    let real = workspace.root().join(INSTRUCTIONS_FILE);
    if std::fs::symlink_metadata(&real).is_ok() {
        found.add(INSTRUCTIONS_FILE.to_string(), "the project's instructions", read_in_workspace(workspace));
    }
    found
}

/// Files past this are not read at all: an instructions file that large is not one.
const READ_CAP: u64 = 1 << 20;

/// The workspace's `AGENTS.md`, read as `fs-read` would read it, and its size.
fn read_in_workspace(workspace: &Workspace) -> Result<(u64, Vec<u8>), String> {
    let real = workspace.resolve(INSTRUCTIONS_FILE).map_err(|e| e.message().to_string())?;
    let (file, meta) = crate::tools::file::open_regular(workspace, &real, INSTRUCTIONS_FILE, || {
        format!("{INSTRUCTIONS_FILE} is gone")
    })
    .map_err(|e| e.message().to_string())?;
    let mut bytes = Vec::new();
    file.take(MAX_INSTRUCTIONS_BYTES as u64 + 4)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read {INSTRUCTIONS_FILE}: {e}"))?;
    Ok((meta.len(), bytes))
}

impl Instructions {
    fn add(&mut self, path: String, whose: &str, read: Result<(u64, Vec<u8>), String>) {
        let (size, bytes) = match read {
            Ok(read) => read,
            Err(why) => {
                self.problems.push(format!("{path} is not included in the system prompt: {why}"));
                return;
            }
        };
        // Cut at the cap, then back to the last whole character.
        let text = String::from_utf8_lossy(&bytes[..bytes.len().min(MAX_INSTRUCTIONS_BYTES)]).into_owned();
        let text = text.trim_end_matches('\u{FFFD}');
        let included = text.len() as u64;
        if !self.text.is_empty() {
            self.text.push_str("\n\n");
        }
        self.text.push_str(&format!("# {whose} ({path})\n\n{}", text.trim_end()));
        if included < size {
            self.text.push_str(&format!(
                "\n\n[{path} is {size} bytes; only its first {included} are included here. Read the rest with the \
                 file tools if you need it.]"
            ));
        }
        self.files.push(Included { path, bytes: size, included });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_file_is_cut_at_a_character_boundary_with_a_note() {
        let dir = tempfile::tempdir().unwrap();
        let text = "é".repeat(MAX_INSTRUCTIONS_BYTES);
        std::fs::write(dir.path().join(INSTRUCTIONS_FILE), &text).unwrap();
        let found = gather(&Workspace::new(dir.path()).unwrap(), None);
        let included = found.files[0].included as usize;
        assert!(included <= MAX_INSTRUCTIONS_BYTES && included % 2 == 0, "{included}");
        assert_eq!(found.files[0].bytes, text.len() as u64);
        assert!(found.text.contains(&format!("only its first {included} are included")), "{}", &found.text[..80]);
        assert!(!found.text.contains('\u{FFFD}'));
    }

    #[test]
    fn no_file_no_text() {
        let dir = tempfile::tempdir().unwrap();
        let found = gather(&Workspace::new(dir.path()).unwrap(), Some(dir.path()));
        assert!(found.text.is_empty() && found.files.is_empty() && found.problems.is_empty());
    }
}
