//! The file of a recorded constraint system.
//!
//! Format, version 2 (version 1 held another trace), all integers little-endian:
//!
//! | bytes | what |
//! |---|---|
//! | 8 | magic `WG16MTRX` |
//! | 4, 4 | version, 0 |
//! | 32 | key digest |
//! | 8 × 10 | trace, inputs, aux, constraints, values, A / B / C entries, identity bytes, 0 |
//! | identity, padded to 8 | the key's circuit identity (UTF-8, for messages) |
//! | 8 × words | densities: A aux (aux bits), B inputs (inputs bits), B aux (aux bits) |
//! | 32 × values | coefficient values, canonical `to_repr` |
//! | A, B, C | each: row starts (u64 × rows + 1), columns (u32), coefficients (u32) |
//! | 32 | BLAKE3 of every byte before it |
//!
//! Rows are `constraints + inputs` (the `input * 0 = 0` ones last), so every length follows
//! from the header and is checked against the file's size before anything is allocated.

use std::fs::File;
use std::io::{self, Read, Write};

use blstrs::Scalar;
use ff::{Field, PrimeField};
use rayon::prelude::*;

use super::{Density, Matrix, RecordedKey, RecordedSystem, Trace, AUX, MINUS_ONE, PLUS_ONE};

pub(super) const MAGIC: [u8; 8] = *b"WG16MTRX";
pub(super) const VERSION: u32 = 2;
pub(super) const HEADER_BYTES: usize = 128;
pub(super) const DIGEST_BYTES: u64 = 32;
/// Longest circuit identity kept in a file (it only names the circuit in messages).
const MAX_IDENTITY: usize = 1024;
/// Bytes read (and hashed) at a time.
const CHUNK: usize = 16 << 20;

impl RecordedSystem {
    /// Writes the system for `key` into `sink`, all but the closing digest.
    pub(super) fn encode(&self, sink: &mut Sink<'_>, key: &RecordedKey) -> io::Result<()> {
        let identity = identity_bytes(key.circuit());
        let header = Header {
            key: key.digest(),
            trace: self.trace.0,
            inputs: self.inputs as u64,
            aux: self.aux as u64,
            constraints: self.constraints as u64,
            values: self.values.len() as u64,
            entries: [&self.a, &self.b, &self.c].map(|m| m.columns.len() as u64),
            identity: identity.len() as u64,
        };
        sink.put(&header.encode())?;
        sink.put(identity)?;
        sink.put(&[0; 8][..padding(identity.len())])?;
        for density in [
            &self.a_aux_density,
            &self.b_input_density,
            &self.b_aux_density,
        ] {
            sink.put_u64s(density.words())?;
        }
        for values in self.values.chunks(1 << 16) {
            let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_repr()).collect();
            sink.put(&bytes)?;
        }
        for matrix in [&self.a, &self.b, &self.c] {
            sink.put_u64s(&matrix.row_starts)?;
            sink.put_u32s(&matrix.columns)?;
            sink.put_u32s(&matrix.coefficients)?;
        }
        Ok(())
    }

    /// The system in `file` of `len` bytes, written for `key`: every length checked against
    /// `len` before anything is allocated, the digest against the content, every index
    /// against the counts. An error says why, for a message naming the file.
    pub(super) fn decode(
        file: File,
        len: u64,
        key: &RecordedKey,
    ) -> std::result::Result<Self, String> {
        let failed = |reason: String| reason;
        let io_failed = |e: io::Error| format!("cannot read it: {e}");
        let mut source = Source {
            file,
            hasher: blake3::Hasher::new(),
        };
        let mut header = [0u8; HEADER_BYTES];
        if len < HEADER_BYTES as u64 {
            return Err(failed(format!(
                "truncated: {len} bytes, shorter than its {HEADER_BYTES}-byte header"
            )));
        }
        source.fill(&mut header).map_err(io_failed)?;
        let header = Header::decode(&header).map_err(failed)?;
        let layout = header.layout().map_err(failed)?;
        if layout.total != len {
            return Err(failed(format!(
                "{} {len} bytes, its header announces {}",
                if len < layout.total {
                    "truncated:"
                } else {
                    "trailing bytes:"
                },
                layout.total
            )));
        }
        let mut identity = vec![0u8; header.identity as usize + padding(header.identity as usize)];
        source.fill(&mut identity).map_err(io_failed)?;
        identity.truncate(header.identity as usize);
        if header.key != key.digest() {
            return Err(failed(format!(
                "made for another circuit or parameters ({:?}), not {:?}",
                String::from_utf8_lossy(&identity),
                key.circuit()
            )));
        }

        let mut density = |bits: usize| -> std::result::Result<(Vec<u64>, usize), String> {
            let mut words = vec![0u64; bits.div_ceil(64)];
            source.fill_u64s(&mut words).map_err(io_failed)?;
            Ok((words, bits))
        };
        let densities = [
            density(layout.aux)?,
            density(layout.inputs)?,
            density(layout.aux)?,
        ];
        let mut value_bytes = vec![0u8; layout.values * 32];
        source.fill(&mut value_bytes).map_err(io_failed)?;
        let mut matrix = |entries: usize| -> std::result::Result<Matrix, String> {
            let mut m = Matrix {
                row_starts: vec![0; layout.rows + 1],
                columns: vec![0; entries],
                coefficients: vec![0; entries],
            };
            source.fill_u64s(&mut m.row_starts).map_err(io_failed)?;
            source.fill_u32s(&mut m.columns).map_err(io_failed)?;
            source.fill_u32s(&mut m.coefficients).map_err(io_failed)?;
            Ok(m)
        };
        let (a, b, c) = (
            matrix(layout.entries[0])?,
            matrix(layout.entries[1])?,
            matrix(layout.entries[2])?,
        );
        let digest = source.hasher.finalize();
        let mut stored = [0u8; DIGEST_BYTES as usize];
        source.file.read_exact(&mut stored).map_err(io_failed)?;
        if digest != blake3::Hash::from(stored) {
            return Err(failed(
                "damaged: its content does not match its digest".into(),
            ));
        }

        let density = |(words, bits), name: &str| {
            Density::from_words(words, bits)
                .ok_or_else(|| failed(format!("its {name} density has bits past its variables")))
        };
        let [a_aux, b_input, b_aux] = densities;
        let a_aux_density = density(a_aux, "A aux")?;
        let b_input_density = density(b_input, "B input")?;
        let b_aux_density = density(b_aux, "B aux")?;
        let values = decode_values(&value_bytes).map_err(failed)?;
        for (name, matrix) in [("A", &a), ("B", &b), ("C", &c)] {
            check_matrix(matrix, &layout).map_err(|why| failed(format!("matrix {name}: {why}")))?;
        }
        Ok(RecordedSystem {
            inputs: layout.inputs,
            aux: layout.aux,
            constraints: layout.constraints,
            a,
            b,
            c,
            values,
            a_aux_density,
            b_input_density,
            b_aux_density,
            trace: Trace(header.trace),
            part_sizes: Default::default(),
        })
    }
}

/// The file being written, and the digest of what went into it.
pub(super) struct Sink<'a> {
    pub(super) out: &'a mut dyn Write,
    pub(super) hasher: blake3::Hasher,
}

impl Sink<'_> {
    fn put(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.hasher.update(bytes);
        self.out.write_all(bytes)
    }

    fn put_u64s(&mut self, values: &[u64]) -> io::Result<()> {
        if cfg!(target_endian = "little") {
            return self.put(bytemuck::cast_slice(values));
        }
        for chunk in values.chunks(CHUNK / 8) {
            let bytes: Vec<u8> = chunk.iter().flat_map(|v| v.to_le_bytes()).collect();
            self.put(&bytes)?;
        }
        Ok(())
    }

    fn put_u32s(&mut self, values: &[u32]) -> io::Result<()> {
        if cfg!(target_endian = "little") {
            return self.put(bytemuck::cast_slice(values));
        }
        for chunk in values.chunks(CHUNK / 4) {
            let bytes: Vec<u8> = chunk.iter().flat_map(|v| v.to_le_bytes()).collect();
            self.put(&bytes)?;
        }
        Ok(())
    }
}

/// The file being read, and the digest of what came out of it.
struct Source {
    file: File,
    hasher: blake3::Hasher,
}

impl Source {
    /// Fills `bytes` from the file in large reads, each hashed (on several threads) while the
    /// next is read: one hashing thread held the read to ~340 MB/s.
    fn fill(&mut self, bytes: &mut [u8]) -> io::Result<()> {
        let mut chunks = bytes.chunks_mut(CHUNK);
        let Some(mut previous) = chunks.next() else {
            return Ok(());
        };
        self.file.read_exact(previous)?;
        for next in chunks {
            let (hasher, file) = (&mut self.hasher, &mut self.file);
            let ((), read) = rayon::join(
                || {
                    hasher.update_rayon(previous);
                },
                || file.read_exact(next),
            );
            read?;
            previous = next;
        }
        self.hasher.update_rayon(previous);
        Ok(())
    }

    fn fill_u64s(&mut self, values: &mut [u64]) -> io::Result<()> {
        self.fill(bytemuck::cast_slice_mut(values))?;
        if cfg!(target_endian = "big") {
            values.iter_mut().for_each(|v| *v = u64::from_le(*v));
        }
        Ok(())
    }

    fn fill_u32s(&mut self, values: &mut [u32]) -> io::Result<()> {
        self.fill(bytemuck::cast_slice_mut(values))?;
        if cfg!(target_endian = "big") {
            values.iter_mut().for_each(|v| *v = u32::from_le(*v));
        }
        Ok(())
    }
}

/// The fixed part of a file, after which every length follows.
struct Header {
    key: [u8; 32],
    trace: u64,
    inputs: u64,
    aux: u64,
    constraints: u64,
    values: u64,
    entries: [u64; 3],
    identity: u64,
}

impl Header {
    fn encode(&self) -> [u8; HEADER_BYTES] {
        let mut bytes = [0u8; HEADER_BYTES];
        bytes[..8].copy_from_slice(&MAGIC);
        bytes[8..12].copy_from_slice(&VERSION.to_le_bytes());
        bytes[16..48].copy_from_slice(&self.key);
        let fields = [
            self.trace,
            self.inputs,
            self.aux,
            self.constraints,
            self.values,
            self.entries[0],
            self.entries[1],
            self.entries[2],
            self.identity,
            0,
        ];
        for (slot, field) in bytes[48..].chunks_exact_mut(8).zip(fields) {
            slot.copy_from_slice(&field.to_le_bytes());
        }
        bytes
    }

    fn decode(bytes: &[u8; HEADER_BYTES]) -> std::result::Result<Self, String> {
        if bytes[..8] != MAGIC {
            return Err("not a recorded constraint system file (wrong magic)".into());
        }
        let word = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap_or([0; 4]));
        let version = word(8);
        if version != VERSION {
            return Err(format!(
                "format version {version}, this build reads version {VERSION}"
            ));
        }
        if word(12) != 0 {
            return Err("reserved header bytes are set".into());
        }
        let mut fields = [0u64; 10];
        for (field, slot) in fields.iter_mut().zip(bytes[48..].chunks_exact(8)) {
            *field = u64::from_le_bytes(slot.try_into().unwrap_or([0; 8]));
        }
        let [trace, inputs, aux, constraints, values, a, b, c, identity, reserved] = fields;
        if reserved != 0 {
            return Err("reserved header bytes are set".into());
        }
        let mut key = [0u8; 32];
        key.copy_from_slice(&bytes[16..48]);
        Ok(Header {
            key,
            trace,
            inputs,
            aux,
            constraints,
            values,
            entries: [a, b, c],
            identity,
        })
    }

    /// The counts as this machine's sizes, and the file length they add up to; refused
    /// when they cannot describe matrices (an overflow, too many variables for a column).
    fn layout(&self) -> std::result::Result<Layout, String> {
        let impossible = || "impossible counts in its header".to_string();
        let size = |n: u64| usize::try_from(n).map_err(|_| impossible());
        if self.inputs == 0 {
            return Err("no inputs (ONE is always one)".into());
        }
        if self.inputs > u64::from(AUX) || self.aux > u64::from(AUX) {
            return Err(impossible());
        }
        if self.values < 2 {
            return Err("fewer than 2 coefficient values (ONE and -ONE come first)".into());
        }
        if self.identity > MAX_IDENTITY as u64 {
            return Err(format!(
                "a circuit identity of {} bytes (at most {MAX_IDENTITY})",
                self.identity
            ));
        }
        let rows = self
            .constraints
            .checked_add(self.inputs)
            .ok_or_else(impossible)?;
        let words = |bits: u64| bits.div_ceil(64) * 8;
        let mut total = Some(HEADER_BYTES as u64 + self.identity.next_multiple_of(8))
            .and_then(|t| t.checked_add(words(self.aux) * 2))
            .and_then(|t| t.checked_add(words(self.inputs)))
            .and_then(|t| t.checked_add(self.values.checked_mul(32)?))
            .and_then(|t| t.checked_add(DIGEST_BYTES));
        for entries in self.entries {
            total = total
                .and_then(|t| t.checked_add(rows.checked_add(1)?.checked_mul(8)?))
                .and_then(|t| t.checked_add(entries.checked_mul(8)?));
        }
        let total = total.ok_or_else(impossible)?;
        Ok(Layout {
            inputs: size(self.inputs)?,
            aux: size(self.aux)?,
            constraints: size(self.constraints)?,
            rows: size(rows)?,
            values: size(self.values)?,
            entries: [
                size(self.entries[0])?,
                size(self.entries[1])?,
                size(self.entries[2])?,
            ],
            total,
        })
    }
}

/// A header's counts, checked to fit this machine and to add up to `total` bytes.
struct Layout {
    inputs: usize,
    aux: usize,
    constraints: usize,
    rows: usize,
    values: usize,
    entries: [usize; 3],
    total: u64,
}

/// The identity a file keeps: at most [`MAX_IDENTITY`] bytes, cut at a character boundary.
fn identity_bytes(circuit: &str) -> &[u8] {
    let mut end = circuit.len().min(MAX_IDENTITY);
    while !circuit.is_char_boundary(end) {
        end -= 1;
    }
    &circuit.as_bytes()[..end]
}

fn padding(len: usize) -> usize {
    len.next_multiple_of(8) - len
}

/// The coefficient table: canonical scalars, ONE and -ONE first (the products skip their
/// multiplications by index).
fn decode_values(bytes: &[u8]) -> std::result::Result<Vec<Scalar>, String> {
    let decoded: Vec<Option<Scalar>> = bytes
        .par_chunks_exact(32)
        .with_min_len(4096)
        .map(|repr| {
            let mut r = [0u8; 32];
            r.copy_from_slice(repr);
            Option::from(Scalar::from_repr(r))
        })
        .collect();
    let mut values = Vec::with_capacity(decoded.len());
    for (i, value) in decoded.into_iter().enumerate() {
        values.push(value.ok_or_else(|| format!("coefficient value {i} is not canonical"))?);
    }
    if values.get(PLUS_ONE as usize) != Some(&Scalar::ONE)
        || values.get(MINUS_ONE as usize) != Some(&-Scalar::ONE)
    {
        return Err("its first coefficient values are not ONE and -ONE".into());
    }
    Ok(values)
}

/// Row starts from 0 up to the entries, never down; every column a variable and every
/// coefficient a value of the file.
fn check_matrix(matrix: &Matrix, layout: &Layout) -> std::result::Result<(), String> {
    let starts = &matrix.row_starts;
    if starts.first() != Some(&0) || starts.last() != Some(&(matrix.columns.len() as u64)) {
        return Err(format!(
            "its row starts run from {:?} to {:?}, not from 0 to its {} entries",
            starts.first(),
            starts.last(),
            matrix.columns.len()
        ));
    }
    if let Some(row) = starts
        .par_windows(2)
        .with_min_len(1 << 16)
        .position_any(|w| w[0] > w[1])
    {
        return Err(format!("row {row} ends before it starts"));
    }
    let (inputs, aux) = (layout.inputs as u32, layout.aux as u32);
    let variable = |c: u32| {
        if c & AUX != 0 {
            c & !AUX < aux
        } else {
            c < inputs
        }
    };
    if let Some(i) = matrix
        .columns
        .par_iter()
        .with_min_len(1 << 16)
        .position_any(|&c| !variable(c))
    {
        return Err(format!(
            "entry {i} names variable {:#x}, past its {} inputs and {} aux",
            matrix.columns[i], layout.inputs, layout.aux
        ));
    }
    let values = layout.values as u64;
    if let Some(i) = matrix
        .coefficients
        .par_iter()
        .with_min_len(1 << 16)
        .position_any(|&v| u64::from(v) >= values)
    {
        return Err(format!(
            "entry {i} names coefficient value {}, past its {} values",
            matrix.coefficients[i], layout.values
        ));
    }
    Ok(())
}
