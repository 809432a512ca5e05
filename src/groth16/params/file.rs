//! The layout of a `.params` file: mapped or opened as a regular file only, cut into its
//! sections with every count checked against the file's length before anything is
//! allocated.

use std::fs::{File, OpenOptions};
use std::io;
use std::ops::Range;
use std::path::Path;

use bellperson::groth16::VerifyingKey;
use blstrs::Bls12;
use memmap2::Mmap;

use super::points::{decode_all, decode_point, FilePoint, G1_SIZE, G2_SIZE};
use super::{ParamsShape, PointCheck};
use crate::error::{Error, Result};
use crate::files::file_kind;

/// Maps a parameters file.
pub(super) fn map_file(path: &Path) -> Result<Mmap> {
    let io_error = |source| Error::ParamsIo {
        path: path.display().to_string(),
        source,
    };
    let file = open_regular(path).map_err(io_error)?;
    // SAFETY: the map is read-only and its users drop it before they return. Another process
    // truncating or rewriting the file meanwhile would break the slice's contract; that is
    // the caveat of every mmap reader (bellperson's included) and parameter files are
    // written once.
    unsafe { Mmap::map(&file) }.map_err(io_error)
}

/// Opens a parameters file, which must be a regular file (it is mapped): anything else is
/// refused before it is read, and a FIFO is opened without waiting for a writer.
pub(super) fn open_regular(path: &Path) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, libc::O_NONBLOCK);
    let file = options.open(path)?;
    let kind = file.metadata()?.file_type();
    if !kind.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "it is {}, not a regular file (parameters are memory-mapped)",
                file_kind(&kind)
            ),
        ));
    }
    Ok(file)
}

/// A `.params` file cut into its parts, every count checked against the length.
pub(super) struct Sections<'a> {
    pub(super) alpha_g1: &'a [u8],
    pub(super) beta_g1: &'a [u8],
    pub(super) beta_g2: &'a [u8],
    pub(super) gamma_g2: &'a [u8],
    pub(super) delta_g1: &'a [u8],
    pub(super) delta_g2: &'a [u8],
    pub(super) ic: &'a [u8],
    pub(super) h: &'a [u8],
    pub(super) l: &'a [u8],
    pub(super) a: &'a [u8],
    pub(super) b_g1: &'a [u8],
    pub(super) b_g2: &'a [u8],
}

impl<'a> Sections<'a> {
    pub(super) fn split(bytes: &'a [u8]) -> Result<Self> {
        let parts = Parts::walk(bytes.len() as u64, |offset| {
            // The walk only asks for counts inside the file.
            let at = offset as usize;
            Ok(u32::from_be_bytes([
                bytes[at],
                bytes[at + 1],
                bytes[at + 2],
                bytes[at + 3],
            ]))
        })?;
        // Every range lies inside `bytes`, so its ends fit in `usize`.
        let part = |range: &Range<u64>| &bytes[range.start as usize..range.end as usize];
        Ok(Sections {
            alpha_g1: part(&parts.alpha_g1),
            beta_g1: part(&parts.beta_g1),
            beta_g2: part(&parts.beta_g2),
            gamma_g2: part(&parts.gamma_g2),
            delta_g1: part(&parts.delta_g1),
            delta_g2: part(&parts.delta_g2),
            ic: part(&parts.ic),
            h: part(&parts.h),
            l: part(&parts.l),
            a: part(&parts.a),
            b_g1: part(&parts.b_g1),
            b_g2: part(&parts.b_g2),
        })
    }
}

impl Sections<'_> {
    /// bellperson checks the verifying key fully in either mode and lets its six single
    /// points be the identity.
    pub(super) fn verifying_key(&self) -> Result<VerifyingKey<Bls12>> {
        fn single<P: FilePoint>(section: &'static str, bytes: &[u8]) -> Result<P> {
            decode_point(section, 0, bytes, PointCheck::Checked, false)
        }
        Ok(VerifyingKey {
            alpha_g1: single("vk.alpha_g1", self.alpha_g1)?,
            beta_g1: single("vk.beta_g1", self.beta_g1)?,
            beta_g2: single("vk.beta_g2", self.beta_g2)?,
            gamma_g2: single("vk.gamma_g2", self.gamma_g2)?,
            delta_g1: single("vk.delta_g1", self.delta_g1)?,
            delta_g2: single("vk.delta_g2", self.delta_g2)?,
            ic: decode_all("vk.ic", self.ic, PointCheck::Checked)?,
        })
    }
}

/// Where each part of a `.params` file lies (the points of a counted section, after its
/// count).
pub(super) struct Parts {
    alpha_g1: Range<u64>,
    beta_g1: Range<u64>,
    beta_g2: Range<u64>,
    gamma_g2: Range<u64>,
    delta_g1: Range<u64>,
    delta_g2: Range<u64>,
    ic: Range<u64>,
    h: Range<u64>,
    l: Range<u64>,
    a: Range<u64>,
    b_g1: Range<u64>,
    b_g2: Range<u64>,
}

impl Parts {
    /// Walks a file of `len` bytes, reading the count at an offset with `count_at`: every
    /// part must be there and nothing may follow, so a bad count fails before any
    /// allocation.
    pub(super) fn walk(len: u64, count_at: impl FnMut(u64) -> Result<u32>) -> Result<Self> {
        let mut walk = Walk {
            len,
            pos: 0,
            count_at,
        };
        let parts = Parts {
            alpha_g1: walk.take("vk.alpha_g1", G1_SIZE as u64)?,
            beta_g1: walk.take("vk.beta_g1", G1_SIZE as u64)?,
            beta_g2: walk.take("vk.beta_g2", G2_SIZE as u64)?,
            gamma_g2: walk.take("vk.gamma_g2", G2_SIZE as u64)?,
            delta_g1: walk.take("vk.delta_g1", G1_SIZE as u64)?,
            delta_g2: walk.take("vk.delta_g2", G2_SIZE as u64)?,
            ic: walk.counted("vk.ic", G1_SIZE)?,
            h: walk.counted("h", G1_SIZE)?,
            l: walk.counted("l", G1_SIZE)?,
            a: walk.counted("a", G1_SIZE)?,
            b_g1: walk.counted("b_g1", G1_SIZE)?,
            b_g2: walk.counted("b_g2", G2_SIZE)?,
        };
        if walk.pos != len {
            return Err(Error::ParamsFormat(format!(
                "{} trailing bytes after section b_g2 (it ends at offset {}, the file has {len} bytes)",
                len - walk.pos,
                walk.pos,
            )));
        }
        Ok(parts)
    }

    pub(super) fn shape(&self) -> ParamsShape {
        let points =
            |range: &Range<u64>, size: usize| ((range.end - range.start) / size as u64) as usize;
        ParamsShape {
            ic: points(&self.ic, G1_SIZE),
            h: points(&self.h, G1_SIZE),
            l: points(&self.l, G1_SIZE),
            a: points(&self.a, G1_SIZE),
            b_g1: points(&self.b_g1, G1_SIZE),
            b_g2: points(&self.b_g2, G2_SIZE),
        }
    }
}

/// A walk through a file's parts, each checked to be there before it is handed out.
pub(super) struct Walk<F> {
    len: u64,
    pos: u64,
    count_at: F,
}

impl<F: FnMut(u64) -> Result<u32>> Walk<F> {
    fn take(&mut self, section: &'static str, size: u64) -> Result<Range<u64>> {
        if size > self.len - self.pos {
            return Err(Error::ParamsTruncated {
                section,
                offset: self.pos,
                needed: size,
                available: self.len,
            });
        }
        self.pos += size;
        Ok(self.pos - size..self.pos)
    }

    /// A big-endian `u32` count and that many points of `size` bytes.
    fn counted(&mut self, section: &'static str, size: usize) -> Result<Range<u64>> {
        let at = self.take(section, 4)?.start;
        let count = (self.count_at)(at)?;
        self.take(section, u64::from(count) * size as u64)
    }
}
