//! Which variables a query touches: the densities that shrink the A and B multi-scalar
//! multiplications, as bellperson's `DensityTracker` keeps them.

use std::mem::MaybeUninit;

use rayon::prelude::*;

/// One bit per variable: set when the variable occurs with a nonzero coefficient in a query.
///
/// Bellperson's `DensityTracker` marks on the coefficient, not on the value: a variable whose
/// value is zero still counts, because the parameters hold its query point.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Density {
    /// Bit `i` of the vector is bit `i % 64` of word `i / 64`; bits at `len` and above are 0.
    words: Vec<u64>,
    len: usize,
    total: usize,
}

/// Below this many variables `select` runs on the calling thread: task overhead would dominate.
const SELECT_PARALLEL_MIN: usize = 1 << 16;
/// Words per parallel `select` task (16384 variables).
const SELECT_CHUNK_WORDS: usize = 256;

impl Density {
    /// Number of variables tracked.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Number of set bits: the length of the query after density restriction.
    pub fn total(&self) -> usize {
        self.total
    }

    /// Bytes of memory the bits take.
    pub(crate) fn host_bytes(&self) -> usize {
        self.words.capacity() * size_of::<u64>()
    }

    /// Whether variable `i` occurs in the query.
    ///
    /// # Panics
    /// If `i >= self.len()`.
    pub fn get(&self, i: usize) -> bool {
        assert!(
            i < self.len,
            "density index {i} out of range for {} variables",
            self.len
        );
        self.words[i / 64] >> (i % 64) & 1 == 1
    }

    /// The values whose bit is set, in order: the scalars of a density-restricted MSM.
    ///
    /// # Panics
    /// If `values` does not hold one value per tracked variable.
    pub fn select<T: Copy + Send + Sync>(&self, values: &[T]) -> Vec<T> {
        assert_eq!(
            values.len(),
            self.len,
            "select needs one value per tracked variable"
        );
        let mut out = Vec::with_capacity(self.total);
        let slots = &mut out.spare_capacity_mut()[..self.total];
        let written = if self.len < SELECT_PARALLEL_MIN {
            select_into(&self.words, values, slots)
        } else {
            // Each task owns a run of words and exactly as many output slots as its words
            // have set bits, so tasks write disjoint parts of `out` in order.
            let mut parts = Vec::with_capacity(self.words.len().div_ceil(SELECT_CHUNK_WORDS));
            let mut rest = slots;
            for words in self.words.chunks(SELECT_CHUNK_WORDS) {
                let count = words.iter().map(|w| w.count_ones() as usize).sum();
                let (part, tail) = rest.split_at_mut(count);
                parts.push((words, part));
                rest = tail;
            }
            parts
                .into_par_iter()
                .zip(values.par_chunks(SELECT_CHUNK_WORDS * 64))
                .map(|((words, part), values)| select_into(words, values, part))
                .sum()
        };
        assert_eq!(
            written, self.total,
            "density total out of step with its bits"
        );
        // SAFETY: `select_into` initialized the first `written` slots, and `written` equals
        // the capacity reserved (checked just above).
        unsafe { out.set_len(written) };
        out
    }

    /// The bits, 64 variables a word (as a recorded system's file keeps them).
    pub(crate) fn words(&self) -> &[u64] {
        &self.words
    }

    /// The density of `len` variables whose bits are `words`; `None` unless there is one
    /// word per 64 variables and no bit is set at `len` or above.
    pub(crate) fn from_words(words: Vec<u64>, len: usize) -> Option<Self> {
        let tail = len % 64;
        let clean = match words.last() {
            Some(&last) if tail != 0 => last >> tail == 0,
            _ => true,
        };
        if words.len() != len.div_ceil(64) || !clean {
            return None;
        }
        let total = words.iter().map(|w| w.count_ones() as usize).sum();
        Some(Density { words, len, total })
    }

    /// Tracks one more variable, not (yet) in the query.
    pub(crate) fn push(&mut self) {
        if self.len.is_multiple_of(64) {
            self.words.push(0);
        }
        self.len += 1;
    }

    /// Records that variable `i` occurs in the query.
    #[inline]
    pub(crate) fn mark(&mut self, i: usize) {
        debug_assert!(i < self.len);
        let word = &mut self.words[i / 64];
        let bit = 1 << (i % 64);
        if *word & bit == 0 {
            *word |= bit;
            self.total += 1;
        }
    }

    /// Appends `other`'s variables, as bellperson's `DensityTracker::extend`. With
    /// `merge_first`, `other`'s variable 0 is the ONE input that `self` already holds: its bit
    /// is ORed into `self`'s bit 0 instead of being appended.
    pub(crate) fn extend(&mut self, other: &Density, merge_first: bool) {
        if other.is_empty() {
            return;
        }
        if self.is_empty() {
            self.clone_from(other);
            return;
        }
        let mut total = self.total + other.total;
        let mut from = 0;
        if merge_first {
            if other.get(0) {
                if self.get(0) {
                    total -= 1;
                } else {
                    self.words[0] |= 1;
                }
            }
            from = 1;
        }
        // Not on the proving path (only extensible circuits use it), so bit by bit.
        for i in from..other.len {
            self.push();
            if other.get(i) {
                let last = self.len - 1;
                self.words[last / 64] |= 1 << (last % 64);
            }
        }
        self.total = total;
    }
}

/// Copies `values[i]` for each set bit `i` of `words` into `out`, in order; returns how many.
fn select_into<T: Copy>(words: &[u64], values: &[T], out: &mut [MaybeUninit<T>]) -> usize {
    let mut n = 0;
    for (&word, values) in words.iter().zip(values.chunks(64)) {
        let mut bits = word;
        while bits != 0 {
            out[n].write(values[bits.trailing_zeros() as usize]);
            n += 1;
            bits &= bits - 1;
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand_chacha::ChaCha8Rng;
    use rand_core::{RngCore, SeedableRng};

    fn random_density(rng: &mut ChaCha8Rng, len: usize, percent_set: u32) -> Density {
        let mut density = Density::default();
        for i in 0..len {
            density.push();
            if rng.next_u32() % 100 < percent_set {
                density.mark(i);
            }
        }
        density
    }

    #[test]
    fn select_equals_filter_and_total_counts_set_bits() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        // Lengths around word and parallel-chunk boundaries, the parallel path included.
        let lens = [0, 1, 63, 64, 65, 1000, SELECT_PARALLEL_MIN + 64 * 300 + 7];
        for len in lens {
            for percent_set in [0, 3, 50, 100] {
                let density = random_density(&mut rng, len, percent_set);
                let values: Vec<u64> = (0..len as u64).map(|v| v * 7 + 1).collect();
                let expected: Vec<u64> = (0..len)
                    .filter(|&i| density.get(i))
                    .map(|i| values[i])
                    .collect();
                assert_eq!(density.total(), expected.len(), "len {len}, {percent_set}%");
                assert_eq!(
                    density.select(&values),
                    expected,
                    "len {len}, {percent_set}%"
                );
            }
        }
    }

    #[test]
    fn marking_twice_counts_once() {
        let mut density = Density::default();
        for _ in 0..3 {
            density.push();
        }
        density.mark(1);
        density.mark(1);
        assert_eq!(density.total(), 1);
        assert!(!density.get(0) && density.get(1) && !density.get(2));
    }

    #[test]
    fn extending_an_empty_density_copies_it() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let other = random_density(&mut rng, 100, 50);
        for merge_first in [false, true] {
            let mut density = Density::default();
            density.extend(&other, merge_first);
            assert_eq!(density, other);
        }
    }
}
