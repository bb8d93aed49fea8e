//! Where `toolhost stats` reads from: files, folders walked for `.jsonl` files, and standard input
//! (`-`); each read as a stream, a line at a time, so memory does not grow with a log's size or the
//! number of logs, and the logs shared out between threads. A file that cannot be opened, or fails
//! part-way, is noted and the rest read on.

use std::io::Read;
use std::path::{Path, PathBuf};

use super::line::{self, Skip};
use super::tally::Tally;

/// The read buffer of one log (grown for a longer line).
const BUFFER: usize = 256 * 1024;

/// The longest line read. A log line is one entry; a longer line is no log's (`stats` named a file
/// that is not a log, or one cut mid-write and appended to), so it is skipped as `too_long`
/// rather than held whole in memory.
const MAX_LINE: usize = 64 << 20;

/// The log files `path` names: itself, or for a folder every `.jsonl` file below it, in path order
/// (hidden and ignored files included: logs are often kept where version control ignores them);
/// a part of the folder that cannot be walked is an `Err` of its name and why.
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

/// Reads one log, `name` for the report when it cannot be read to its end. Lines are found in
/// `buffer` (grown to at least 256 KiB; one buffer serves log after log) and read where they lie;
/// only a line that runs past the buffer's end is moved, and the buffer grown for a line longer
/// than it.
pub fn read_log(tally: &mut Tally, name: &str, mut reader: impl Read, buffer: &mut Vec<u8>) {
    tally.logs += 1;
    if buffer.len() < BUFFER {
        buffer.resize(BUFFER, 0);
    }
    // Bytes held: `start..end` is what is not read yet.
    let (mut start, mut end) = (0, 0);
    // Inside a line past `MAX_LINE`, dropped up to its newline.
    let mut skipping = false;
    loop {
        if end == buffer.len() {
            if start == 0 && buffer.len() >= MAX_LINE {
                if !skipping {
                    tally.skip(Skip::TooLong);
                    skipping = true;
                }
                (start, end) = (0, 0);
            } else if start == 0 {
                buffer.resize(buffer.len() * 2, 0);
            } else {
                buffer.copy_within(start..end, 0);
                (start, end) = (0, end - start);
            }
        }
        let read = match reader.read(&mut buffer[end..]) {
            Ok(read) => read,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                tally.unreadable.push((name.to_string(), format!("reading stopped: {e}")));
                0
            }
        };
        if read == 0 {
            if start < end && !skipping {
                line(tally, &buffer[start..end], true);
            }
            break;
        }
        let scanned = end;
        end += read;
        let mut from = start;
        for newline in memchr::memchr_iter(b'\n', &buffer[scanned..end]) {
            let at = scanned + newline;
            if skipping {
                skipping = false;
            } else {
                line(tally, &buffer[from..at], false);
            }
            from = at + 1;
        }
        start = from;
    }
    tally.finish();
}

/// Counts one line (its newline left out); `cut` says it is the last and had none.
fn line(tally: &mut Tally, bytes: &[u8], cut: bool) {
    let mut text = bytes;
    while let [rest @ .., b'\r'] = text {
        text = rest;
    }
    if text.iter().all(u8::is_ascii_whitespace) {
        return;
    }
    match line::read(text, cut) {
        Ok(line) => tally.add(line),
        Err(why) => tally.skip(why),
    }
}

/// One thing to read, in the order the report counts them.
#[derive(Debug, Clone)]
pub enum Source {
    /// A log file, with its size.
    File(PathBuf, u64),
    /// Standard input.
    Stdin,
    /// A path that cannot be read, and why.
    Unreadable(String, String),
}

/// What `paths` name, in order: `-` is standard input, a folder its `.jsonl` files.
pub fn sources<P: AsRef<Path>>(paths: &[P]) -> Vec<Source> {
    let mut out = Vec::new();
    for path in paths {
        let path = path.as_ref();
        if path == Path::new("-") {
            out.push(Source::Stdin);
            continue;
        }
        if !path.exists() {
            out.push(Source::Unreadable(path.display().to_string(), "no such file or folder".to_string()));
            continue;
        }
        for log in logs_in(path) {
            out.push(match log {
                Ok(file) => {
                    let size = file.metadata().map_or(0, |m| m.len());
                    Source::File(file, size)
                }
                Err((name, error)) => Source::Unreadable(name, error),
            });
        }
    }
    out
}

/// Reads one source into `tally`, with `buffer` for [`read_log`].
pub fn read_source(tally: &mut Tally, source: &Source, buffer: &mut Vec<u8>) {
    match source {
        Source::Stdin => read_log(tally, "-", std::io::stdin().lock(), buffer),
        Source::File(file, _) => match std::fs::File::open(file) {
            Ok(opened) => read_log(tally, &file.display().to_string(), opened, buffer),
            Err(e) => tally.unreadable.push((file.display().to_string(), e.to_string())),
        },
        Source::Unreadable(name, error) => tally.unreadable.push((name.clone(), error.clone())),
    }
}

/// Reads every source, on up to `threads` threads: the sources are cut into that many runs of
/// about equal bytes, each run is read on a thread of its own, and the counts are merged in the
/// sources' order, so the report is the one a single thread would make.
pub fn read_all(sources: &[Source], threads: usize) -> Tally {
    let size = |s: &Source| match s {
        Source::File(_, size) => *size,
        _ => 0,
    };
    let total: u64 = sources.iter().map(size).sum();
    let threads = threads.clamp(1, sources.len().max(1));
    let mut runs: Vec<&[Source]> = Vec::with_capacity(threads);
    let (mut start, mut read) = (0, 0);
    for (i, source) in sources.iter().enumerate() {
        read += size(source);
        let due = total * (runs.len() as u64 + 1) / threads as u64;
        if read >= due && runs.len() + 1 < threads {
            runs.push(&sources[start..=i]);
            start = i + 1;
        }
    }
    runs.push(&sources[start..]);
    let read_run = |run: &[Source]| {
        let (mut tally, mut buffer) = (Tally::new(), Vec::new());
        for source in run {
            read_source(&mut tally, source, &mut buffer);
        }
        tally
    };
    if runs.len() == 1 {
        return read_run(runs[0]);
    }
    let tallies: Vec<Tally> = std::thread::scope(|scope| {
        let handles: Vec<_> = runs.iter().map(|run| scope.spawn(move || read_run(run))).collect();
        // A thread that panicked has no counts to give; the others' still count, and the report
        // says which logs went uncounted.
        let joined = handles.into_iter().zip(&runs).map(|(handle, run)| {
            handle.join().unwrap_or_else(|_| {
                let mut lost = Tally::new();
                for source in run.iter() {
                    let name = match source {
                        Source::Stdin => "-".to_string(),
                        Source::File(file, _) => file.display().to_string(),
                        Source::Unreadable(name, _) => name.clone(),
                    };
                    lost.unreadable.push((name, "not counted: the thread reading it failed".to_string()));
                }
                lost
            })
        });
        joined.collect()
    });
    let mut merged = Tally::new();
    for tally in tallies {
        merged.merge(tally);
    }
    merged
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_longer_than_any_entry_is_skipped_and_the_lines_after_it_still_count() {
        let log = r#"{"type":"end","reason":"answered","turns":1}"#;
        let long = std::io::repeat(b'x').take(MAX_LINE as u64 + 1);
        let after = format!("\n{log}\n").into_bytes();
        let reader = long.chain(after.as_slice());
        let (mut tally, mut buffer) = (Tally::new(), Vec::new());
        read_log(&mut tally, "long.jsonl", reader, &mut buffer);
        assert_eq!(tally.skipped.get(&Skip::TooLong), Some(&1));
        assert_eq!(tally.lines, 2);
        assert!(buffer.len() <= MAX_LINE, "the buffer grew to {} bytes", buffer.len());
    }
}
