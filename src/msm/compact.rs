//! Streamed chunks of only the points whose scalar is not zero.
//!
//! The real PoRep circuit's aux values are about half zeros (51% of a 32 GiB partition's;
//! docs/benchmarks/vram-budgets.md), and the L, A and B MSMs over them are their upload where
//! their bases stream: a zero scalar's base crosses the bus for nothing. Where the host
//! holds an MSM's scalars and knows which are zero ([`HostScalars`]), each streamed chunk is
//! instead the next run of points whose scalar is not zero: their bases and scalars are
//! gathered on the host and uploaded, the zeros' never. The sum is the same: a zero scalar
//! adds nothing.
//!
//! Everything here works on bit sets (which values are not zero, which a query selects), 64
//! values a word: finding the chunks is a pass of popcounts, not a read of the scalars.

use std::ops::Range;

use blstrs::Scalar;
use ff::Field;

use crate::error::{Error, Result};
use crate::field::GpuField;
use crate::gpu::on_copy_threads;
use crate::recorded::Density;

/// Part of an MSM's scalars on the host: `values`, all of them or those `selection`
/// selects, in order; `nonzero` marks the values that are not zero.
#[derive(Clone, Copy)]
pub struct Segment<'a> {
    pub values: &'a [Scalar],
    pub nonzero: &'a Density,
    pub selection: Option<&'a Density>,
}

impl Segment<'_> {
    /// The MSM's points this segment gives.
    fn len(&self) -> usize {
        self.selection.map_or(self.values.len(), Density::total)
    }

    /// Word `w` of the selection (all ones where there is none), clipped to the values.
    fn selected_word(&self, w: usize) -> u64 {
        match self.selection {
            Some(selection) => selection.words()[w],
            None => {
                let tail = self.values.len() - w * 64;
                if tail >= 64 {
                    u64::MAX
                } else {
                    (1u64 << tail) - 1
                }
            }
        }
    }

    /// The index of the value at point `rank` of this segment (`values.len()` past its last).
    fn value_at(&self, rank: usize) -> usize {
        let Some(selection) = self.selection else {
            return rank;
        };
        let mut left = rank;
        for (w, &word) in selection.words().iter().enumerate() {
            let ones = word.count_ones() as usize;
            if left < ones {
                let mut word = word;
                for _ in 0..left {
                    word &= word - 1;
                }
                return w * 64 + word.trailing_zeros() as usize;
            }
            left -= ones;
        }
        self.values.len()
    }
}

/// An MSM's scalars as the host holds them: up to two segments, in order (the A and B
/// queries' scalars are their inputs, then their aux values; L's, the aux values alone).
#[derive(Clone, Copy)]
pub struct HostScalars<'a> {
    pub segments: [Option<Segment<'a>>; 2],
}

impl<'a> HostScalars<'a> {
    /// All of `values`, `nonzero` marking those that are not zero.
    pub fn all(values: &'a [Scalar], nonzero: &'a Density) -> Self {
        HostScalars {
            segments: [
                Some(Segment {
                    values,
                    nonzero,
                    selection: None,
                }),
                None,
            ],
        }
    }

    /// Whether every segment's bit sets are over its values (the MSM would panic or gather
    /// wrong points otherwise), and the segments give `len` points.
    pub(super) fn check(&self, len: usize) -> Result<()> {
        for segment in self.segments.iter().flatten() {
            let values = segment.values.len();
            let sets = [Some(segment.nonzero), segment.selection];
            if let Some(set) = sets.into_iter().flatten().find(|set| set.len() != values) {
                return Err(Error::InvalidInput(format!(
                    "a bit set of {} over {values} scalars",
                    set.len()
                )));
            }
        }
        if self.len() != len {
            return Err(Error::InvalidInput(format!(
                "an MSM of {len} scalars whose host view holds {}",
                self.len()
            )));
        }
        Ok(())
    }

    /// The MSM's points: the segments' together.
    pub fn len(&self) -> usize {
        self.segments.iter().flatten().map(Segment::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Whether `zeros` of `points` are enough zeros for a gather to pay: one in eight.
pub(super) fn worth_compacting(zeros: usize, points: usize) -> bool {
    zeros > 0 && zeros * 8 >= points
}

/// The values of `values` that are not zero, as a bit set (on several threads: a 2^27
/// vector is 4 GiB to read).
pub fn nonzero(values: &[Scalar]) -> Result<Density> {
    /// Words a thread's piece takes.
    const PIECE_WORDS: usize = 4096;
    let mut words = vec![0u64; values.len().div_ceil(64)];
    let pieces = words
        .chunks_mut(PIECE_WORDS)
        .zip(values.chunks(PIECE_WORDS * 64));
    on_copy_threads(pieces, |(words, values)| {
        for (word, run) in words.iter_mut().zip(values.chunks(64)) {
            *word = run
                .iter()
                .enumerate()
                .filter(|(_, v)| !bool::from(v.is_zero()))
                .fold(0, |word, (i, _)| word | 1 << i);
        }
        Ok(())
    })?;
    Density::from_words(words, values.len())
        .ok_or_else(|| Error::Internal("a bit set of other than one word per 64 values".into()))
}

/// A run of a segment's words: the values of its streamed part in `words`, the first of
/// which is point `position` of the MSM; `nonzero` of them not zero.
#[derive(Clone, Debug)]
struct Block {
    segment: usize,
    /// Values `values.start..values.end` of the segment (within whole words but the ends).
    values: Range<usize>,
    position: usize,
    nonzero: usize,
    /// Its first non-zero point's place in its chunk.
    offset: usize,
}

/// The streamed part of one MSM cut into chunks of points whose scalar is not zero.
pub(super) struct Compaction {
    blocks: Vec<Block>,
    /// Per chunk, its blocks and its points (scalars not zero).
    chunks: Vec<(Range<usize>, usize)>,
    /// Points of the streamed part with a zero scalar: never uploaded.
    pub skipped: usize,
}

/// Values a block spans at most: small enough that its non-zero ones always fit a chunk of
/// `cap`, large enough that the blocks are few.
fn block_values(cap: usize) -> usize {
    (cap / 64).clamp(1, 64) * 64
}

impl Compaction {
    /// The points `from..` of `scalars` in chunks of at most `cap` points whose scalar is not
    /// zero; `None` where too few of them are zero to pay for a gather
    /// ([`worth_compacting`]).
    pub fn new(scalars: &HostScalars<'_>, from: usize, cap: usize) -> Option<Compaction> {
        let span = block_values(cap);
        let mut blocks = Vec::new();
        let mut segment_start = 0;
        for (s, segment) in scalars.segments.iter().enumerate() {
            let Some(segment) = segment else { continue };
            let len = segment.len();
            let rank = from.saturating_sub(segment_start).min(len);
            let mut position = segment_start + rank;
            let mut at = segment.value_at(rank);
            while at < segment.values.len() {
                let end = ((at / span + 1) * span).min(segment.values.len());
                let (selected, nonzero) = count(segment, at..end);
                if selected > 0 {
                    blocks.push(Block {
                        segment: s,
                        values: at..end,
                        position,
                        nonzero,
                        offset: 0,
                    });
                }
                position += selected;
                at = end;
            }
            segment_start += len;
        }
        let points = scalars.len().saturating_sub(from);
        let nonzero: usize = blocks.iter().map(|b| b.nonzero).sum();
        if !worth_compacting(points - nonzero, points) {
            return None;
        }
        let mut chunks = Vec::new();
        let (mut first, mut held) = (0, 0);
        for (b, block) in blocks.iter_mut().enumerate() {
            if held + block.nonzero > cap {
                chunks.push((first..b, held));
                (first, held) = (b, 0);
            }
            block.offset = held;
            held += block.nonzero;
        }
        if held > 0 {
            chunks.push((first..blocks.len(), held));
        }
        chunks.retain(|(_, held)| *held > 0);
        Some(Compaction {
            blocks,
            chunks,
            skipped: points - nonzero,
        })
    }

    /// Per chunk, its points.
    pub fn chunk_lens(&self) -> impl Iterator<Item = usize> + '_ {
        self.chunks.iter().map(|(_, held)| *held)
    }

    /// Bytes `at..at + out.len()` of chunk `c`'s scalars or bases: what a staging piece of
    /// them holds.
    pub fn fill(
        &self,
        c: usize,
        scalars: &HostScalars<'_>,
        what: Gathered<'_>,
        at: usize,
        out: &mut [u8],
    ) -> Result<()> {
        let size = match what {
            Gathered::Scalars => SCALAR_BYTES,
            Gathered::Bases { size, .. } => size,
        };
        let (blocks, held) = self.chunks[c].clone();
        let blocks = &self.blocks[blocks];
        let end = at + out.len();
        if out.is_empty() || end > held * size {
            return match out.is_empty() {
                true => Ok(()),
                false => Err(Error::Internal("a staging piece past its chunk".into())),
            };
        }
        let first = at / size;
        // The block holding the piece's first point.
        let b = blocks.partition_point(|block| block.offset + block.nonzero <= first);
        for block in &blocks[b..] {
            let segment = scalars.segments[block.segment]
                .as_ref()
                .ok_or_else(|| Error::Internal("a block of a missing segment".into()))?;
            let skip = first.saturating_sub(block.offset);
            for (point, (value, position)) in kept(segment, block).enumerate().skip(skip) {
                let bytes = match what {
                    Gathered::Scalars => segment.values.get(value).map(scalar_bytes),
                    Gathered::Bases { bytes, size } => {
                        bytes.get(position * size..(position + 1) * size)
                    }
                }
                .ok_or_else(|| Error::Internal("a gathered point out of its MSM".into()))?;
                let lo = (block.offset + point) * size;
                let (from, to) = (lo.max(at), (lo + size).min(end));
                out[from - at..to - at].copy_from_slice(&bytes[from - lo..to - lo]);
                if to == end {
                    return Ok(());
                }
            }
        }
        Err(Error::Internal(
            "a chunk holds fewer points than counted".into(),
        ))
    }
}

/// What a compacted chunk uploads: its points' scalars, or their bases (`bytes`: every
/// base of the MSM, `size` bytes each).
#[derive(Clone, Copy)]
pub(super) enum Gathered<'b> {
    Scalars,
    Bases { bytes: &'b [u8], size: usize },
}

const SCALAR_BYTES: usize = std::mem::size_of::<Scalar>();

fn scalar_bytes(scalar: &Scalar) -> &[u8] {
    Scalar::as_bytes(std::slice::from_ref(scalar))
}

/// A job's scalars as the host holds them and its streamed part cut by them.
pub(super) struct Compacted<'a> {
    pub scalars: HostScalars<'a>,
    pub compaction: Compaction,
}

/// The values `values` of `segment` spans that it selects, and those of them not zero.
fn count(segment: &Segment<'_>, values: Range<usize>) -> (usize, usize) {
    let (mut selected, mut nonzero) = (0, 0);
    for w in values.start / 64..values.end.div_ceil(64) {
        let word = segment.selected_word(w) & within(w, &values);
        selected += word.count_ones() as usize;
        nonzero += (word & segment.nonzero.words()[w]).count_ones() as usize;
    }
    (selected, nonzero)
}

/// The bits of word `w` inside `values`.
fn within(w: usize, values: &Range<usize>) -> u64 {
    let (lo, hi) = (w * 64, w * 64 + 64);
    let below = |end: usize| -> u64 {
        match end {
            e if e <= lo => 0,
            e if e >= hi => u64::MAX,
            e => (1u64 << (e - lo)) - 1,
        }
    };
    below(values.end) & !below(values.start)
}

/// A block's points whose scalar is not zero, in order: (its value's index in the segment,
/// its point in the MSM).
fn kept<'s>(
    segment: &'s Segment<'_>,
    block: &'s Block,
) -> impl Iterator<Item = (usize, usize)> + 's {
    let mut position = block.position;
    (block.values.start / 64..block.values.end.div_ceil(64)).flat_map(move |w| {
        let selected = segment.selected_word(w) & within(w, &block.values);
        let first = position;
        position += selected.count_ones() as usize;
        let mut kept = selected & segment.nonzero.words()[w];
        std::iter::from_fn(move || {
            (kept != 0).then(|| {
                let bit = kept.trailing_zeros();
                kept &= kept - 1;
                let before = (selected & ((1u64 << bit) - 1)).count_ones() as usize;
                (w * 64 + bit as usize, first + before)
            })
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::field::samples::{sample_scalars, ScalarMix};

    /// A chunk's bytes, filled in pieces of every size around a point's (so that pieces
    /// split points), equal the non-zero points themselves, in order: two segments, the
    /// second a selection, from several starting points, chunk caps and sizes of point.
    #[test]
    fn pieces_of_a_chunk_are_its_non_zero_points() {
        let inputs = sample_scalars(1, 70, ScalarMix::Porep);
        let values = sample_scalars(2, 3000, ScalarMix::Porep);
        let pick = sample_scalars(3, values.len(), ScalarMix::HalfBits);
        let (inputs_nonzero, values_nonzero) =
            (nonzero(&inputs).unwrap(), nonzero(&values).unwrap());
        let selection = nonzero(&pick).unwrap();
        let host = HostScalars {
            segments: [
                Some(Segment {
                    values: &inputs,
                    nonzero: &inputs_nonzero,
                    selection: None,
                }),
                Some(Segment {
                    values: &values,
                    nonzero: &values_nonzero,
                    selection: Some(&selection),
                }),
            ],
        };
        let points: Vec<Scalar> = inputs
            .iter()
            .chain(
                values
                    .iter()
                    .zip(&pick)
                    .filter(|(_, p)| !bool::from(p.is_zero()))
                    .map(|(v, _)| v),
            )
            .copied()
            .collect();
        assert_eq!(points.len(), host.len());
        // Bases stand in as 40 bytes a point, each its position's bytes.
        let size = 40;
        let bases: Vec<u8> = (0..points.len())
            .flat_map(|p| (p as u64).to_le_bytes().repeat(5))
            .collect();
        for (from, cap) in [(0, 64), (5, 100), (70, 256), (71, 1000), (1500, 128)] {
            let compaction = Compaction::new(&host, from, cap).expect("half of them zero");
            let kept: Vec<usize> = (from..points.len())
                .filter(|&p| !bool::from(points[p].is_zero()))
                .collect();
            assert_eq!(compaction.skipped, points.len() - from - kept.len());
            let lens: Vec<usize> = compaction.chunk_lens().collect();
            assert_eq!(lens.iter().sum::<usize>(), kept.len());
            assert!(
                lens.iter().all(|&len| (1..=cap).contains(&len)),
                "{lens:?} over {cap}"
            );
            let mut next = kept.iter();
            for (c, &len) in lens.iter().enumerate() {
                let chunk: Vec<usize> = next.by_ref().take(len).copied().collect();
                let want_scalars: Vec<u8> = chunk
                    .iter()
                    .flat_map(|&p| scalar_bytes(&points[p]).to_vec())
                    .collect();
                let want_bases: Vec<u8> = chunk
                    .iter()
                    .flat_map(|&p| bases[p * size..(p + 1) * size].to_vec())
                    .collect();
                let gathered_bases = Gathered::Bases {
                    bytes: &bases,
                    size,
                };
                for (what, want) in [
                    (Gathered::Scalars, want_scalars),
                    (gathered_bases, want_bases),
                ] {
                    for piece in [1, 7, 31, 32, 33, 39, 40, 41, 1000] {
                        let mut got = vec![0u8; want.len()];
                        for (k, out) in got.chunks_mut(piece).enumerate() {
                            compaction.fill(c, &host, what, k * piece, out).unwrap();
                        }
                        assert!(
                            got == want,
                            "chunk {c} from {from}, cap {cap}, pieces of {piece}"
                        );
                    }
                }
            }
            // Past the chunk: refused, not read out of bounds.
            let mut out = [0u8; 1];
            let past = lens[0] * SCALAR_BYTES;
            assert!(compaction
                .fill(0, &host, Gathered::Scalars, past, &mut out)
                .is_err());
        }
    }
}
