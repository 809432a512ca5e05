//! a = A·z, b = B·z, c = C·z of a recorded constraint system
//! ([`RecordedSystem`]) on the device: the matrices
//! stay resident beside the parameters' bases ([`ResidentMatrices`]), each proof uploads only
//! its inputs (the aux variables are already there for the L MSM), and the products land in
//! the vectors the H step transforms, with no host round trip. The A and B queries' scalars
//! are gathered there too, from index lists made once from the circuit's densities, instead
//! of being selected on the host and uploaded.
//!
//! [`SparseKernels`] runs `shaders/sparse.wgsl` ([`program`]); the CPU path is
//! `RecordedSystem::products`, behind the engine seam.

pub mod program;

use blstrs::Scalar;

use crate::error::{Error, Result};
use crate::field::GpuField;
use crate::gpu::pool::{BufferPool, Reservation};
use crate::gpu::vector::PartLayout;
use crate::gpu::{Compiled, DeviceVector, GpuContext, WideMul};
use crate::recorded::Density;
use crate::recorded::{CsrView, RecordedSystem, AUX, MINUS_ONE, PLUS_ONE};
use program::{SparseEntry, SparseParams, SparseProgram, AUX_PARTS};

/// Bytes of one entry on the device: (column, coefficient index).
const ENTRY_BYTES: u64 = 8;

/// The sparse-product kernel of one wide-multiply path.
pub struct SparseKernels {
    gpu: GpuContext,
    program: Compiled<SparseProgram>,
    /// Cap on one buffer's bytes below the device's binding limit (tests lower it to cut
    /// matrices into several chunks).
    max_binding_bytes: Option<u64>,
}

/// One chunk of a matrix's rows, or of a query's gathered variables, on the device, within
/// one part of the output vector.
struct Chunk {
    /// The output part it writes.
    part: usize,
    params: SparseParams,
    /// `params` on the device, made once: every proof dispatches the same chunks.
    uniform: wgpu::Buffer,
    /// Row starts, or the gathered columns.
    words: wgpu::Buffer,
    /// The entries of its rows (a placeholder for a gather).
    entries: wgpu::Buffer,
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

/// A circuit's A, B, C and its queries' index lists on the device, counted against the VRAM
/// budget until dropped.
pub struct ResidentMatrices {
    /// A's, B's and C's chunks.
    matrices: [Vec<Chunk>; 3],
    /// The A and B queries' gathers.
    queries: [Vec<Chunk>; 2],
    values: Vec<Scalar>,
    inputs: usize,
    query_lengths: [usize; 2],
    layouts: ProductLayouts,
    bytes: u64,
    _budget: Option<Reservation>,
}

impl ResidentMatrices {
    /// Device bytes the matrices take.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Lengths of the A and B queries' scalars.
    pub fn query_lengths(&self) -> [usize; 2] {
        self.query_lengths
    }
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

    /// Uploads `matrices` for products and gathers between vectors of `layouts`, counted
    /// against `pool`'s budget when given ([`Error::VramBudget`] when it has no room).
    pub fn upload(
        &self,
        system: &RecordedSystem,
        layouts: ProductLayouts,
        pool: Option<&BufferPool>,
    ) -> Result<ResidentMatrices> {
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
        let chunk =
            |part: usize, count: usize, out_first: usize, words, entries| -> Result<Chunk> {
                let params = SparseParams {
                    count: count as u32,
                    out_first: out_first as u32,
                    inputs_at,
                    aux_part_log: layouts.aux.part_len().trailing_zeros(),
                };
                Ok(Chunk {
                    part,
                    params,
                    uniform: self
                        .gpu
                        .uniform_buffer("sparse parameters", bytemuck::bytes_of(&params))?,
                    words,
                    entries,
                })
            };
        let bytes = Self::bytes_of(system);
        let budget = match pool {
            Some(pool) => Some(pool.set_aside(bytes).ok_or_else(|| Error::VramBudget {
                what: "the constraint matrices".into(),
                needed: bytes,
                budget: pool.budget(),
            })?),
            None => None,
        };
        let limit = self.binding_limit();
        let placeholder = self.gpu.storage_buffer("no entries", &[0; 8])?;
        let upload = || -> Result<_> {
            let matrix_chunks = |matrix: CsrView<'_>| -> Result<Vec<Chunk>> {
                let mut chunks = Vec::new();
                for (part, range) in part_ranges(layouts.products, rows) {
                    let mut start = range.start;
                    while start < range.end {
                        let stop = chunk_end(&matrix, start, range.end, limit)?;
                        let base = matrix.row_starts[start];
                        let row_starts: Vec<u32> = matrix.row_starts[start..=stop]
                            .iter()
                            .map(|&s| (s - base) as u32)
                            .collect();
                        let entries = base as usize..matrix.row_starts[stop] as usize;
                        let pairs: Vec<u32> = matrix.columns[entries.clone()]
                            .iter()
                            .zip(&matrix.coefficients[entries])
                            .flat_map(|(&column, &coefficient)| [column, coefficient])
                            .collect();
                        let entries = if pairs.is_empty() {
                            placeholder.clone()
                        } else {
                            self.words("matrix entries", &pairs)?
                        };
                        let words = self.words("matrix rows", &row_starts)?;
                        chunks.push(chunk(
                            part,
                            stop - start,
                            start - range.start,
                            words,
                            entries,
                        )?);
                        start = stop;
                    }
                }
                Ok(chunks)
            };
            let query_chunks = |columns: Vec<u32>, layout: PartLayout| -> Result<Vec<Chunk>> {
                let mut chunks = Vec::new();
                let most = (limit / 4) as usize;
                for (part, range) in part_ranges(layout, columns.len()) {
                    for start in range.clone().step_by(most) {
                        let stop = (start + most).min(range.end);
                        let words = self.words("query columns", &columns[start..stop])?;
                        let entries = placeholder.clone();
                        chunks.push(chunk(
                            part,
                            stop - start,
                            start - range.start,
                            words,
                            entries,
                        )?);
                    }
                }
                Ok(chunks)
            };
            let [a, b, c] = system.csr();
            let [a_columns, b_columns] = query_columns(system);
            Ok(ResidentMatrices {
                matrices: [matrix_chunks(a)?, matrix_chunks(b)?, matrix_chunks(c)?],
                queries: [
                    query_chunks(a_columns, layouts.a)?,
                    query_chunks(b_columns, layouts.b)?,
                ],
                values: system.values().to_vec(),
                inputs: system.inputs,
                query_lengths: [a_len, b_len],
                layouts,
                bytes,
                _budget: budget,
            })
        };
        self.gpu
            .allocating("the constraint matrices", bytes, upload)?
    }

    /// A storage buffer of `words` (at least one binding's minimum).
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
        matrices: &ResidentMatrices,
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
        matrices: &ResidentMatrices,
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

    /// Writes the A and B queries' scalars into `out` (zeroed, of the queries' layouts): the
    /// inputs, then the aux values A's density marks; the inputs and aux values B's
    /// densities mark. Returns the submission to wait on.
    pub fn queries(
        &self,
        matrices: &ResidentMatrices,
        inputs: &[Scalar],
        aux: &DeviceVector<Scalar>,
        out: [&DeviceVector<Scalar>; 2],
    ) -> Result<wgpu::SubmissionIndex> {
        let layouts = &matrices.layouts;
        if out[0].layout() != layouts.a || out[1].layout() != layouts.b {
            return Err(Error::Internal(
                "the query scalars' vectors are not of the matrices' layouts".into(),
            ));
        }
        let chunks = matrices.queries.iter().zip(out);
        self.run(SparseEntry::Gather, matrices, inputs, aux, chunks)
    }

    /// Dispatches `entry` over every chunk, each writing its part of its output vector.
    fn run<'c>(
        &self,
        entry: SparseEntry,
        matrices: &ResidentMatrices,
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
        {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor::default());
            pass.set_pipeline(self.program.pipeline(entry));
            for (chunk, out) in &chunks {
                let mut buffers = vec![&chunk.uniform, &chunk.words, &chunk.entries, &table];
                buffers.extend(&aux_parts);
                buffers.push(&out.parts()[chunk.part]);
                let resources: Vec<_> = buffers.iter().map(|b| b.as_entire_binding()).collect();
                let group = self.gpu.bind_group(&self.program, &resources);
                let (x, y) = self.gpu.grid(entry, chunk.params.count as u64);
                pass.set_bind_group(0, &group, &[]);
                pass.dispatch_workgroups(x, y, 1);
            }
        }
        let submission = self.gpu.submit([encoder.finish()]);
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
    let marked = |density: &Density, tag: u32, out: &mut Vec<u32>| {
        for (w, &word) in density.words().iter().enumerate() {
            let mut bits = word;
            while bits != 0 {
                out.push(((w * 64) as u32 + bits.trailing_zeros()) | tag);
                bits &= bits - 1;
            }
        }
    };
    let mut a: Vec<u32> = (0..system.inputs as u32).collect();
    marked(a_aux, AUX, &mut a);
    let mut b = Vec::new();
    marked(b_inputs, 0, &mut b);
    marked(b_aux, AUX, &mut b);
    [a, b]
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
