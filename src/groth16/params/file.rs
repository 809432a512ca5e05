//! The layout of a `.params` file: opened as a regular file only and read by offset, never
//! mapped (a file truncated or rewritten while it is read is an error, not a SIGBUS), cut
//! into its sections with every count checked against the file's length before anything is
//! allocated.

use std::fs::{File, OpenOptions};
use std::io;
use std::ops::Range;
use std::path::{Path, PathBuf};

use bellperson::groth16::VerifyingKey;
use blstrs::Bls12;

use super::points::{decode_all, decode_point, FilePoint, G1_SIZE, G2_SIZE};
use super::{ParamsShape, PointCheck};
use crate::error::{Error, Result};
use crate::files::file_kind;

/// Where a `.params` file's bytes come from: the file itself ([`ParamsFile`]) or bytes in
/// memory.
pub(super) trait Source: Sync {
    /// The length the file had when it was opened.
    fn len(&self) -> u64;
    /// Fills `buf` with the bytes at `offset` (inside `len`).
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()>;
}

impl Source for [u8] {
    fn len(&self) -> u64 {
        <[u8]>::len(self) as u64
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        // Offsets come from `Parts`, inside the length.
        let at = offset as usize;
        buf.copy_from_slice(&self[at..at + buf.len()]);
        Ok(())
    }
}

/// An open parameters file, read by offset from any thread.
pub(super) struct ParamsFile {
    file: File,
    len: u64,
    path: PathBuf,
}

impl ParamsFile {
    pub(super) fn open(path: &Path) -> Result<Self> {
        let io_error = |source| Error::ParamsIo {
            path: path.display().to_string(),
            source,
        };
        let file = open_regular(path).map_err(io_error)?;
        let len = file.metadata().map_err(io_error)?.len();
        Ok(ParamsFile {
            file,
            len,
            path: path.to_path_buf(),
        })
    }
}

impl Source for ParamsFile {
    fn len(&self) -> u64 {
        self.len
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        read_exact_at(&self.file, offset, buf).map_err(|source| {
            let source = match source.kind() {
                io::ErrorKind::UnexpectedEof => io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!(
                        "it ends before offset {} but had {} bytes when it was opened: it \
                         was truncated or rewritten while it was read",
                        offset + buf.len() as u64,
                        self.len
                    ),
                ),
                _ => source,
            };
            Error::ParamsIo {
                path: self.path.display().to_string(),
                source,
            }
        })
    }
}

#[cfg(unix)]
fn read_exact_at(file: &File, offset: u64, buf: &mut [u8]) -> io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, buf, offset)
}

#[cfg(windows)]
fn read_exact_at(file: &File, mut offset: u64, mut buf: &mut [u8]) -> io::Result<()> {
    while !buf.is_empty() {
        match std::os::windows::fs::FileExt::seek_read(file, buf, offset) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => {
                buf = &mut buf[n..];
                offset += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Opens a parameters file, which must be a regular file (its length bounds every count, and
/// it is read by offset): anything else is refused before it is read, and a FIFO is opened
/// without waiting for a writer.
fn open_regular(path: &Path) -> io::Result<File> {
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
                "it is {}, not a regular file (parameters are read by offset)",
                file_kind(&kind)
            ),
        ));
    }
    Ok(file)
}

/// A `.params` file cut into its parts, every count checked against the length: the
/// ranges of its parts and where to read them.
pub(super) struct Sections<'a, S: Source + ?Sized> {
    pub(super) source: &'a S,
    pub(super) parts: Parts,
}

impl<'a, S: Source + ?Sized> Sections<'a, S> {
    pub(super) fn split(source: &'a S) -> Result<Self> {
        let parts = Parts::walk(source.len(), |offset| {
            let mut count = [0; 4];
            source.read_at(offset, &mut count)?;
            Ok(u32::from_be_bytes(count))
        })?;
        Ok(Sections { source, parts })
    }

    /// bellperson checks the verifying key fully in either mode and lets its six single
    /// points be the identity.
    pub(super) fn verifying_key(&self) -> Result<VerifyingKey<Bls12>> {
        fn single<P: FilePoint>(
            source: &(impl Source + ?Sized),
            section: &'static str,
            range: &Range<u64>,
        ) -> Result<P> {
            let mut bytes = vec![0; P::SIZE];
            source.read_at(range.start, &mut bytes)?;
            decode_point(section, 0, &bytes, PointCheck::Checked, false)
        }
        let (source, parts) = (self.source, &self.parts);
        Ok(VerifyingKey {
            alpha_g1: single(source, "vk.alpha_g1", &parts.alpha_g1)?,
            beta_g1: single(source, "vk.beta_g1", &parts.beta_g1)?,
            beta_g2: single(source, "vk.beta_g2", &parts.beta_g2)?,
            gamma_g2: single(source, "vk.gamma_g2", &parts.gamma_g2)?,
            delta_g1: single(source, "vk.delta_g1", &parts.delta_g1)?,
            delta_g2: single(source, "vk.delta_g2", &parts.delta_g2)?,
            ic: decode_all("vk.ic", source, &parts.ic, PointCheck::Checked)?,
        })
    }
}

/// Where each part of a `.params` file lies (the points of a counted section, after its
/// count).
pub(super) struct Parts {
    pub(super) alpha_g1: Range<u64>,
    pub(super) beta_g1: Range<u64>,
    pub(super) beta_g2: Range<u64>,
    pub(super) gamma_g2: Range<u64>,
    pub(super) delta_g1: Range<u64>,
    pub(super) delta_g2: Range<u64>,
    pub(super) ic: Range<u64>,
    pub(super) h: Range<u64>,
    pub(super) l: Range<u64>,
    pub(super) a: Range<u64>,
    pub(super) b_g1: Range<u64>,
    pub(super) b_g2: Range<u64>,
}

impl Parts {
    /// Walks a file of `len` bytes, reading the count at an offset with `count_at`: every
    /// part must be there and nothing may follow, so a bad count fails before any
    /// allocation.
    fn walk(len: u64, count_at: impl FnMut(u64) -> Result<u32>) -> Result<Self> {
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
