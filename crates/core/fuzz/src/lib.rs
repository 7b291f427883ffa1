//! Helpers shared by the fuzz targets: a tiny front-to-back framing of the raw fuzz input (so the
//! seed script can write inputs by hand, see `seeds.py`) and the chunk splitter used to check that
//! streamed hashing never depends on where the body was cut.

/// Reads a fuzz input front to back. Reads past the end give zero / empty, so every input is
/// usable and the fuzzer never wastes executions on framing errors.
pub struct Input<'a> {
    rest: &'a [u8],
}

impl<'a> Input<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Input { rest: data }
    }

    pub fn byte(&mut self) -> u8 {
        match self.rest.split_first() {
            Some((&b, rest)) => {
                self.rest = rest;
                b
            }
            None => 0,
        }
    }

    pub fn bytes(&mut self, n: usize) -> &'a [u8] {
        let n = n.min(self.rest.len());
        let (head, tail) = self.rest.split_at(n);
        self.rest = tail;
        head
    }

    /// Up to (not including) `sep`, which is consumed; everything left if `sep` never occurs.
    pub fn until(&mut self, sep: u8) -> &'a [u8] {
        match self.rest.iter().position(|&b| b == sep) {
            Some(i) => {
                let head = &self.rest[..i];
                self.rest = &self.rest[i + 1..];
                head
            }
            None => core::mem::take(&mut self.rest),
        }
    }

    pub fn rest(self) -> &'a [u8] {
        self.rest
    }

    /// A split specification: one byte `n % 8`, then `n` cut points, each a fraction `x / 256` of
    /// the body length. Equal cut points make empty chunks, which hosts also deliver.
    pub fn splits(&mut self) -> Vec<u8> {
        let n = usize::from(self.byte() % 8);
        self.bytes(n).to_vec()
    }
}

/// Cuts `body` at the given fractional points (see [`Input::splits`]).
pub fn chunks<'a>(body: &'a [u8], fractions: &[u8]) -> Vec<&'a [u8]> {
    let mut points: Vec<usize> = fractions
        .iter()
        .map(|&f| usize::from(f) * body.len() / 256)
        .collect();
    points.sort_unstable();
    let mut out = Vec::with_capacity(points.len() + 1);
    let mut start = 0;
    for p in points {
        out.push(&body[start..p]);
        start = p;
    }
    out.push(&body[start..]);
    out
}

/// Bodies up to this size are also fed one byte per chunk (the most adversarial split).
pub const BYTEWISE_MAX: usize = 4096;
