//! From a regular expression to a boolean query over trigrams that every file holding a match must
//! satisfy: Russ Cox's analysis for Google Code Search ("Regular Expression Matching with a
//! Trigram Index"), on `regex_syntax`'s HIR. It owns only the query; which files satisfy it is the
//! postings' business, and whether a file really matches is always the searcher's.
//!
//! Every step may only *weaken* the query (admit more strings than the pattern can match): sets
//! that grow too large are cut back to shorter prefixes or suffixes, big classes become "any
//! character", anything not understood becomes [`Query::All`]. A weaker query costs verification
//! time, never a missed file.

use std::collections::BTreeSet;

use regex_syntax::hir::{Class, Hir, HirKind};

/// Three bytes packed as `b0 << 16 | b1 << 8 | b2`.
pub(crate) type Trigram = u32;

/// Exact sets above this many strings are folded into the query; 7 keeps three case-insensitive
/// letters (2^3 = 8 variants) from being enumerated as whole strings.
const MAX_EXACT: usize = 7;
/// Prefix and suffix sets above this many strings are cut to shorter strings.
const MAX_SET: usize = 20;
/// A class of more characters than this is taken as "any character".
const MAX_CLASS: usize = 100;
/// Trigram nodes a query may hold; beyond this, parts are dropped (ANDs) or widened to All (ORs).
const MAX_QUERY_NODES: usize = 2000;

/// Which trigrams a file must hold to possibly contain a match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Query {
    /// Every file may match: there is no trigram to require.
    All,
    /// No file can match (an empty class, say).
    Nothing,
    Trigram(Trigram),
    And(Vec<Query>),
    Or(Vec<Query>),
}

impl Query {
    fn and(self, other: Query) -> Query {
        match (self, other) {
            (Query::All, q) | (q, Query::All) => q,
            (Query::Nothing, _) | (_, Query::Nothing) => Query::Nothing,
            (Query::And(mut a), Query::And(b)) => {
                a.extend(b);
                Query::And(a)
            }
            (Query::And(mut a), q) | (q, Query::And(mut a)) => {
                a.push(q);
                Query::And(a)
            }
            (a, b) => Query::And(vec![a, b]),
        }
    }

    fn or(self, other: Query) -> Query {
        match (self, other) {
            (Query::Nothing, q) | (q, Query::Nothing) => q,
            (Query::All, _) | (_, Query::All) => Query::All,
            (Query::Or(mut a), Query::Or(b)) => {
                a.extend(b);
                Query::Or(a)
            }
            (Query::Or(mut a), q) | (q, Query::Or(mut a)) => {
                a.push(q);
                Query::Or(a)
            }
            (a, b) => Query::Or(vec![a, b]),
        }
    }

    /// Whether a file whose trigrams `has` answers for satisfies the query.
    pub(crate) fn matches(&self, has: &impl Fn(Trigram) -> bool) -> bool {
        match self {
            Query::All => true,
            Query::Nothing => false,
            Query::Trigram(t) => has(*t),
            Query::And(parts) => parts.iter().all(|q| q.matches(has)),
            Query::Or(parts) => parts.iter().any(|q| q.matches(has)),
        }
    }

    /// The query with at most `budget` trigram nodes: an AND keeps the parts that fit (fewer
    /// requirements), an OR that does not fit becomes All.
    fn bounded(self, budget: &mut usize) -> Query {
        match self {
            Query::Trigram(t) if *budget > 0 => {
                *budget -= 1;
                Query::Trigram(t)
            }
            Query::Trigram(_) => Query::All,
            Query::And(parts) => parts.into_iter().fold(Query::All, |acc, q| acc.and(q.bounded(budget))),
            Query::Or(parts) => parts.into_iter().fold(Query::Nothing, |acc, q| acc.or(q.bounded(budget))),
            other => other,
        }
    }
}

/// The trigram query for `pattern` as grep-regex reads it; [`Query::All`] when it cannot be
/// parsed here (grep-regex then decides whether it is valid at all).
pub(crate) fn query(pattern: &str) -> Query {
    // grep-regex translates without requiring UTF-8 matches; the rest are the defaults it uses.
    let Ok(hir) = regex_syntax::ParserBuilder::new().utf8(false).build().parse(pattern) else {
        return Query::All;
    };
    let mut info = analyze(&hir);
    info.simplify(true);
    info.add_exact();
    let mut budget = MAX_QUERY_NODES;
    info.matched.bounded(&mut budget)
}

/// The trigrams of `text`, in order, repeats included.
pub(crate) fn trigrams_of(text: &[u8]) -> impl Iterator<Item = Trigram> + '_ {
    text.windows(3).map(|w| (u32::from(w[0]) << 16) | (u32::from(w[1]) << 8) | u32::from(w[2]))
}

type Set = BTreeSet<Vec<u8>>;

/// What is known of the strings a sub-expression matches.
#[derive(Debug, Clone)]
struct Info {
    can_empty: bool,
    /// Every string it matches, when that set is small.
    exact: Option<Set>,
    /// Every match starts with one of these (when `exact` is unknown).
    prefix: Set,
    /// Every match ends with one of these (when `exact` is unknown).
    suffix: Set,
    /// What any match requires of a file.
    matched: Query,
}

fn set_of(strings: impl IntoIterator<Item = Vec<u8>>) -> Set {
    strings.into_iter().collect()
}

fn min_len(set: &Set) -> usize {
    set.iter().map(Vec::len).min().unwrap_or(0)
}

fn cross(x: &Set, y: &Set) -> Set {
    x.iter().flat_map(|a| y.iter().map(move |b| [a.as_slice(), b.as_slice()].concat())).collect()
}

/// The OR over `set`'s strings of the AND of each one's trigrams; nothing to require (All) when
/// one of them is shorter than a trigram.
fn trigram_query(set: &Set) -> Query {
    if set.is_empty() || min_len(set) < 3 {
        return Query::All;
    }
    set.iter().fold(Query::Nothing, |any, s| {
        let all: BTreeSet<Trigram> = trigrams_of(s).collect();
        any.or(all.into_iter().fold(Query::All, |q, t| q.and(Query::Trigram(t))))
    })
}

impl Info {
    fn empty_string() -> Info {
        Info {
            can_empty: true,
            exact: Some(set_of([Vec::new()])),
            prefix: Set::new(),
            suffix: Set::new(),
            matched: Query::All,
        }
    }

    fn any_char() -> Info {
        Info {
            can_empty: false,
            exact: None,
            prefix: set_of([Vec::new()]),
            suffix: set_of([Vec::new()]),
            matched: Query::All,
        }
    }

    fn any_match() -> Info {
        Info { can_empty: true, ..Info::any_char() }
    }

    fn no_match() -> Info {
        Info { can_empty: false, exact: None, prefix: Set::new(), suffix: Set::new(), matched: Query::Nothing }
    }

    fn exact(strings: Set) -> Info {
        Info {
            can_empty: strings.iter().any(Vec::is_empty),
            exact: Some(strings),
            prefix: Set::new(),
            suffix: Set::new(),
            matched: Query::All,
        }
    }

    /// Every match starts with one of these: the exact set when known.
    fn starts(&self) -> &Set {
        self.exact.as_ref().unwrap_or(&self.prefix)
    }

    /// Every match ends with one of these: the exact set when known.
    fn ends(&self) -> &Set {
        self.exact.as_ref().unwrap_or(&self.suffix)
    }

    fn add_exact(&mut self) {
        if let Some(exact) = &self.exact {
            let required = trigram_query(exact);
            self.matched = std::mem::replace(&mut self.matched, Query::All).and(required);
        }
    }

    /// Keeps the sets small: a large or long exact set goes into the query and leaves its first and
    /// last two bytes as prefixes and suffixes; prefix and suffix sets go into the query and are cut
    /// to at most two bytes (fewer while there are too many).
    fn simplify(&mut self, force: bool) {
        if let Some(exact) = &self.exact {
            if exact.len() > MAX_EXACT || min_len(exact) >= 4 || (force && min_len(exact) >= 3) {
                self.add_exact();
                if let Some(exact) = self.exact.take() {
                    for s in exact {
                        let n = s.len();
                        if n < 3 {
                            self.prefix.insert(s.clone());
                            self.suffix.insert(s);
                        } else {
                            self.prefix.insert(s[..2].to_vec());
                            self.suffix.insert(s[n - 2..].to_vec());
                        }
                    }
                }
            }
        }
        if self.exact.is_none() {
            let required = trigram_query(&self.prefix).and(trigram_query(&self.suffix));
            self.matched = std::mem::replace(&mut self.matched, Query::All).and(required);
            self.prefix = trimmed(std::mem::take(&mut self.prefix), false);
            self.suffix = trimmed(std::mem::take(&mut self.suffix), true);
        }
    }
}

/// `set` cut to strings of at most two bytes, then shorter while it has more than [`MAX_SET`],
/// without the strings that another one in the set already starts (ends) them with: knowing "ab"
/// starts every match, "abc" adds nothing.
fn trimmed(set: Set, suffix: bool) -> Set {
    let cut = |set: &Set, n: usize| -> Set {
        set.iter()
            .map(|s| {
                if s.len() > n {
                    if suffix {
                        s[s.len() - n..].to_vec()
                    } else {
                        s[..n].to_vec()
                    }
                } else {
                    s.clone()
                }
            })
            .collect()
    };
    let mut set = cut(&set, 2);
    let mut n = 2;
    while set.len() > MAX_SET && n > 0 {
        n -= 1;
        set = cut(&set, n);
    }
    let redundant = |s: &Vec<u8>, other: &Vec<u8>| {
        other.len() < s.len() && if suffix { s.ends_with(other) } else { s.starts_with(other) }
    };
    set.iter().filter(|s| !set.iter().any(|other| redundant(s, other))).cloned().collect()
}

fn concat(x: Info, y: Info) -> Info {
    let mut xy = Info {
        can_empty: x.can_empty && y.can_empty,
        exact: None,
        prefix: Set::new(),
        suffix: Set::new(),
        matched: x.matched.clone().and(y.matched.clone()),
    };
    match (&x.exact, &y.exact) {
        (Some(a), Some(b)) => xy.exact = Some(cross(a, b)),
        _ => {
            xy.prefix = match &x.exact {
                Some(a) => cross(a, &y.prefix),
                None if x.can_empty => x.prefix.union(y.starts()).cloned().collect(),
                None => x.prefix.clone(),
            };
            xy.suffix = match &y.exact {
                Some(b) => cross(&x.suffix, b),
                None if y.can_empty => y.suffix.union(x.ends()).cloned().collect(),
                None => y.suffix.clone(),
            };
        }
    }
    // A match holds some string of x's suffixes followed by one of y's prefixes: when all of them
    // are long enough, one of their trigram sets is required, which neither side said alone.
    if x.exact.is_none()
        && y.exact.is_none()
        && x.suffix.len() <= MAX_SET
        && y.prefix.len() <= MAX_SET
        && min_len(&x.suffix) + min_len(&y.prefix) >= 3
    {
        xy.matched = xy.matched.and(trigram_query(&cross(&x.suffix, &y.prefix)));
    }
    xy.simplify(false);
    xy
}

fn alternate(mut x: Info, mut y: Info) -> Info {
    let mut xy = Info {
        can_empty: x.can_empty || y.can_empty,
        exact: None,
        prefix: Set::new(),
        suffix: Set::new(),
        matched: Query::All,
    };
    if let (Some(a), Some(b)) = (&x.exact, &y.exact) {
        xy.exact = Some(a.union(b).cloned().collect());
    } else {
        xy.prefix = x.starts().union(y.starts()).cloned().collect();
        xy.suffix = x.ends().union(y.ends()).cloned().collect();
        x.add_exact();
        y.add_exact();
    }
    xy.matched = x.matched.or(y.matched);
    xy.simplify(false);
    xy
}

fn analyze(hir: &Hir) -> Info {
    let mut info = match hir.kind() {
        HirKind::Empty | HirKind::Look(_) => Info::empty_string(),
        HirKind::Literal(literal) => Info::exact(set_of([literal.0.to_vec()])),
        HirKind::Class(class) => class_info(class),
        HirKind::Capture(capture) => analyze(&capture.sub),
        HirKind::Repetition(rep) => match (rep.min, rep.max) {
            (0, Some(1)) => alternate(analyze(&rep.sub), Info::empty_string()),
            (0, _) => Info::any_match(),
            _ => {
                // At least one copy: what the sub-expression requires, and matches start and end
                // as its matches do, though they are no longer exactly its strings.
                let mut info = analyze(&rep.sub);
                if let Some(exact) = info.exact.take() {
                    info.prefix = exact.clone();
                    info.suffix = exact;
                }
                info
            }
        },
        HirKind::Concat(parts) => parts.iter().fold(Info::empty_string(), |acc, part| concat(acc, analyze(part))),
        HirKind::Alternation(parts) => {
            let mut parts = parts.iter().map(analyze);
            let first = parts.next().unwrap_or_else(Info::no_match);
            parts.fold(first, alternate)
        }
    };
    info.simplify(false);
    info
}

fn class_info(class: &Class) -> Info {
    let strings: Option<Set> = match class {
        Class::Unicode(class) => {
            let count: usize = class.iter().map(|r| r.end() as usize - r.start() as usize + 1).sum();
            (count <= MAX_CLASS).then(|| {
                class
                    .iter()
                    .flat_map(|r| r.start()..=r.end())
                    .map(|c| c.encode_utf8(&mut [0; 4]).as_bytes().to_vec())
                    .collect()
            })
        }
        Class::Bytes(class) => {
            let count: usize = class.iter().map(|r| usize::from(r.end()) - usize::from(r.start()) + 1).sum();
            (count <= MAX_CLASS).then(|| class.iter().flat_map(|r| r.start()..=r.end()).map(|b| vec![b]).collect())
        }
    };
    match strings {
        Some(set) if set.is_empty() => Info::no_match(),
        Some(set) => Info::exact(set),
        None => Info::any_char(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use grep_matcher::Matcher;
    use proptest::prelude::*;

    fn file_satisfies(q: &Query, text: &str) -> bool {
        let have: BTreeSet<Trigram> = trigrams_of(text.as_bytes()).collect();
        q.matches(&|t| have.contains(&t))
    }

    #[test]
    fn literals_require_their_trigrams() {
        let q = query("hello");
        assert!(file_satisfies(&q, "say hello there"));
        assert!(!file_satisfies(&q, "say help there"));
        assert_eq!(query(r"\w+"), Query::All);
        assert_eq!(query("a.b"), Query::All);
        assert_eq!(query("(unclosed"), Query::All);
        assert_eq!(query(r"[^\s\S]"), Query::Nothing);
    }

    #[test]
    fn alternations_classes_and_case_folding_keep_every_variant() {
        let q = query("foo|barbaz");
        assert!(file_satisfies(&q, "foo") && file_satisfies(&q, "xbarbazx"));
        assert!(!file_satisfies(&q, "bar baz"));
        let q = query("(?i)unsafe fn");
        assert!(
            file_satisfies(&q, "UNSAFE FN") && file_satisfies(&q, "Unsafe Fn") && file_satisfies(&q, "un\u{17f}afe fn")
        );
        assert!(!file_satisfies(&q, "unsafe  fn"));
        let q = query("fn [a-z_]+_unchecked");
        assert!(file_satisfies(&q, "pub fn get_unchecked("));
        assert!(!file_satisfies(&q, "pub fn get_checked("));
        assert_ne!(q, Query::All);
    }

    /// Regexes built from a few letters, so that random texts over the same letters match them
    /// often enough for the property to bite.
    fn regex_strategy() -> impl Strategy<Value = String> {
        let leaf = prop_oneof![
            "[abcAB]{1,5}",
            Just(".".to_string()),
            Just("[ab]".to_string()),
            Just("[^a]".to_string()),
            Just(r"\w".to_string()),
            Just("^".to_string()),
            Just("$".to_string()),
            Just(r"\b".to_string()),
        ];
        leaf.prop_recursive(4, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 1..4).prop_map(|v| v.concat()),
                prop::collection::vec(inner.clone(), 2..4).prop_map(|v| format!("(?:{})", v.join("|"))),
                (inner.clone(), prop_oneof![Just("?"), Just("*"), Just("+"), Just("{2}"), Just("{1,3}")])
                    .prop_map(|(r, op)| format!("(?:{r}){op}")),
                inner.prop_map(|r| format!("(?i:{r})")),
            ]
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        /// The index may only ever narrow to files that cannot match: any text in which the real
        /// matcher finds a match satisfies the pattern's query.
        #[test]
        fn a_text_that_matches_always_satisfies_the_query(
            pattern in regex_strategy(),
            lines in prop::collection::vec("[abcAB \u{17f}]{0,12}", 1..4),
        ) {
            let Ok(matcher) = grep_regex::RegexMatcherBuilder::new().line_terminator(Some(b'\n')).build(&pattern)
            else { return Ok(()) };
            let text = lines.join("\n");
            let matches = text.lines().any(|line| matcher.is_match(line.as_bytes()).unwrap_or(false));
            if matches {
                prop_assert!(file_satisfies(&query(&pattern), &text), "{pattern:?} matches {text:?}");
            }
        }
    }
}
