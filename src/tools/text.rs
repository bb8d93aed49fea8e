//! Small text helpers the built-in tools share: thousands separators, cutting long lines, and
//! reading a line without holding more of it than will be shown.

use std::io::{self, BufRead};

use memchr::{memchr, memchr_iter};

/// `4880` -> `4,880`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Cuts `line` to at most `max` characters, saying how many bytes were left out.
pub fn cut_line(line: &str, max: usize) -> String {
    cut_line_beyond(line, max, 0)
}

/// [`cut_line`] for a line of which `unread` more bytes were never read.
pub fn cut_line_beyond(line: &str, max: usize, unread: u64) -> String {
    let cut = line.char_indices().nth(max).map_or(line.len(), |(i, _)| i);
    let omitted = (line.len() - cut) as u64 + unread;
    if omitted == 0 {
        return line.to_string();
    }
    format!("{} [... {} more bytes]", &line[..cut], thousands(omitted))
}

/// Reads one line (without its `\n` or `\r\n`), keeping at most `keep` bytes of it and skipping the
/// rest without storing it, so a gigabyte-long line costs no memory. Returns the kept text, how
/// many bytes were skipped, and `false` at end of input.
pub fn read_line_capped(reader: &mut impl BufRead, keep: usize, out: &mut Vec<u8>) -> io::Result<(bool, u64)> {
    out.clear();
    let mut skipped = 0u64;
    let mut read_any = false;
    loop {
        let buf = reader.fill_buf()?;
        if buf.is_empty() {
            break;
        }
        read_any = true;
        let (chunk, done) = match memchr(b'\n', buf) {
            Some(i) => (&buf[..i], Some(i + 1)),
            None => (buf, None),
        };
        let room = keep.saturating_sub(out.len());
        let take = room.min(chunk.len());
        out.extend_from_slice(&chunk[..take]);
        skipped += (chunk.len() - take) as u64;
        let used = done.unwrap_or(buf.len());
        reader.consume(used);
        if done.is_some() {
            break;
        }
    }
    if out.last() == Some(&b'\r') && skipped == 0 {
        out.pop();
    }
    Ok((read_any, skipped))
}

/// Skips `n` lines (each ended by `\n`; the last may have none) without keeping them, scanning the
/// reader's buffer for newlines with SIMD; returns how many lines there were, fewer than `n` when
/// the input ends first.
pub fn skip_lines(reader: &mut impl BufRead, n: u64) -> io::Result<u64> {
    let mut skipped = 0u64;
    // Whether bytes of a line not yet ended were consumed.
    let mut partial = false;
    while skipped < n {
        let buf = reader.fill_buf()?;
        if buf.is_empty() {
            return Ok(skipped + u64::from(partial));
        }
        let want = n - skipped;
        // Most buffers end before the line wanted: counting their newlines in bulk is several
        // times faster than visiting each.
        let in_buffer = memchr_iter(b'\n', buf).count() as u64;
        let (found, used) = if in_buffer < want {
            (in_buffer, buf.len())
        } else {
            let at = memchr_iter(b'\n', buf).nth((want - 1) as usize).map_or(buf.len(), |at| at + 1);
            (want, at)
        };
        partial = if found == want {
            false
        } else if found > 0 {
            buf[used - 1] != b'\n'
        } else {
            true
        };
        skipped += found;
        reader.consume(used);
    }
    Ok(skipped)
}

/// Counts the newlines left in `reader`, reading at most `budget` bytes. `None` when the budget ran
/// out first.
pub fn count_lines_within(reader: &mut impl BufRead, budget: u64) -> io::Result<Option<(u64, bool)>> {
    let mut lines = 0u64;
    let mut read = 0u64;
    let mut last = b'\n';
    loop {
        let buf = reader.fill_buf()?;
        if buf.is_empty() {
            // A last line without a newline still counts.
            let unterminated = last != b'\n';
            return Ok(Some((lines + unterminated as u64, read > 0)));
        }
        if read + buf.len() as u64 > budget {
            return Ok(None);
        }
        lines += memchr_iter(b'\n', buf).count() as u64;
        last = buf[buf.len() - 1];
        read += buf.len() as u64;
        let n = buf.len();
        reader.consume(n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_groups_digits() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(4880), "4,880");
        assert_eq!(thousands(1234567), "1,234,567");
    }

    #[test]
    fn skipping_lines_counts_a_last_line_without_a_newline_and_stops_where_asked() {
        for (text, n, skipped, rest) in [
            ("a\nb\nc\n", 2, 2, "c\n"),
            ("a\nb\nc", 5, 3, ""),
            ("a\nb\n", 5, 2, ""),
            ("", 1, 0, ""),
            ("abc", 1, 1, ""),
            ("\n\n\nx", 3, 3, "x"),
        ] {
            // A small buffer makes lines span several fills; a large one holds the line wanted
            // and others after it.
            for capacity in [2, 3, 64] {
                let mut input = io::BufReader::with_capacity(capacity, io::Cursor::new(text.as_bytes().to_vec()));
                assert_eq!(skip_lines(&mut input, n).unwrap(), skipped, "{text:?}");
                let mut left = String::new();
                io::Read::read_to_string(&mut input, &mut left).unwrap();
                assert_eq!(left, rest, "{text:?} in buffers of {capacity}");
            }
        }
    }

    #[test]
    fn capped_lines_keep_the_head_and_count_the_rest() {
        let mut input = io::Cursor::new(b"abcdef\r\nxy\nlast".to_vec());
        let mut buf = Vec::new();
        assert_eq!(read_line_capped(&mut input, 3, &mut buf).unwrap(), (true, 4));
        assert_eq!(buf, b"abc");
        assert_eq!(read_line_capped(&mut input, 3, &mut buf).unwrap(), (true, 0));
        assert_eq!(buf, b"xy");
        assert_eq!(read_line_capped(&mut input, 10, &mut buf).unwrap(), (true, 0));
        assert_eq!(buf, b"last");
        assert!(!read_line_capped(&mut input, 10, &mut buf).unwrap().0);
    }
}
