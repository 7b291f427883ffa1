//! Deterministic entropy for `random_get`: one stream per simulated Envoy, shared by its workers
//! (so two workers never draw the same bytes), seeded by the test so every run is reproducible.

/// SplitMix64: tiny, fast, good enough to stand in for a CSPRNG in tests.
#[derive(Debug, Clone)]
pub struct Entropy {
    state: u64,
    /// When set, every draw returns this byte (to inject a broken entropy source).
    constant: Option<u8>,
}

impl Entropy {
    pub fn seeded(seed: u64) -> Self {
        Entropy {
            state: seed,
            constant: None,
        }
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (n > 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n <= 1 {
            return 0;
        }
        (self.next_u64() % n as u64) as usize
    }

    pub fn fill(&mut self, out: &mut [u8]) {
        if let Some(byte) = self.constant {
            out.fill(byte);
            return;
        }
        for chunk in out.chunks_mut(8) {
            let bytes = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&bytes[..chunk.len()]);
        }
    }

    pub fn set_constant(&mut self, byte: Option<u8>) {
        self.constant = byte;
    }
}
