//! The push parser: a byte-driven state machine over an explicit container stack, so nesting costs
//! heap frames bounded by `max_depth` rather than native stack.

use alloc::vec::Vec;
use sha2::{Digest, Sha256};

use super::cache::HashCache;
use super::lexer::{Hash, Scan, StrLexer};
use super::number::{NumberLexer, Step};
use super::pointer::{FieldTracker, JsonPointer, Pointers};
use super::{misplaced, JsonError, JsonLimits};

enum Frame {
    /// Element hashes are folded in as they complete, so an array costs O(1) however long.
    Array { hasher: Sha256, next_index: u64 },
    /// This object's members occupy `JsonHasher::members[start..]` until it closes.
    Object { start: usize },
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum State {
    /// A value must come next: document start, after `:`, after `,` in an array.
    Value,
    /// After `[`: a value or `]`.
    ArrayFirst,
    /// After `{`: a key or `}`.
    ObjectFirst,
    /// After `,` in an object.
    Key,
    Colon,
    /// After an element or member value: `,` or the closer.
    After,
    /// The top-level value is complete; only whitespace may follow.
    Done,
    Str,
    Num,
    Lit,
}

/// Chunk-fed digest of one JSON body (see the module docs for the digest and error rules).
pub struct JsonHasher<'p> {
    limits: JsonLimits,
    state: State,
    stack: Vec<Frame>,
    /// `key hash || value hash` of every member of the open objects; members must wait here
    /// because their order in the digest is only known once the object closes.
    members: Vec<[u8; 64]>,
    in_key: bool,
    text: StrLexer,
    number: NumberLexer,
    literal: &'static [u8],
    literal_pos: usize,
    fields: Option<FieldTracker<'p>>,
    cache: HashCache,
    root: Option<Hash>,
    /// Body offset of the first byte of the next chunk.
    consumed: u64,
    error: Option<JsonError>,
}

impl<'p> JsonHasher<'p> {
    /// `fields == None`: json mode (digest of the whole document); `Some(ptrs)`: fields mode.
    pub fn new(limits: JsonLimits, fields: Option<&'p [JsonPointer]>) -> Self {
        Self::with_pointers(limits, fields.map(Pointers::Borrowed))
    }

    /// Like [`JsonHasher::new`], with the pointers borrowed or shared (`Pointers::Shared` gives a
    /// `JsonHasher<'static>` that a request context can own).
    pub fn with_pointers(limits: JsonLimits, fields: Option<Pointers<'p>>) -> Self {
        JsonHasher {
            limits,
            state: State::Value,
            stack: Vec::new(),
            members: Vec::new(),
            in_key: false,
            text: StrLexer::new(),
            number: NumberLexer::new(limits.max_number_len),
            literal: b"",
            literal_pos: 0,
            fields: fields.map(FieldTracker::new),
            cache: HashCache::new(),
            root: None,
            consumed: 0,
            error: None,
        }
    }

    /// Feeds the next chunk. After an error, every later call returns that same error, so a host
    /// may keep forwarding chunks and check once.
    pub fn update(&mut self, chunk: &[u8]) -> Result<(), JsonError> {
        if let Some(error) = &self.error {
            return Err(error.clone());
        }
        let result = self.run(chunk);
        self.consumed = self.consumed.saturating_add(chunk.len() as u64);
        if let Err(error) = &result {
            self.error = Some(error.clone());
        }
        result
    }

    /// Ends the body and returns the json-mode or fields-mode digest.
    pub fn finish(mut self) -> Result<[u8; 32], JsonError> {
        if let Some(error) = self.error.take() {
            return Err(error);
        }
        if self.consumed == 0 {
            return Ok(match &self.fields {
                Some(tracker) => tracker.digest(),
                None => Sha256::digest(b"empty").into(),
            });
        }
        match self.state {
            State::Num if self.number.is_complete() => {
                let hash = self.number.digest(&mut self.cache)?;
                self.complete_value(hash);
            }
            State::Str => return Err(self.text.eof_error(self.consumed)),
            _ => {}
        }
        match (self.state, self.root) {
            (State::Done, Some(root)) => Ok(match &self.fields {
                Some(tracker) => tracker.digest(),
                None => root,
            }),
            _ => Err(JsonError::UnexpectedEnd),
        }
    }

    fn run(&mut self, buf: &[u8]) -> Result<(), JsonError> {
        let base = self.consumed;
        let mut i = 0;
        while let Some(&b) = buf.get(i) {
            match self.state {
                State::Str => {
                    let key = if self.in_key {
                        self.fields.as_mut()
                    } else {
                        None
                    };
                    match self.text.scan(buf, i, base, key)? {
                        Scan::More => return Ok(()),
                        Scan::Done(next) => {
                            i = next;
                            self.end_string();
                        }
                    }
                }
                State::Num => i = self.number_run(buf, i, base)?,
                State::Lit => {
                    if self.literal.get(self.literal_pos) != Some(&b) {
                        return Err(misplaced(b, base + i as u64, syntax));
                    }
                    self.literal_pos += 1;
                    i += 1;
                    if self.literal_pos == self.literal.len() {
                        self.complete_value(literal_hash(self.literal));
                    }
                }
                _ => {
                    if !matches!(b, b' ' | b'\t' | b'\n' | b'\r') {
                        self.structural(b, base + i as u64)?;
                    }
                    i += 1;
                }
            }
        }
        Ok(())
    }

    fn number_run(&mut self, buf: &[u8], mut i: usize, base: u64) -> Result<usize, JsonError> {
        while let Some(&b) = buf.get(i) {
            match self.number.step(b, base + i as u64)? {
                Step::Take => i += 1,
                Step::End => {
                    // The terminating byte is left for the structural states to judge.
                    let hash = self.number.digest(&mut self.cache)?;
                    self.complete_value(hash);
                    return Ok(i);
                }
            }
        }
        Ok(i)
    }

    fn structural(&mut self, b: u8, at: u64) -> Result<(), JsonError> {
        match self.state {
            State::Value => self.begin_value(b, at),
            State::ArrayFirst if b == b']' => self.close_array(at),
            State::ArrayFirst => self.begin_value(b, at),
            State::ObjectFirst if b == b'}' => self.close_object(at),
            State::ObjectFirst | State::Key if b == b'"' => {
                self.begin_string(true);
                Ok(())
            }
            State::Colon if b == b':' => {
                self.state = State::Value;
                Ok(())
            }
            State::After => self.after_value(b, at),
            State::Done => Err(misplaced(b, at, trailing)),
            _ => Err(misplaced(b, at, syntax)),
        }
    }

    fn after_value(&mut self, b: u8, at: u64) -> Result<(), JsonError> {
        match (b, self.stack.last()) {
            (b',', Some(Frame::Array { .. })) => self.state = State::Value,
            (b',', Some(Frame::Object { .. })) => self.state = State::Key,
            (b']', Some(Frame::Array { .. })) => return self.close_array(at),
            (b'}', Some(Frame::Object { .. })) => return self.close_object(at),
            _ => return Err(misplaced(b, at, syntax)),
        }
        Ok(())
    }

    fn begin_value(&mut self, b: u8, at: u64) -> Result<(), JsonError> {
        let depth = self.stack.len();
        if let (Some(Frame::Array { next_index, .. }), Some(tracker)) =
            (self.stack.last(), self.fields.as_mut())
        {
            tracker.enter_index(depth, *next_index);
        }
        match b {
            b'[' | b'{' => {
                // Refuse before pushing, so a depth bomb allocates at most `max_depth` frames.
                if depth >= usize::from(self.limits.max_depth) {
                    return Err(JsonError::TooDeep {
                        offset: at,
                        max: self.limits.max_depth,
                    });
                }
                if b == b'[' {
                    let mut hasher = Sha256::new();
                    hasher.update(b"a");
                    self.stack.push(Frame::Array {
                        hasher,
                        next_index: 0,
                    });
                    self.state = State::ArrayFirst;
                } else {
                    self.stack.push(Frame::Object {
                        start: self.members.len(),
                    });
                    self.state = State::ObjectFirst;
                }
            }
            b'"' => self.begin_string(false),
            b'-' | b'0'..=b'9' => {
                self.number.begin(b, at)?;
                self.state = State::Num;
            }
            b't' => self.begin_literal(b"true"),
            b'f' => self.begin_literal(b"false"),
            b'n' => self.begin_literal(b"null"),
            _ => return Err(misplaced(b, at, syntax)),
        }
        Ok(())
    }

    fn begin_literal(&mut self, literal: &'static [u8]) {
        self.literal = literal;
        self.literal_pos = 1;
        self.state = State::Lit;
    }

    fn begin_string(&mut self, key: bool) {
        self.in_key = key;
        self.text.begin();
        if key {
            if let Some(tracker) = self.fields.as_mut() {
                tracker.key_begin(self.stack.len());
            }
        }
        self.state = State::Str;
    }

    fn end_string(&mut self) {
        let hash = self.text.digest(&mut self.cache);
        if self.in_key {
            let mut member = [0u8; 64];
            member[..32].copy_from_slice(&hash);
            self.members.push(member);
            if let Some(tracker) = self.fields.as_mut() {
                tracker.key_end();
            }
            self.state = State::Colon;
        } else {
            self.complete_value(hash);
        }
    }

    fn complete_value(&mut self, hash: Hash) {
        if let Some(tracker) = self.fields.as_mut() {
            tracker.leave(self.stack.len(), &hash);
        }
        match self.stack.last_mut() {
            None => {
                self.root = Some(hash);
                self.state = State::Done;
            }
            Some(Frame::Array { hasher, next_index }) => {
                hasher.update(hash);
                *next_index = next_index.saturating_add(1);
                self.state = State::After;
            }
            Some(Frame::Object { .. }) => {
                if let Some(member) = self.members.last_mut() {
                    member[32..].copy_from_slice(&hash);
                }
                self.state = State::After;
            }
        }
    }

    fn close_array(&mut self, at: u64) -> Result<(), JsonError> {
        match self.stack.pop() {
            Some(Frame::Array { hasher, .. }) => {
                self.complete_value(hasher.finalize().into());
                Ok(())
            }
            _ => Err(JsonError::Syntax { offset: at }),
        }
    }

    fn close_object(&mut self, at: u64) -> Result<(), JsonError> {
        let Some(Frame::Object { start }) = self.stack.pop() else {
            return Err(JsonError::Syntax { offset: at });
        };
        let members = self.members.get_mut(start..).unwrap_or_default();
        heap_sort(members);
        if members
            .windows(2)
            .any(|pair| key_order(&pair[0]) == key_order(&pair[1]))
        {
            return Err(JsonError::DuplicateKey { offset: at });
        }
        let mut hasher = Sha256::new();
        hasher.update(b"o");
        hasher.update(members.as_flattened());
        self.members.truncate(start);
        self.complete_value(hasher.finalize().into());
        Ok(())
    }
}

/// `H("n")`, `H("t")`, `H("f")`: fixed, so not worth a compression per literal.
pub(super) const NULL_HASH: Hash =
    hex32("1b16b1df538ba12dc3f97edbb85caa7050d46c148134290feba80f8236c83db9");
pub(super) const TRUE_HASH: Hash =
    hex32("e3b98a4da31a127d4bde6e43033f66ba274cab0eb7eb1c70ec41402bf6273dd8");
pub(super) const FALSE_HASH: Hash =
    hex32("252f10c83610ebca1a059c0bae8255eba2f95be4d1d7bcfa89d7248a82d9f111");

fn literal_hash(literal: &[u8]) -> Hash {
    match literal.first() {
        Some(b't') => TRUE_HASH,
        Some(b'f') => FALSE_HASH,
        _ => NULL_HASH,
    }
}

const fn hex32(text: &str) -> Hash {
    const fn nibble(c: u8) -> u8 {
        match c {
            b'0'..=b'9' => c - b'0',
            b'a'..=b'f' => c - b'a' + 10,
            _ => 0,
        }
    }
    let bytes = text.as_bytes();
    let mut out = [0u8; 32];
    let mut i = 0;
    while i < 32 {
        out[i] = (nibble(bytes[2 * i]) << 4) | nibble(bytes[2 * i + 1]);
        i += 1;
    }
    out
}

/// A member's key hash as two big-endian integers: bytewise order, compared without memcmp calls.
/// Sorts members by key hash. A plain heapsort rather than the standard library's sort: in place,
/// O(n log n) worst case, no recursion, and about 15 KB smaller in the browser's `.wasm`.
fn heap_sort(members: &mut [[u8; 64]]) {
    fn sift_down(members: &mut [[u8; 64]], mut root: usize, end: usize) {
        loop {
            let mut child = 2 * root + 1;
            if child >= end {
                return;
            }
            if child + 1 < end && key_order(&members[child]) < key_order(&members[child + 1]) {
                child += 1;
            }
            if key_order(&members[root]) >= key_order(&members[child]) {
                return;
            }
            members.swap(root, child);
            root = child;
        }
    }
    let n = members.len();
    for root in (0..n / 2).rev() {
        sift_down(members, root, n);
    }
    for end in (1..n).rev() {
        members.swap(0, end);
        sift_down(members, 0, end);
    }
}

fn key_order(member: &[u8; 64]) -> (u128, u128) {
    let mut high = [0u8; 16];
    let mut low = [0u8; 16];
    high.copy_from_slice(&member[..16]);
    low.copy_from_slice(&member[16..32]);
    (u128::from_be_bytes(high), u128::from_be_bytes(low))
}

fn syntax(offset: u64) -> JsonError {
    JsonError::Syntax { offset }
}

fn trailing(offset: u64) -> JsonError {
    JsonError::TrailingData { offset }
}
