//! Where `toolhost stats` reads from: files, folders walked for `.jsonl` files, and standard input
//! (`-`); each read as a stream, a line at a time, so memory does not grow with a log's size or the
//! number of logs. A file that cannot be opened, or fails part-way, is noted and the rest read on.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use super::line;
use super::tally::Tally;

/// The read buffer of one log.
const BUFFER: usize = 256 * 1024;

/// The log files `path` names: itself, or for a folder every `.jsonl` file below it, in path order
/// (hidden and ignored files included: logs are often kept where version control ignores them).
///
/// # Errors
/// The folder cannot be walked (the message names the entry).
pub fn logs_in(path: &Path) -> Vec<Result<PathBuf, (String, String)>> {
    if !path.is_dir() {
        return vec![Ok(path.to_path_buf())];
    }
    let walk = ignore::WalkBuilder::new(path).standard_filters(false).sort_by_file_path(|a, b| a.cmp(b)).build();
    walk.filter_map(|entry| match entry {
        Ok(entry) => {
            let file = entry.file_type().is_some_and(|t| t.is_file());
            let jsonl = entry.path().extension().is_some_and(|e| e == "jsonl");
            (file && jsonl).then(|| Ok(entry.into_path()))
        }
        Err(e) => Some(Err((path.display().to_string(), e.to_string()))),
    })
    .collect()
}

/// Reads one log, `name` for the report when it cannot be read to its end.
pub fn read_log(tally: &mut Tally, name: &str, reader: impl std::io::Read) {
    tally.logs += 1;
    let mut reader = BufReader::with_capacity(BUFFER, reader);
    let mut buffer = Vec::new();
    loop {
        buffer.clear();
        match reader.read_until(b'\n', &mut buffer) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => {
                tally.unreadable.push((name.to_string(), format!("reading stopped: {e}")));
                break;
            }
        }
        let cut = buffer.last() != Some(&b'\n');
        let mut text = buffer.as_slice();
        while let [rest @ .., b'\n' | b'\r'] = text {
            text = rest;
        }
        if text.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match line::read(text, cut) {
            Ok(line) => tally.add(line),
            Err(why) => tally.skip(why),
        }
    }
    tally.finish();
}

/// Reads every log `path` names (`-`: standard input).
pub fn read_path(tally: &mut Tally, path: &Path) {
    if path == Path::new("-") {
        read_log(tally, "-", std::io::stdin().lock());
        return;
    }
    if !path.exists() {
        tally.unreadable.push((path.display().to_string(), "no such file or folder".to_string()));
        return;
    }
    for log in logs_in(path) {
        match log {
            Ok(file) => match std::fs::File::open(&file) {
                Ok(opened) => read_log(tally, &file.display().to_string(), opened),
                Err(e) => tally.unreadable.push((file.display().to_string(), e.to_string())),
            },
            Err(unwalkable) => tally.unreadable.push(unwalkable),
        }
    }
}
