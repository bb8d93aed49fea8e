//! Posting lists: for each trigram, the increasing ids of the files that hold it, stored as varint
//! deltas in one byte arena (ids of a common trigram are dense, so most deltas take one byte). It
//! owns the encoding and its building and merging, not what the ids mean.

use std::collections::HashMap;

use super::plan::Trigram;

/// Frozen posting lists, looked up by binary search on the sorted trigrams.
#[derive(Debug, Default)]
pub(crate) struct Postings {
    trigrams: Vec<Trigram>,
    /// Where each trigram's list ends in `bytes` (it starts where the previous one ends).
    ends: Vec<u32>,
    bytes: Vec<u8>,
}

impl Postings {
    /// The encoded list of `trigram`; empty when no file holds it.
    pub(crate) fn list(&self, trigram: Trigram) -> &[u8] {
        let Ok(i) = self.trigrams.binary_search(&trigram) else { return &[] };
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        &self.bytes[start..self.ends[i] as usize]
    }

    /// Heap memory held.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.trigrams.capacity() * 4 + self.ends.capacity() * 4 + self.bytes.capacity()
    }

    fn lists(&self) -> impl Iterator<Item = (Trigram, &[u8])> + '_ {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        self.trigrams
            .iter()
            .zip(starts.zip(self.ends.iter()))
            .map(|(t, (s, e))| (*t, &self.bytes[s as usize..*e as usize]))
    }

    /// The lists with only the ids `keep` accepts, plus `added` (trigram, id) pairs, sorted, whose
    /// ids are all above every id already here. `None` when the arena would outgrow `u32` offsets.
    pub(crate) fn rebuilt(&self, keep: impl Fn(u32) -> bool, added: &[(Trigram, u32)]) -> Option<Postings> {
        let mut out = Writer::default();
        let mut ids = Vec::new();
        let mut next = 0;
        // Lists only `added` has, for trigrams below `bound`.
        let added_only = |out: &mut Writer, next: &mut usize, bound: Option<Trigram>| -> Option<()> {
            while let Some(&(t, _)) = added.get(*next).filter(|(t, _)| bound.is_none_or(|b| *t < b)) {
                let run: Vec<u32> = added[*next..].iter().take_while(|(t2, _)| *t2 == t).map(|(_, id)| *id).collect();
                *next += run.len();
                out.list(t, &run)?;
            }
            Some(())
        };
        for (trigram, list) in self.lists() {
            added_only(&mut out, &mut next, Some(trigram))?;
            ids.clear();
            ids.extend(decode(list).filter(|&id| keep(id)));
            while let Some(&(_, id)) = added.get(next).filter(|(t, _)| *t == trigram) {
                ids.push(id);
                next += 1;
            }
            if !ids.is_empty() {
                out.list(trigram, &ids)?;
            }
        }
        added_only(&mut out, &mut next, None)?;
        Some(out.finish())
    }
}

/// The ids of an encoded list, in increasing order.
pub(crate) fn decode(bytes: &[u8]) -> impl Iterator<Item = u32> + '_ {
    let mut pos = 0;
    let mut id = 0u32;
    std::iter::from_fn(move || {
        let delta = read_varint(bytes, &mut pos)?;
        id = id.wrapping_add(delta);
        Some(id)
    })
}

fn push_varint(out: &mut Vec<u8>, mut value: u32) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

fn read_varint(bytes: &[u8], pos: &mut usize) -> Option<u32> {
    let mut value = 0u32;
    let mut shift = 0;
    loop {
        let byte = *bytes.get(*pos)?;
        *pos += 1;
        value |= u32::from(byte & 0x7f).checked_shl(shift)?;
        if byte < 0x80 {
            return Some(value);
        }
        shift += 7;
    }
}

/// Appends whole lists in increasing trigram order.
#[derive(Default)]
struct Writer {
    postings: Postings,
}

impl Writer {
    fn list(&mut self, trigram: Trigram, ids: &[u32]) -> Option<()> {
        let mut previous = 0;
        for &id in ids {
            push_varint(&mut self.postings.bytes, id - previous);
            previous = id;
        }
        self.end(trigram)
    }

    fn end(&mut self, trigram: Trigram) -> Option<()> {
        self.postings.trigrams.push(trigram);
        self.postings.ends.push(u32::try_from(self.postings.bytes.len()).ok()?);
        Some(())
    }

    fn finish(mut self) -> Postings {
        self.postings.trigrams.shrink_to_fit();
        self.postings.ends.shrink_to_fit();
        self.postings.bytes.shrink_to_fit();
        self.postings
    }
}

/// One trigram's list while files are added.
struct Open {
    trigram: Trigram,
    bytes: Vec<u8>,
    last: u32,
}

/// Posting lists being built from files added in increasing id order. Trigrams of seven-bit bytes
/// (nearly all of source code's) find their list through a direct table rather than a hash.
pub(crate) struct Builder {
    /// For each seven-bit trigram, its slot in `lists` plus one (zero: none yet).
    ascii: Vec<u32>,
    other: HashMap<Trigram, u32>,
    lists: Vec<Open>,
}

impl Default for Builder {
    fn default() -> Self {
        Builder { ascii: vec![0; 1 << 21], other: HashMap::new(), lists: Vec::new() }
    }
}

impl Builder {
    /// Records that file `id` holds `trigram`. Ids never decrease from call to call, and one
    /// (id, trigram) pair is given once.
    pub(crate) fn add(&mut self, id: u32, trigram: Trigram) {
        let slot = if trigram & 0x0080_8080 == 0 {
            let key = (((trigram >> 16) & 0x7f) << 14 | ((trigram >> 8) & 0x7f) << 7 | (trigram & 0x7f)) as usize;
            &mut self.ascii[key]
        } else {
            self.other.entry(trigram).or_insert(0)
        };
        if *slot == 0 {
            self.lists.push(Open { trigram, bytes: Vec::new(), last: 0 });
            *slot = self.lists.len() as u32;
        }
        let open = &mut self.lists[*slot as usize - 1];
        let delta = if open.bytes.is_empty() { id } else { id - open.last };
        push_varint(&mut open.bytes, delta);
        open.last = id;
    }

    /// Joins builders whose id ranges are disjoint and increasing in the order given. `None` when
    /// the arena would outgrow `u32` offsets.
    pub(crate) fn merge(parts: Vec<Builder>) -> Option<Postings> {
        let mut all: Vec<(Trigram, usize, Open)> = Vec::new();
        for (part, builder) in parts.into_iter().enumerate() {
            all.extend(builder.lists.into_iter().map(|open| (open.trigram, part, open)));
        }
        all.sort_unstable_by_key(|(trigram, part, _)| (*trigram, *part));
        let mut out = Writer::default();
        out.postings.bytes.reserve(all.iter().map(|(_, _, open)| open.bytes.len()).sum());
        let mut current: Option<(Trigram, u32)> = None;
        for (trigram, _, open) in all {
            match current {
                Some((t, last)) if t == trigram => {
                    // The first id of a later part was written as is: rewrite it as a delta.
                    let mut pos = 0;
                    let first = read_varint(&open.bytes, &mut pos)?;
                    push_varint(&mut out.postings.bytes, first.checked_sub(last)?);
                    out.postings.bytes.extend_from_slice(&open.bytes[pos..]);
                    *out.postings.ends.last_mut()? = u32::try_from(out.postings.bytes.len()).ok()?;
                }
                _ => {
                    out.postings.bytes.extend_from_slice(&open.bytes);
                    out.end(trigram)?;
                }
            }
            current = Some((trigram, open.last));
        }
        Some(out.finish())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merged_parts_and_rebuilds_keep_every_id_in_order() {
        let mut a = Builder::default();
        let mut b = Builder::default();
        for id in 0..300u32 {
            let part = if id < 150 { &mut a } else { &mut b };
            part.add(id, 0x616263);
            if id % 7 == 0 {
                part.add(id, 0xff_00_01);
            }
        }
        let postings = Builder::merge(vec![a, b]).unwrap();
        assert_eq!(decode(postings.list(0x616263)).collect::<Vec<_>>(), (0..300).collect::<Vec<_>>());
        assert_eq!(decode(postings.list(0xff_00_01)).collect::<Vec<_>>(), (0..300).step_by(7).collect::<Vec<_>>());
        assert!(postings.list(0x010203).is_empty());
        let rebuilt = postings.rebuilt(|id| id % 2 == 0, &[(0x000001, 400), (0x616263, 301), (0xffffff, 302)]).unwrap();
        let evens: Vec<u32> = (0..300).step_by(2).chain([301]).collect();
        assert_eq!(decode(rebuilt.list(0x616263)).collect::<Vec<_>>(), evens);
        assert_eq!(decode(rebuilt.list(0x000001)).collect::<Vec<_>>(), vec![400]);
        assert_eq!(decode(rebuilt.list(0xffffff)).collect::<Vec<_>>(), vec![302]);
        assert_eq!(decode(rebuilt.list(0xff_00_01)).collect::<Vec<_>>(), (0..300).step_by(14).collect::<Vec<_>>());
    }
}
