//! `{"pattern": …}`: a key format in a small, bounded pattern language (`docs/semantics.md` §1).
//!
//! A pattern is a sequence of atoms, each optionally followed by a quantifier, and the whole key
//! must match (no anchors: the match is always of the whole key).
//! - Atoms: a visible ASCII character other than `\ [ ] { } ( ) . * + ? ^ $ |` stands for itself;
//!   `\` followed by one of those stands for that character; `\d` is `0-9`, `\w` is `A-Za-z0-9_`,
//!   `\x` is `0-9a-fA-F`; `.` is any character a key may hold; `[…]` is one of the characters and
//!   ranges (`a-z`) listed: inside it every visible ASCII character but `[`, `]` and `\` is
//!   itself (`.` too), `\` works as outside and also makes `\-`, a `-` first or last is itself;
//!   a class is never negated (`[^…]` is refused).
//! - Quantifiers: `{n}`, `{m,n}` (`m` ≤ `n` ≤ 255), `?` (`{0,1}`), `*` (`{0,255}`), `+`
//!   (`{1,255}`): a key has at most 255 characters.
//! - At most 256 characters and 64 atoms; no groups, alternation or anchors.
//!
//! Not a regular-expression engine: an atom is one set of characters repeated a bounded number of
//! times, so a pattern compiles to a short list of (set, min, max) and a key is matched by one
//! pass per atom over the set of positions the key could have reached — at most 64 × 256 steps
//! on two machine words, no backtracking whatever the pattern, no allocation. That is the part of
//! regular expressions key formats use (`ord_\d{8}`, `[a-z]{3}_\w+`), at a size and a worst case
//! every request can afford.

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

/// The longest pattern, in characters.
pub(crate) const MAX_PATTERN_LEN: usize = 256;
/// The most atoms a pattern may have.
pub(crate) const MAX_ATOMS: usize = 64;
/// The most characters a key has: an unbounded quantifier means this many.
const MAX_REPEAT: u8 = 255;

/// The characters a key may hold (visible ASCII, `0x21..=0x7e`) as a set.
const KEY_CHARS: u128 = range(b'!', b'~');

/// Why a pattern is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub(crate) enum PatternError {
    /// No atoms.
    Empty,
    /// Over [`MAX_PATTERN_LEN`] characters.
    TooLong,
    /// Over [`MAX_ATOMS`] atoms.
    TooManyAtoms,
    /// A character outside visible ASCII (a space, a control character, or not ASCII).
    NotVisibleAscii,
    /// `(`, `)`, `|`, `^` or `$`: groups, alternation and anchors are not in the language.
    Unsupported,
    /// `\` followed by a character that has no meaning after it, or by nothing.
    UnknownEscape,
    /// A `[` without its `]`.
    UnclosedClass,
    /// A `]` or `}` without its opening bracket.
    UnopenedBracket,
    /// `[]`.
    EmptyClass,
    /// `[^…]`.
    NegatedClass,
    /// A range whose end comes before its start (`z-a`), or whose ends are not characters.
    BadRange,
    /// A quantifier with no atom before it (at the start, or after another quantifier).
    NothingToRepeat,
    /// A `{` not of the form `{n}` or `{m,n}`, or a count over 255.
    BadCount,
    /// `{m,n}` with `m` > `n`.
    ReversedCount,
    /// The atoms' least lengths add up to more than a key's 255 characters, or every atom may
    /// only be absent: no key could match.
    NoKeyMatches,
}

impl PatternError {
    /// The reason, for the configuration's refusal.
    pub(crate) fn reason(self) -> &'static str {
        match self {
            PatternError::Empty => "must not be empty",
            PatternError::TooLong => "may have at most 256 characters",
            PatternError::TooManyAtoms => "may have at most 64 atoms",
            PatternError::NotVisibleAscii => {
                "may hold only visible ASCII, as keys do (no spaces, control characters or non-ASCII)"
            }
            PatternError::Unsupported => {
                "groups, alternation and anchors (`(`, `)`, `|`, `^`, `$`) are not in the pattern language (the whole key always matches): write `\\(` and so on for the character itself"
            }
            PatternError::UnknownEscape => {
                "`\\` may only precede one of `\\ [ ] { } ( ) . * + ? ^ $ |` (the character itself), `-` in a class, or `d`, `w`, `x`"
            }
            PatternError::UnclosedClass => "has a `[` without its `]`",
            PatternError::UnopenedBracket => {
                "has a `]` or `}` without its opening bracket: write `\\]` or `\\}` for the character itself"
            }
            PatternError::EmptyClass => "has an empty class `[]`",
            PatternError::NegatedClass => {
                "a class may not be negated (`[^…]`): list the characters it takes"
            }
            PatternError::BadRange => {
                "has a range whose end comes before its start, or whose ends are not single characters"
            }
            PatternError::NothingToRepeat => {
                "has a quantifier (`?`, `*`, `+`, `{…}`) with nothing before it to repeat"
            }
            PatternError::BadCount => {
                "has a `{` that is not `{n}` or `{m,n}` with counts of at most 255"
            }
            PatternError::ReversedCount => "has a `{m,n}` with m greater than n",
            PatternError::NoKeyMatches => {
                "matches no key: a key has 1 to 255 characters"
            }
        }
    }
}

impl fmt::Display for PatternError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.reason())
    }
}

/// One atom: a set of characters (bit `c` for character `c`), taken `min` to `max` times.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Atom {
    set: u128,
    min: u8,
    max: u8,
}

/// A compiled pattern, with the text it was written as (for the refusal and the published
/// policy).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct KeyPattern {
    source: String,
    atoms: Vec<Atom>,
}

/// The positions `0..=255` in a key a match could have reached, one bit each.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Positions([u128; 2]);

impl Positions {
    const NONE: Positions = Positions([0, 0]);

    fn set(&mut self, at: usize) {
        self.0[at / 128] |= 1 << (at % 128);
    }

    fn has(self, at: usize) -> bool {
        self.0[at / 128] & (1 << (at % 128)) != 0
    }

    fn and(self, other: Positions) -> Positions {
        Positions([self.0[0] & other.0[0], self.0[1] & other.0[1]])
    }

    fn or(self, other: Positions) -> Positions {
        Positions([self.0[0] | other.0[0], self.0[1] | other.0[1]])
    }

    /// Every position one further on.
    fn next(self) -> Positions {
        Positions([self.0[0] << 1, (self.0[1] << 1) | (self.0[0] >> 127)])
    }

    fn is_empty(self) -> bool {
        self.0 == [0, 0]
    }
}

impl KeyPattern {
    /// Compiles `source`.
    pub(crate) fn parse(source: &str) -> Result<KeyPattern, PatternError> {
        let bytes = source.as_bytes();
        if bytes.len() > MAX_PATTERN_LEN {
            return Err(PatternError::TooLong);
        }
        if !bytes.iter().all(|b| (0x21..=0x7e).contains(b)) {
            return Err(PatternError::NotVisibleAscii);
        }
        let mut atoms: Vec<Atom> = Vec::new();
        // Whether the last thing read is an atom a quantifier may follow.
        let mut repeatable = false;
        let mut i = 0;
        while i < bytes.len() {
            let (min, max) = match bytes[i] {
                b'?' => (0, 1),
                b'*' => (0, MAX_REPEAT),
                b'+' => (1, MAX_REPEAT),
                b'{' => {
                    let (counts, end) = counts(bytes, i + 1)?;
                    i = end - 1;
                    counts
                }
                _ => {
                    let (set, end) = atom(bytes, i)?;
                    if atoms.len() == MAX_ATOMS {
                        return Err(PatternError::TooManyAtoms);
                    }
                    atoms.push(Atom {
                        set,
                        min: 1,
                        max: 1,
                    });
                    repeatable = true;
                    i = end;
                    continue;
                }
            };
            match atoms.last_mut() {
                Some(last) if repeatable => {
                    last.min = min;
                    last.max = max;
                    repeatable = false;
                }
                _ => return Err(PatternError::NothingToRepeat),
            }
            i += 1;
        }
        if atoms.is_empty() {
            return Err(PatternError::Empty);
        }
        let least: usize = atoms.iter().map(|a| usize::from(a.min)).sum();
        if least > usize::from(MAX_REPEAT) || atoms.iter().all(|a| a.max == 0) {
            return Err(PatternError::NoKeyMatches);
        }
        Ok(KeyPattern {
            source: String::from(source),
            atoms,
        })
    }

    /// The pattern as written.
    pub(crate) fn source(&self) -> &str {
        &self.source
    }

    /// Whether the whole of `key` matches. One pass per atom over the positions reached so far:
    /// no backtracking, no allocation.
    pub(crate) fn matches(&self, key: &[u8]) -> bool {
        if key.len() > usize::from(MAX_REPEAT) {
            return false;
        }
        let mut reached = Positions::NONE;
        reached.set(0);
        for atom in &self.atoms {
            // The positions whose character is in the atom's set: a step may leave from there.
            let mut from = Positions::NONE;
            for (at, &c) in key.iter().enumerate() {
                if c < 128 && atom.set & (1 << c) != 0 {
                    from.set(at);
                }
            }
            let step = |p: Positions| p.and(from).next();
            for _ in 0..atom.min {
                reached = step(reached);
            }
            let mut last = reached;
            for _ in atom.min..atom.max {
                last = step(last);
                let more = reached.or(last);
                if more == reached {
                    break;
                }
                reached = more;
            }
            if reached.is_empty() {
                return false;
            }
        }
        reached.has(key.len())
    }
}

/// The set of characters `a..=b`.
const fn range(a: u8, b: u8) -> u128 {
    // All bits up to and including b, less those below a.
    let upto = if b >= 127 {
        u128::MAX
    } else {
        (1u128 << (b + 1)) - 1
    };
    upto & !((1u128 << a) - 1)
}

const DIGITS: u128 = range(b'0', b'9');
const WORD: u128 = DIGITS | range(b'A', b'Z') | range(b'a', b'z') | (1 << b'_');
const HEX: u128 = DIGITS | range(b'A', b'F') | range(b'a', b'f');

/// The characters `\` makes literal.
const ESCAPABLE: &[u8] = b"\\[]{}().*+?^$|";

/// What `\c` stands for: one character (`Ok(c)`) or a named set (`Err(set)`).
fn escape(c: u8, in_class: bool) -> Result<Result<u8, u128>, PatternError> {
    match c {
        b'd' => Ok(Err(DIGITS)),
        b'w' => Ok(Err(WORD)),
        b'x' => Ok(Err(HEX)),
        b'-' if in_class => Ok(Ok(c)),
        _ if ESCAPABLE.contains(&c) => Ok(Ok(c)),
        _ => Err(PatternError::UnknownEscape),
    }
}

/// The atom at `bytes[i]` (not a quantifier): its set, and where the next thing starts.
fn atom(bytes: &[u8], i: usize) -> Result<(u128, usize), PatternError> {
    match bytes[i] {
        b'\\' => {
            let c = bytes.get(i + 1).ok_or(PatternError::UnknownEscape)?;
            let set = match escape(*c, false)? {
                Ok(c) => 1 << c,
                Err(set) => set,
            };
            Ok((set, i + 2))
        }
        b'.' => Ok((KEY_CHARS, i + 1)),
        b'[' => class(bytes, i + 1),
        b']' | b'}' => Err(PatternError::UnopenedBracket),
        b'(' | b')' | b'|' | b'^' | b'$' => Err(PatternError::Unsupported),
        c => Ok((1 << c, i + 1)),
    }
}

/// A class whose first member is at `bytes[i]` (after the `[`): its set, and where the next
/// thing starts (after the `]`).
fn class(bytes: &[u8], mut i: usize) -> Result<(u128, usize), PatternError> {
    if bytes.get(i) == Some(&b'^') {
        return Err(PatternError::NegatedClass);
    }
    let start = i;
    let mut set = 0u128;
    loop {
        let member = match bytes.get(i) {
            None => return Err(PatternError::UnclosedClass),
            Some(b']') if i == start => return Err(PatternError::EmptyClass),
            Some(b']') => return Ok((set, i + 1)),
            Some(b'\\') => {
                let c = bytes.get(i + 1).ok_or(PatternError::UnclosedClass)?;
                i += 2;
                escape(*c, true)?
            }
            Some(b'[') => return Err(PatternError::UnclosedClass),
            Some(&c) => {
                i += 1;
                Ok(c)
            }
        };
        let low = match member {
            Err(named) => {
                if bytes.get(i) == Some(&b'-') && bytes.get(i + 1).is_some_and(|&c| c != b']') {
                    return Err(PatternError::BadRange);
                }
                set |= named;
                continue;
            }
            Ok(low) => low,
        };
        // `a-z`; a `-` before the `]` is itself.
        if bytes.get(i) == Some(&b'-') && bytes.get(i + 1).is_some_and(|&c| c != b']') {
            let high = match bytes.get(i + 1) {
                Some(b'\\') => {
                    let c = bytes.get(i + 2).ok_or(PatternError::UnclosedClass)?;
                    i += 3;
                    escape(*c, true)?.map_err(|_| PatternError::BadRange)?
                }
                Some(b'[') => return Err(PatternError::UnclosedClass),
                Some(&c) => {
                    i += 2;
                    c
                }
                None => return Err(PatternError::UnclosedClass),
            };
            if high < low {
                return Err(PatternError::BadRange);
            }
            set |= range(low, high);
        } else {
            set |= 1 << low;
        }
    }
}

/// `{n}` or `{m,n}` whose first digit is at `bytes[i]`: the counts, and where the `}` is plus one.
fn counts(bytes: &[u8], i: usize) -> Result<((u8, u8), usize), PatternError> {
    let (min, i) = count(bytes, i)?;
    match bytes.get(i) {
        Some(b'}') => Ok(((min, min), i + 1)),
        Some(b',') => {
            let (max, i) = count(bytes, i + 1)?;
            if bytes.get(i) != Some(&b'}') {
                return Err(PatternError::BadCount);
            }
            if min > max {
                return Err(PatternError::ReversedCount);
            }
            Ok(((min, max), i + 1))
        }
        _ => Err(PatternError::BadCount),
    }
}

/// A count of 0 to 255 at `bytes[i]`, and where it ends.
fn count(bytes: &[u8], mut i: usize) -> Result<(u8, usize), PatternError> {
    let start = i;
    let mut value: u16 = 0;
    while let Some(&c) = bytes.get(i).filter(|c| c.is_ascii_digit()) {
        value = value * 10 + u16::from(c - b'0');
        if value > u16::from(MAX_REPEAT) || i - start >= 3 {
            return Err(PatternError::BadCount);
        }
        i += 1;
    }
    if i == start {
        return Err(PatternError::BadCount);
    }
    u8::try_from(value)
        .map(|v| (v, i))
        .map_err(|_| PatternError::BadCount)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(p: &str) -> KeyPattern {
        KeyPattern::parse(p).unwrap()
    }

    #[test]
    fn atoms_and_quantifiers_match_the_whole_key() {
        let cases: &[(&str, &[&str], &[&str])] = &[
            (
                "ord_\\d{8}",
                &["ord_12345678"],
                &["ord_1234567", "ord_123456789", "xord_12345678"],
            ),
            (
                "[a-z]{3}_\\w+",
                &["abc_X1_", "xyz_0"],
                &["abc_", "ABC_1", "ab_1", "abc_1-"],
            ),
            (
                "\\x{4,6}",
                &["dead", "BEEF12"],
                &["dea", "deadbeef", "dexd"],
            ),
            ("a?b*c+", &["c", "abc", "bbbcc"], &["ab", "aabc", ""]),
            (".+", &["a", "~!"], &[""]),
            ("k.", &["k~", "k!"], &["k", "k12"]),
            ("[-a]", &["-", "a"], &["b"]),
            ("[a-]x", &["-x", "ax"], &["bx"]),
            ("[\\d_]+", &["1_2"], &["a"]),
            ("[\\]\\-]", &["]", "-"], &["\\"]),
            ("\\.\\*\\\\\\(\\|\\$", &[".*\\(|$"], &["a*\\(|$"]),
            ("x{0,3}y", &["y", "xxxy"], &["xxxxy"]),
            ("x{2}", &["xx"], &["x", "xxx"]),
        ];
        for (pattern, yes, no) in cases {
            let p = parse(pattern);
            for key in *yes {
                assert!(p.matches(key.as_bytes()), "{pattern} should match {key}");
            }
            for key in *no {
                assert!(
                    !p.matches(key.as_bytes()),
                    "{pattern} should not match {key}"
                );
            }
        }
    }

    #[test]
    fn unbounded_quantifiers_reach_the_longest_key() {
        let p = parse("a+");
        let longest = [b'a'; 255];
        assert!(p.matches(&longest));
        assert!(!p.matches(&[b'a'; 256]));
        assert!(parse("a{255}").matches(&longest));
        assert!(parse(".*b").matches(&[&[b'a'; 254][..], b"b"].concat()));
    }

    #[test]
    fn a_pathological_pattern_is_linear() {
        // A backtracking engine tries every way of sharing the a's out: 255^5 paths.
        let p = parse("a*a*a*a*a*b");
        let key = [b'a'; 255];
        let started = std::time::Instant::now();
        for _ in 0..100 {
            assert!(!p.matches(&key));
        }
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
        let many = parse(&"a*".repeat(64));
        assert!(many.matches(&key));
        assert!(!many.matches(b"ab"));
    }

    #[test]
    fn what_is_not_in_the_language_is_refused() {
        let cases: &[(&str, PatternError)] = &[
            ("", PatternError::Empty),
            ("[a-z", PatternError::UnclosedClass),
            ("[a-z]]", PatternError::UnopenedBracket),
            ("a}", PatternError::UnopenedBracket),
            ("[z-a]", PatternError::BadRange),
            ("[\\d-z]", PatternError::BadRange),
            ("[a-\\d]", PatternError::BadRange),
            ("[]", PatternError::EmptyClass),
            ("[^a]", PatternError::NegatedClass),
            ("a{5,2}", PatternError::ReversedCount),
            ("a{2,}", PatternError::BadCount),
            ("a{256}", PatternError::BadCount),
            ("a{x}", PatternError::BadCount),
            ("a{1", PatternError::BadCount),
            ("*a", PatternError::NothingToRepeat),
            ("{2}", PatternError::NothingToRepeat),
            ("a**", PatternError::NothingToRepeat),
            ("a+?", PatternError::NothingToRepeat),
            ("ord_é", PatternError::NotVisibleAscii),
            ("a b", PatternError::NotVisibleAscii),
            ("^ord_", PatternError::Unsupported),
            ("a|b", PatternError::Unsupported),
            ("(ab)", PatternError::Unsupported),
            ("ord$", PatternError::Unsupported),
            ("\\q", PatternError::UnknownEscape),
            ("a\\", PatternError::UnknownEscape),
            ("\\-", PatternError::UnknownEscape),
            ("a{0}", PatternError::NoKeyMatches),
            ("a{200}b{56}", PatternError::NoKeyMatches),
        ];
        for (pattern, error) in cases {
            assert_eq!(KeyPattern::parse(pattern), Err(*error), "{pattern}");
        }
        assert_eq!(
            KeyPattern::parse(&"a".repeat(257)),
            Err(PatternError::TooLong)
        );
        assert_eq!(
            KeyPattern::parse(&"a".repeat(65)),
            Err(PatternError::TooManyAtoms)
        );
        assert!(KeyPattern::parse(&"a".repeat(64)).is_ok());
        assert!(KeyPattern::parse(&["a", &"?".repeat(0), &"\\d".repeat(63)].concat()).is_ok());
    }
}
