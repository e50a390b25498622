//! Deterministic sample values for every message, used by the property, differential and
//! fuzz-corpus tests.
//!
//! [`Sample::sample`] fills every field that exists at the given version with a pseudo-random
//! value (null only where the field is nullable at that version) and leaves the rest at their
//! defaults, so a sample is always a valid message of that version.

use bytes::Bytes;

use super::types::{Ctx, Uuid};

/// A small seeded generator (SplitMix64); no dependency, same values on every platform.
#[derive(Debug, Clone)]
pub struct SampleRng {
    state: u64,
    depth: u32,
}

impl SampleRng {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        Self {
            state: seed,
            depth: 0,
        }
    }

    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..bound` (0 when `bound` is 0).
    pub fn below(&mut self, bound: u64) -> u64 {
        if bound == 0 {
            0
        } else {
            self.next_u64() % bound
        }
    }

    /// True with probability 1/`n`.
    pub fn one_in(&mut self, n: u64) -> bool {
        self.below(n) == 0
    }
}

/// A type that can produce sample values.
pub trait Sample: Sized {
    /// A sample valid at `ctx.version`.
    fn sample(rng: &mut SampleRng, ctx: Ctx) -> Self;
}

macro_rules! sample_int {
    ($($ty:ty),*) => {$(
        impl Sample for $ty {
            fn sample(rng: &mut SampleRng, _ctx: Ctx) -> Self {
                // Mix small values (often meaningful) with full-width ones.
                if rng.one_in(2) {
                    (rng.below(7) as i64 - 3) as $ty
                } else {
                    rng.next_u64() as $ty
                }
            }
        }
    )*};
}

sample_int!(i8, i16, i32, i64, u16, u32);

impl Sample for f64 {
    fn sample(rng: &mut SampleRng, _ctx: Ctx) -> Self {
        (rng.next_u64() >> 11) as f64 / 1024.0
    }
}

impl Sample for bool {
    fn sample(rng: &mut SampleRng, _ctx: Ctx) -> Self {
        rng.one_in(2)
    }
}

impl Sample for Uuid {
    fn sample(rng: &mut SampleRng, _ctx: Ctx) -> Self {
        let mut out = [0u8; 16];
        out[..8].copy_from_slice(&rng.next_u64().to_be_bytes());
        out[8..].copy_from_slice(&rng.next_u64().to_be_bytes());
        Uuid(out)
    }
}

impl Sample for String {
    fn sample(rng: &mut SampleRng, _ctx: Ctx) -> Self {
        const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789-._";
        let len = rng.below(9) as usize;
        (0..len)
            .map(|_| ALPHABET[rng.below(ALPHABET.len() as u64) as usize] as char)
            .collect()
    }
}

impl Sample for Bytes {
    fn sample(rng: &mut SampleRng, _ctx: Ctx) -> Self {
        // Now and then large enough to travel as a shared chunk.
        let len = if rng.one_in(8) {
            600 + rng.below(200) as usize
        } else {
            rng.below(24) as usize
        };
        (0..len).map(|_| rng.next_u64() as u8).collect()
    }
}

impl<T: Sample> Sample for Vec<T> {
    fn sample(rng: &mut SampleRng, ctx: Ctx) -> Self {
        let max = if rng.depth < 3 { 4 } else { 2 };
        let len = rng.below(max) as usize;
        rng.depth += 1;
        let element_ctx = ctx.with_nullable(false);
        let out = (0..len).map(|_| T::sample(rng, element_ctx)).collect();
        rng.depth -= 1;
        out
    }
}

impl<T: Sample> Sample for Option<T> {
    fn sample(rng: &mut SampleRng, ctx: Ctx) -> Self {
        if ctx.nullable && rng.one_in(3) {
            None
        } else {
            Some(T::sample(rng, ctx.with_nullable(false)))
        }
    }
}
