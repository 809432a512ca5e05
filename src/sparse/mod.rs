//! a = A·z, b = B·z, c = C·z of a recorded constraint system
//! ([`RecordedSystem`]) on the device: the matrices stay resident beside the parameters'
//! bases, or stream through two pairs of buffers where the budget has no room for them
//! ([`DeviceMatrices`]); each proof uploads only its inputs (the aux variables are already there for the L MSM), and the products land in
//! the vectors the H step transforms, with no host round trip. The A and B queries' scalars
//! are gathered there too, from index lists made once from the circuit's densities, instead
//! of being selected on the host and uploaded.
//!
//! [`SparseKernels`] runs `shaders/sparse.wgsl` ([`program`]); the CPU path is
//! `RecordedSystem::products`, behind the engine seam.

pub mod program;

use std::ops::Range;
use std::sync::Arc;

use blstrs::Scalar;
use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::field::GpuField;
use crate::gpu::pool::{BufferPool, Reservation};
use crate::gpu::vector::PartLayout;
use crate::gpu::{Compiled, DeviceVector, GpuContext, WideMul};
use crate::recorded::Density;
use crate::recorded::{CsrView, RecordedSystem, AUX, MINUS_ONE, PLUS_ONE};
use program::{SparseEntry, SparseParams, SparseProgram, AUX_PARTS};

/// Bytes of one entry on the device: its column and its coefficient index.
const ENTRY_BYTES: u64 = 8;

/// Most bytes of one streamed chunk's row starts, and of its entries: streamed matrices keep
/// two pairs of buffers this size (the next chunk uploads while this one computes).
pub const STREAM_CHUNK_BYTES: u64 = 64 << 20;

/// Most device bytes [`SparseKernels::stream`] keeps: two pairs of chunk buffers.
pub const STREAM_BYTES: u64 = 4 * STREAM_CHUNK_BYTES;

/// The sparse-product kernel of one wide-multiply path.
pub struct SparseKernels {
    gpu: GpuContext,
    program: Compiled<SparseProgram>,
    /// Cap on one buffer's bytes below the device's binding limit (tests lower it to cut
    /// matrices into several chunks).
    max_binding_bytes: Option<u64>,
}

/// One chunk of a matrix's rows, or of a query's gathered variables, within one part of the
/// output vector.
struct Chunk {
    /// The output part it writes.
    part: usize,
    params: SparseParams,
    /// `params` on the device, made once: every proof dispatches the same chunks.
    uniform: wgpu::Buffer,
    data: ChunkData,
}

/// Where a chunk's row starts (or gathered columns) and entries are.
enum ChunkData {
    /// In buffers of its own on the device.
    Resident {
        words: wgpu::Buffer,
        /// Its entries' columns, then their coefficients (a placeholder for a gather).
        entries: wgpu::Buffer,
    },
    /// In host memory, uploaded into a stream buffer pair for each use: the row starts
    /// relative to the chunk (or the gathered columns), and the range of its matrix's
    /// entries (none for a gather).
    Streamed {
        words: Vec<u32>,
        entries: Option<(usize, std::ops::Range<usize>)>,
    },
}

/// The device bytes of a circuit's matrices, resident and streamed, as a plan is told them
/// (zero: not known).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MatrixBytes {
    /// [`SparseKernels::upload`]'s.
    pub resident: u64,
    /// [`SparseKernels::stream`]'s, at most.
    pub streamed: u64,
}

impl MatrixBytes {
    pub fn of(system: &RecordedSystem) -> Self {
        MatrixBytes {
            resident: SparseKernels::bytes_of(system),
            streamed: SparseKernels::stream_bytes_of(system),
        }
    }
}

/// How the vectors the kernels read and write are cut into parts: as the H step and the
/// MSMs store them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProductLayouts {
    /// a, b, c: the H step's domain.
    pub products: PartLayout,
    /// The aux values (the L MSM's scalars).
    pub aux: PartLayout,
    /// The A and B queries' scalars.
    pub a: PartLayout,
    pub b: PartLayout,
}

/// A circuit's A, B, C and its queries' index lists for the device, resident there or
/// streamed through two pairs of buffers at each use; what the device holds is counted
/// against the VRAM budget until dropped.
pub struct DeviceMatrices {
    /// A's, B's and C's chunks.
    matrices: [Vec<Chunk>; 3],
    /// The A and B queries' gathers.
    queries: [Vec<Chunk>; 2],
    /// Where the matrices stream: the system whose entries they upload and the two pairs of
    /// buffers (row starts, entries) chunks take in turn.
    stream: Option<Stream>,
    values: Vec<Scalar>,
    inputs: usize,
    query_lengths: [usize; 2],
    layouts: ProductLayouts,
    bytes: u64,
    _budget: Option<Reservation>,
}

struct Stream {
    system: Arc<RecordedSystem>,
    buffers: [[wgpu::Buffer; 2]; 2],
}

impl DeviceMatrices {
    /// Device bytes the matrices take (resident) or stream through.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Whether the matrices stream from host memory at each use.
    pub fn streamed(&self) -> bool {
        self.stream.is_some()
    }

    /// Lengths of the A and B queries' scalars.
    pub fn query_lengths(&self) -> [usize; 2] {
        self.query_lengths
    }
}

/// Whether matrices get buffers of their own or stream.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Placement {
    Resident,
    Streamed,
}

impl SparseKernels {
    pub fn new(gpu: &GpuContext, wide_mul: WideMul) -> Result<Self> {
        Ok(SparseKernels {
            gpu: gpu.clone(),
            program: gpu.compile(wide_mul)?,
            max_binding_bytes: None,
        })
    }

    /// Cuts matrices into chunks of at most `bytes` per buffer, below the device's own
    /// limit: the multi-chunk path, tested at small sizes.
    pub fn with_binding_limit(mut self, bytes: u64) -> Self {
        self.max_binding_bytes = Some(bytes);
        self
    }

    pub fn compile_time(&self) -> std::time::Duration {
        self.program.compile_time
    }

    fn binding_limit(&self) -> u64 {
        self.gpu
            .limits
            .max_storage_buffer_binding_size
            .min(self.gpu.limits.max_buffer_size)
            .min(self.max_binding_bytes.unwrap_or(u64::MAX))
    }

    /// Device bytes of `system`'s matrices as [`upload`](Self::upload) stores them.
    pub fn bytes_of(system: &RecordedSystem) -> u64 {
        let entries: u64 = system
            .csr()
            .iter()
            .map(|m| m.columns.len() as u64 * ENTRY_BYTES + m.row_starts.len() as u64 * 4)
            .sum();
        let [a, b] = query_lengths(system);
        entries + (a + b) as u64 * 4
    }

    /// Device bytes [`stream`](Self::stream) keeps for `system`, at most: two pairs of
    /// buffers, each as long as the longest chunk could be (a device whose binding limit
    /// is below [`STREAM_CHUNK_BYTES`] keeps less).
    pub fn stream_bytes_of(system: &RecordedSystem) -> u64 {
        let limit = STREAM_CHUNK_BYTES;
        let [a, b] = query_lengths(system);
        let words = ((system.rows() + 1).max(a).max(b) as u64 * 4).clamp(16, limit);
        let csr = system.csr();
        let entries = csr.iter().map(|m| m.columns.len()).max().unwrap_or(0);
        2 * (words + (entries as u64 * ENTRY_BYTES).clamp(16, limit))
    }

    /// Uploads `system`'s matrices for products and gathers between vectors of `layouts`,
    /// counted against `pool`'s budget when given ([`Error::VramBudget`] when it has no
    /// room).
    pub fn upload(
        &self,
        system: &Arc<RecordedSystem>,
        layouts: ProductLayouts,
        pool: Option<&BufferPool>,
    ) -> Result<DeviceMatrices> {
        self.prepare(system, layouts, pool, Placement::Resident)
    }

    /// `system`'s matrices as [`upload`](Self::upload) makes them, but kept in host memory
    /// and streamed through two pairs of buffers of at most [`STREAM_CHUNK_BYTES`] at each
    /// use: [`STREAM_BYTES`] of the budget at most instead of [`bytes_of`](Self::bytes_of),
    /// for a proof's bytes uploaded again (the ~6.7 GB of a 2^27 FilecoinLike's, a quarter
    /// of a second at the ~25 GB/s measured on the H200, against seconds of products and
    /// selection on the CPU).
    pub fn stream(
        &self,
        system: &Arc<RecordedSystem>,
        layouts: ProductLayouts,
        pool: Option<&BufferPool>,
    ) -> Result<DeviceMatrices> {
        self.prepare(system, layouts, pool, Placement::Streamed)
    }

    fn prepare(
        &self,
        system: &Arc<RecordedSystem>,
        layouts: ProductLayouts,
        pool: Option<&BufferPool>,
        placement: Placement,
    ) -> Result<DeviceMatrices> {
        let rows = system.rows();
        let [a_len, b_len] = query_lengths(system);
        for (what, len, layout) in [
            ("rows", rows, layouts.products),
            ("aux values", system.aux, layouts.aux),
            ("A scalars", a_len, layouts.a),
            ("B scalars", b_len, layouts.b),
        ] {
            if len > layout.elements() {
                return Err(Error::InvalidInput(format!(
                    "{len} {what} do not fit a vector of 2^{}",
                    layout.log_n
                )));
            }
        }
        if layouts.aux.parts() > AUX_PARTS {
            return Err(Error::TooLarge {
                what: "the aux vector's parts for the sparse products",
                needed: layouts.aux.parts() as u64,
                limit: AUX_PARTS as u64,
            });
        }
        if let Some(cap) = self.gpu.loop_cap() {
            let multiplication = Scalar::mul_loop_trips(self.program.wide_mul);
            for (name, matrix) in ["A", "B", "C"].into_iter().zip(system.csr()) {
                if let Some((row, trips)) = row_over_loop_cap(&matrix, multiplication, cap) {
                    return Err(Error::LoopCap {
                        what: format!("row {row} of {name}"),
                        trips,
                        limit: cap,
                    });
                }
            }
        }
        let inputs_at = u32::try_from(system.values().len())
            .map_err(|_| Error::Internal("over 2^32 coefficient values".into()))?;
        let limit = match placement {
            Placement::Resident => self.binding_limit(),
            Placement::Streamed => self.binding_limit().min(STREAM_CHUNK_BYTES),
        };
        // Each chunk as it lies in host memory: (part, rows or values, first output, the row
        // starts or gathered columns, the matrix and range of its entries).
        type HostChunk = (usize, usize, usize, Vec<u32>, Option<(usize, Range<usize>)>);
        let mut host: [Vec<HostChunk>; 5] = Default::default();
        // Every chunk's rows first (a binary search each), then their row starts made on
        // every core: at 2^27 they are 390 million words.
        let mut spans = Vec::new();
        for (m, matrix) in system.csr().into_iter().enumerate() {
            for (part, range) in part_ranges(layouts.products, rows) {
                let mut start = range.start;
                while start < range.end {
                    let stop = chunk_end(&matrix, start, range.end, limit)?;
                    spans.push((m, part, start - range.start, start..stop));
                    start = stop;
                }
            }
        }
        let csr = system.csr();
        for (m, part, out_first, rows) in spans {
            let starts = &csr[m].row_starts;
            let base = starts[rows.start];
            let row_starts = starts[rows.start..=rows.end]
                .par_iter()
                .with_min_len(1 << 16)
                .map(|&s| (s - base) as u32)
                .collect();
            let entries = base as usize..starts[rows.end] as usize;
            host[m].push((part, rows.len(), out_first, row_starts, Some((m, entries))));
        }
        let most = (limit / 4) as usize;
        for (q, (columns, layout)) in query_columns(system)
            .into_iter()
            .zip([layouts.a, layouts.b])
            .enumerate()
        {
            for (part, range) in part_ranges(layout, columns.len()) {
                for start in range.clone().step_by(most) {
                    let stop = (start + most).min(range.end);
                    let words = columns[start..stop].to_vec();
                    host[3 + q].push((part, stop - start, start - range.start, words, None));
                }
            }
        }
        let entries_of = |entries: &Option<(usize, Range<usize>)>| match entries {
            Some((_, range)) => range.len(),
            None => 0,
        };
        // One stream buffer pair: the longest chunk's row starts and its entries.
        let longest = |bytes: &dyn Fn(&HostChunk) -> u64| {
            host.iter().flatten().map(bytes).max().unwrap_or(0).max(16)
        };
        let pair_bytes = [
            longest(&|c: &HostChunk| c.3.len() as u64 * 4),
            longest(&|c: &HostChunk| entries_of(&c.4) as u64 * ENTRY_BYTES),
        ];
        let bytes = match placement {
            Placement::Resident => Self::bytes_of(system),
            Placement::Streamed => 2 * pair_bytes.iter().sum::<u64>(),
        };
        let budget = match pool {
            Some(pool) => Some(pool.set_aside(bytes).ok_or_else(|| Error::VramBudget {
                what: "the constraint matrices".into(),
                needed: bytes,
                budget: pool.budget(),
            })?),
            None => None,
        };
        let placeholder = self.gpu.storage_buffer("no entries", &[0; 8])?;
        let make = || -> Result<_> {
            let stream = match placement {
                Placement::Resident => None,
                Placement::Streamed => {
                    let [words, entries] = pair_bytes;
                    let pair = || -> Result<[wgpu::Buffer; 2]> {
                        Ok([
                            self.gpu.empty_storage_buffer("streamed rows", words)?,
                            self.gpu.empty_storage_buffer("streamed entries", entries)?,
                        ])
                    };
                    Some(Stream {
                        system: system.clone(),
                        buffers: [pair()?, pair()?],
                    })
                }
            };
            let mut chunks: [Vec<Chunk>; 5] = Default::default();
            for (out, host) in chunks.iter_mut().zip(host) {
                for (part, count, out_first, words, entries) in host {
                    let params = SparseParams {
                        count: count as u32,
                        out_first: out_first as u32,
                        inputs_at,
                        aux_part_log: layouts.aux.part_len().trailing_zeros(),
                        coefficients_at: entries_of(&entries) as u32,
                        _pad: [0; 3],
                    };
                    let data = match placement {
                        Placement::Streamed => ChunkData::Streamed { words, entries },
                        Placement::Resident => ChunkData::Resident {
                            words: self.words("matrix rows", &words)?,
                            entries: match entries {
                                Some((m, range)) if !range.is_empty() => {
                                    let buffer = self.gpu.empty_storage_buffer(
                                        "matrix entries",
                                        range.len() as u64 * ENTRY_BYTES,
                                    )?;
                                    self.upload_entries(&buffer, &csr[m], range)?;
                                    buffer
                                }
                                _ => placeholder.clone(),
                            },
                        },
                    };
                    out.push(Chunk {
                        part,
                        params,
                        uniform: self
                            .gpu
                            .uniform_buffer("sparse parameters", bytemuck::bytes_of(&params))?,
                        data,
                    });
                }
            }
            let [a, b, c, query_a, query_b] = chunks;
            Ok(DeviceMatrices {
                matrices: [a, b, c],
                queries: [query_a, query_b],
                stream,
                values: system.values().to_vec(),
                inputs: system.inputs,
                query_lengths: [a_len, b_len],
                layouts,
                bytes,
                _budget: budget,
            })
        };
        self.gpu
            .allocating("the constraint matrices", bytes, make)?
    }

    /// A storage buffer of `words` (at least one binding's minimum).
    /// The entries `range` of `matrix` into `buffer` as the kernels read them: the columns,
    /// then the coefficients. Straight from the matrix, with no interleaved copy of every
    /// entry in fresh host memory first (8 GB at 2^27).
    fn upload_entries(
        &self,
        buffer: &wgpu::Buffer,
        matrix: &CsrView<'_>,
        range: Range<usize>,
    ) -> Result<()> {
        let columns = &matrix.columns[range.clone()];
        self.gpu.upload(buffer, 0, bytemuck::cast_slice(columns))?;
        self.gpu.upload(
            buffer,
            columns.len() as u64 * 4,
            bytemuck::cast_slice(&matrix.coefficients[range]),
        )
    }

    fn words(&self, label: &str, words: &[u32]) -> Result<wgpu::Buffer> {
        if words.is_empty() {
            return self.gpu.storage_buffer(label, &[0; 4]);
        }
        self.gpu.storage_buffer(label, bytemuck::cast_slice(words))
    }

    /// Writes A·z, B·z and C·z into `out` (zeroed, of the products' layout), z the `inputs`
    /// then `aux` (the vector the L MSM reads). Returns the submission to wait on.
    pub fn products(
        &self,
        matrices: &DeviceMatrices,
        inputs: &[Scalar],
        aux: &DeviceVector<Scalar>,
        out: [&DeviceVector<Scalar>; 3],
    ) -> Result<wgpu::SubmissionIndex> {
        let layout = matrices.layouts.products;
        if out.iter().any(|v| v.layout() != layout) {
            return Err(Error::Internal(
                "the products' vectors are not of the matrices' layout".into(),
            ));
        }
        let chunks = matrices.matrices.iter().zip(out);
        self.run(SparseEntry::Rows, matrices, inputs, aux, chunks)
    }

    /// Writes one product (`matrix`: 0 for A·z, 1 for B·z, 2 for C·z) into `out`, zeroed, as
    /// [`products`](Self::products) writes it. Returns the submission to wait on.
    pub fn product(
        &self,
        matrices: &DeviceMatrices,
        matrix: usize,
        inputs: &[Scalar],
        aux: &DeviceVector<Scalar>,
        out: &DeviceVector<Scalar>,
    ) -> Result<wgpu::SubmissionIndex> {
        let chunks = matrices
            .matrices
            .get(matrix)
            .ok_or_else(|| Error::Internal(format!("no matrix {matrix} of three")))?;
        if out.layout() != matrices.layouts.products {
            return Err(Error::Internal(
                "the product's vector is not of the matrices' layout".into(),
            ));
        }
        self.run(
            SparseEntry::Rows,
            matrices,
            inputs,
            aux,
            std::iter::once((chunks, out)),
        )
    }

    /// Writes one query's scalars into `out` (zeroed, of the query's layout): for `query` 0
    /// (A) the inputs, then the aux values A's density marks; for 1 (B) the inputs and aux
    /// values B's densities mark. Returns the submission to wait on.
    pub fn query(
        &self,
        matrices: &DeviceMatrices,
        query: usize,
        inputs: &[Scalar],
        aux: &DeviceVector<Scalar>,
        out: &DeviceVector<Scalar>,
    ) -> Result<wgpu::SubmissionIndex> {
        let layout = [matrices.layouts.a, matrices.layouts.b]
            .get(query)
            .copied()
            .ok_or_else(|| Error::Internal(format!("no query {query} of two")))?;
        if out.layout() != layout {
            return Err(Error::Internal(
                "the query scalars' vector is not of the matrices' layout".into(),
            ));
        }
        let chunks = std::iter::once((&matrices.queries[query], out));
        self.run(SparseEntry::Gather, matrices, inputs, aux, chunks)
    }

    /// Dispatches `entry` over every chunk, each writing its part of its output vector.
    /// Resident chunks go in one submission; a streamed chunk is uploaded into a stream
    /// buffer pair, the pairs in turn, and submitted alone, so that the next upload into a
    /// pair queues after the dispatch that last read it (one queue runs in order).
    fn run<'c>(
        &self,
        entry: SparseEntry,
        matrices: &DeviceMatrices,
        inputs: &[Scalar],
        aux: &DeviceVector<Scalar>,
        chunks: impl Iterator<Item = (&'c Vec<Chunk>, &'c DeviceVector<Scalar>)> + Clone,
    ) -> Result<wgpu::SubmissionIndex> {
        if inputs.len() != matrices.inputs {
            return Err(Error::InvalidInput(format!(
                "{} inputs for matrices of {}",
                inputs.len(),
                matrices.inputs
            )));
        }
        if aux.layout() != matrices.layouts.aux {
            return Err(Error::Internal(
                "the aux vector is not of the matrices' layout".into(),
            ));
        }
        let mut table = matrices.values.clone();
        table.extend_from_slice(inputs);
        let table = self
            .gpu
            .storage_buffer("coefficients and inputs", Scalar::as_bytes(&table))?;
        let aux_parts: Vec<&wgpu::Buffer> = (0..AUX_PARTS)
            .map(|p| &aux.parts()[p.min(aux.parts().len() - 1)])
            .collect();
        let chunks: Vec<(&Chunk, &DeviceVector<Scalar>)> = chunks
            .clone()
            .flat_map(|(chunks, out)| chunks.iter().map(move |c| (c, out)))
            .collect();
        let mut encoder = self.gpu.device.create_command_encoder(&Default::default());
        let mut submission = None;
        for (i, (chunk, out)) in chunks.iter().enumerate() {
            let (words, entries) = match (&chunk.data, &matrices.stream) {
                (ChunkData::Resident { words, entries }, _) => (words, entries),
                (ChunkData::Streamed { words, entries }, Some(stream)) => {
                    let [words_buffer, entries_buffer] = &stream.buffers[i % 2];
                    self.gpu
                        .upload(words_buffer, 0, bytemuck::cast_slice(words))?;
                    if let Some((m, range)) = entries {
                        let matrix = &stream.system.csr()[*m];
                        self.upload_entries(entries_buffer, matrix, range.clone())?;
                    }
                    (words_buffer, entries_buffer)
                }
                (ChunkData::Streamed { .. }, None) => {
                    return Err(Error::Internal("a streamed chunk without streams".into()))
                }
            };
            {
                let mut pass = encoder.begin_compute_pass(&Default::default());
                pass.set_pipeline(self.program.pipeline(entry));
                let mut buffers = vec![&chunk.uniform, words, entries, &table];
                buffers.extend(&aux_parts);
                buffers.push(&out.parts()[chunk.part]);
                let resources: Vec<_> = buffers.iter().map(|b| b.as_entire_binding()).collect();
                let group = self.gpu.bind_group(&self.program, &resources);
                let (x, y) = self.gpu.grid(entry, chunk.params.count as u64);
                pass.set_bind_group(0, &group, &[]);
                pass.dispatch_workgroups(x, y, 1);
            }
            if matches!(chunk.data, ChunkData::Streamed { .. }) {
                let done = std::mem::replace(
                    &mut encoder,
                    self.gpu.device.create_command_encoder(&Default::default()),
                );
                submission = Some(self.gpu.submit([done.finish()]));
            }
        }
        let submission = match submission {
            Some(last) => last,
            None => self.gpu.submit([encoder.finish()]),
        };
        aux.used_by(&submission);
        for (_, out) in chunks {
            out.used_by(&submission);
        }
        Ok(submission)
    }
}

/// The parts of `layout` and the range of the first `len` elements each holds.
fn part_ranges(
    layout: PartLayout,
    len: usize,
) -> impl Iterator<Item = (usize, std::ops::Range<usize>)> {
    (0..layout.parts()).filter_map(move |part| {
        let first = part * layout.part_len();
        let end = (first + layout.part_len()).min(len);
        (first < end).then_some((part, first..end))
    })
}

/// Lengths of the A and B queries' scalars.
pub fn query_lengths(system: &RecordedSystem) -> [usize; 2] {
    let [a_aux, b_inputs, b_aux] = system.densities();
    [
        system.inputs + a_aux.total(),
        b_inputs.total() + b_aux.total(),
    ]
}

/// The tagged columns of the A and B queries' scalars, in the order of the bases.
fn query_columns(system: &RecordedSystem) -> [Vec<u32>; 2] {
    let [a_aux, b_inputs, b_aux] = system.densities();
    let mut a: Vec<u32> = (0..system.inputs as u32).collect();
    marked_columns(a_aux, AUX, &mut a);
    let mut b = Vec::new();
    marked_columns(b_inputs, 0, &mut b);
    marked_columns(b_aux, AUX, &mut b);
    [a, b]
}

/// Appends to `out` the index of every variable `density` marks, tagged `tag`: on every
/// core, each block of words writing into its place, found by the blocks' counts.
fn marked_columns(density: &Density, tag: u32, out: &mut Vec<u32>) {
    const BLOCK_WORDS: usize = 1 << 12;
    let blocks: Vec<&[u64]> = density.words().chunks(BLOCK_WORDS).collect();
    let counts: Vec<usize> = blocks
        .par_iter()
        .map(|words| words.iter().map(|w| w.count_ones() as usize).sum())
        .collect();
    let first = out.len();
    out.resize(first + counts.iter().sum::<usize>(), 0);
    let mut places = Vec::with_capacity(blocks.len());
    let mut rest = &mut out[first..];
    for &count in &counts {
        let (place, after) = rest.split_at_mut(count);
        places.push(place);
        rest = after;
    }
    places
        .into_par_iter()
        .zip(blocks)
        .enumerate()
        .for_each(|(block, (place, words))| {
            let mut slots = place.iter_mut();
            for (w, &word) in words.iter().enumerate() {
                let at = ((block * BLOCK_WORDS + w) * 64) as u32;
                let mut bits = word;
                while bits != 0 {
                    if let Some(slot) = slots.next() {
                        *slot = (at + bits.trailing_zeros()) | tag;
                    }
                    bits &= bits - 1;
                }
            }
        });
}

/// The first row of `matrix` whose loop in `sparse_rows` makes more than `cap` trips, with
/// its trips: one an entry, the exit, and a multiplication's for each coefficient but ±1.
fn row_over_loop_cap(matrix: &CsrView<'_>, multiplication: u32, cap: u32) -> Option<(usize, u64)> {
    matrix
        .row_starts
        .windows(2)
        .map(|row| {
            let coefficients = &matrix.coefficients[row[0] as usize..row[1] as usize];
            let multiplied = coefficients
                .iter()
                .filter(|&&c| c != PLUS_ONE && c != MINUS_ONE)
                .count() as u64;
            1 + coefficients.len() as u64 + multiplied * multiplication as u64
        })
        .enumerate()
        .find(|&(_, trips)| trips > cap as u64)
}

/// The end of the chunk of rows from `start` (below `end`) whose row starts and entries each
/// fit a binding of `limit` bytes.
fn chunk_end(matrix: &CsrView<'_>, start: usize, end: usize, limit: u64) -> Result<usize> {
    let max_entries = limit / ENTRY_BYTES;
    let max_rows = (limit / 4).saturating_sub(1).min(u32::MAX as u64) as usize;
    let base = matrix.row_starts[start];
    let last = end.min(start + max_rows);
    // The last row boundary whose entries from `base` fit.
    let fits = matrix.row_starts[start + 1..=last].partition_point(|&s| s - base <= max_entries);
    if fits == 0 {
        return Err(Error::TooLarge {
            what: "one constraint's entries",
            needed: (matrix.row_starts[start + 1] - base) * ENTRY_BYTES,
            limit,
        });
    }
    Ok(start + fits)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand_chacha::ChaCha8Rng;
    use rand_core::{RngCore, SeedableRng};

    /// Marked columns in blocks on every core are the marked bits in order, tagged, after
    /// what the vector held: across block edges, a partial last word, none and all marked.
    #[test]
    fn marked_columns_are_the_marked_bits_in_order() {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        for bits in [
            0usize,
            1,
            63,
            64,
            65,
            4096 * 64,
            4096 * 64 + 5,
            3 * 4096 * 64 + 130,
        ] {
            for fill in ["random", "none", "all"] {
                let words: Vec<u64> = (0..bits.div_ceil(64))
                    .map(|w| {
                        let word = match fill {
                            "random" => rng.next_u64(),
                            "none" => 0,
                            _ => u64::MAX,
                        };
                        let valid = (bits - w * 64).min(64);
                        if valid == 64 {
                            word
                        } else {
                            word & ((1 << valid) - 1)
                        }
                    })
                    .collect();
                let density = Density::from_words(words, bits).unwrap();
                for tag in [0, AUX] {
                    let mut out = vec![5, 6];
                    marked_columns(&density, tag, &mut out);
                    let expected: Vec<u32> = [5, 6]
                        .into_iter()
                        .chain(
                            (0..bits)
                                .filter(|&i| density.get(i))
                                .map(|i| i as u32 | tag),
                        )
                        .collect();
                    assert!(out == expected, "{bits} bits, {fill}, tag {tag:#x}");
                }
            }
        }
    }
}
