//! `wgpu-groth16 verify`: bellperson's verifier on a `.vk` file, a proof file and the
//! public inputs.

use std::fmt::Display;
use std::fs::{self, File};
use std::io::{self, BufReader, Read};
use std::path::Path;
use std::process::ExitCode;

use bellperson::groth16::{prepare_verifying_key, verify_proof, Proof, VerifyingKey};
use blstrs::{Bls12, Scalar};
use wgpu_groth16::Error;

use crate::memory;
use crate::output::Output;
use crate::{CliError, CliResult};

pub fn run(vk: &Path, proof: &Path, inputs: &str, out: &mut Output) -> CliResult<ExitCode> {
    let vk = read_verifying_key(vk)?;
    let proof = read_proof(proof)?;
    // A key has an `ic` point for ONE and one per public input (checked when read).
    let expected = vk.ic.len() - 1;
    let inputs = parse_inputs(inputs, expected)?;
    if inputs.len() != expected {
        return Err(CliError::Invalid(format!(
            "the verifying key takes {expected} public inputs, --inputs gives {}",
            inputs.len()
        )));
    }
    let valid =
        verify_proof(&prepare_verifying_key(&vk), &proof, &inputs).map_err(Error::Synthesis)?;
    if valid {
        out.fact("valid", true, "valid");
        Ok(ExitCode::SUCCESS)
    } else {
        out.fact(
            "valid",
            false,
            "invalid: the proof does not verify with this verifying key and these inputs",
        );
        Ok(ExitCode::FAILURE)
    }
}

const G1_SIZE: u64 = 96;
/// A verifying key's six points (three in G1, three in G2) and the count of its `ic` points.
const VK_HEADER: usize = 3 * 96 + 3 * 192 + 4;
/// bellperson's compressed proof: A and C in G1 (48 bytes), B in G2 (96).
const PROOF_SIZE: usize = 48 + 96 + 48;
/// The most an input takes in an inputs file: "0x", 64 hex digits and a line break (CRLF).
const INPUT_TEXT: u64 = 2 + 64 + 2;

/// A file `verify` reads: opened without waiting on a FIFO's writer, and read no further
/// than its format allows, so that `/dev/zero` or a huge file is refused, not swallowed.
struct Input<'a> {
    path: &'a Path,
    what: &'static str,
    reader: BufReader<File>,
    /// The length of a regular file.
    len: Option<u64>,
}

impl<'a> Input<'a> {
    fn open(path: &'a Path, what: &'static str) -> CliResult<Self> {
        let file = open_without_waiting(path)
            .map_err(|e| CliError::io(format!("read {what}"), path, e))?;
        let meta = file
            .metadata()
            .map_err(|e| CliError::io(format!("read {what}"), path, e))?;
        Ok(Input {
            path,
            what,
            len: meta.is_file().then_some(meta.len()),
            reader: BufReader::new(file),
        })
    }

    fn not_one(&self, why: impl Display) -> CliError {
        CliError::Invalid(format!(
            "{} is not a {} file: {why}",
            self.path.display(),
            self.what
        ))
    }

    /// At most `limit` bytes.
    fn read_up_to(&mut self, limit: u64) -> CliResult<Vec<u8>> {
        let mut bytes = Vec::new();
        self.reader
            .by_ref()
            .take(limit)
            .read_to_end(&mut bytes)
            .map_err(|e| CliError::io(format!("read {}", self.what), self.path, e))?;
        Ok(bytes)
    }

    /// The error for a read that used `consumed` bytes and failed with `e`.
    fn undecodable(&self, e: io::Error, consumed: u64) -> CliError {
        match e.kind() {
            io::ErrorKind::UnexpectedEof => {
                self.not_one(format!("it ends too early ({consumed} bytes)"))
            }
            _ => self.not_one(e),
        }
    }

    /// Checks that nothing follows the `used` bytes decoded.
    fn expect_end(mut self, used: u64) -> CliResult<()> {
        if self.read_up_to(1)?.is_empty() {
            return Ok(());
        }
        Err(self.not_one(match self.len {
            Some(len) => format!(
                "{} bytes follow the {}",
                len.saturating_sub(used),
                self.what
            ),
            None => format!("more bytes follow the {}", self.what),
        }))
    }
}

/// Reads a `.vk` file: its header says how many `ic` points follow, and no more is read.
pub fn read_verifying_key(path: &Path) -> CliResult<VerifyingKey<Bls12>> {
    let mut input = Input::open(path, "verifying key")?;
    let header = input.read_up_to(VK_HEADER as u64)?;
    let count = match header.get(VK_HEADER - 4..) {
        Some(&[a, b, c, d]) => u64::from(u32::from_be_bytes([a, b, c, d])),
        _ => 0,
    };
    let ic_bytes = count * G1_SIZE;
    memory::check(
        &format!("the verifying key {}", path.display()),
        ic_bytes,
        &format!("its header announces {count} ic points of {G1_SIZE} bytes"),
    )?;
    let mut key = io::Cursor::new(&header).chain(input.reader.by_ref().take(ic_bytes));
    let read = VerifyingKey::<Bls12>::read(&mut key);
    let consumed = header.len() as u64 + ic_bytes - key.get_ref().1.limit();
    let vk = read.map_err(|e| input.undecodable(e, consumed))?;
    if vk.ic.is_empty() {
        return Err(
            input.not_one("it has no ic points (a key has one for ONE and one per public input)")
        );
    }
    input.expect_end(consumed)?;
    Ok(vk)
}

/// Reads a proof file: bellperson's compressed proof and nothing after it.
pub fn read_proof(path: &Path) -> CliResult<Proof<Bls12>> {
    let mut input = Input::open(path, "proof")?;
    let bytes = input.read_up_to(PROOF_SIZE as u64)?;
    let proof = Proof::<Bls12>::read(bytes.as_slice())
        .map_err(|e| input.undecodable(e, bytes.len() as u64))?;
    input.expect_end(PROOF_SIZE as u64)?;
    Ok(proof)
}

/// Opens `path` for reading without waiting for a FIFO's writer: with none, reading finds
/// the end at once; a writer already there is read as from any file.
fn open_without_waiting(path: &Path) -> io::Result<File> {
    #[cfg(unix)]
    {
        use std::os::fd::AsRawFd;
        use std::os::unix::fs::OpenOptionsExt;
        let file = File::options()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(path)?;
        // Reads wait again, as they do on any file.
        // SAFETY: fcntl on a descriptor that `file` owns.
        unsafe {
            let flags = libc::fcntl(file.as_raw_fd(), libc::F_GETFL);
            if flags < 0
                || libc::fcntl(file.as_raw_fd(), libc::F_SETFL, flags & !libc::O_NONBLOCK) < 0
            {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(file)
    }
    #[cfg(not(unix))]
    File::open(path)
}

/// `--inputs`: a file of field elements one a line (as `prove --inputs-out` writes them) or
/// the elements themselves, comma-separated; each the hex of its canonical little-endian
/// bytes. A file is read only as far as `expected` inputs can reach.
pub fn parse_inputs(arg: &str, expected: usize) -> CliResult<Vec<Scalar>> {
    let path = Path::new(arg);
    let (text, source) = if fs::metadata(path).is_ok() {
        let mut input = Input::open(path, "public inputs")?;
        let limit = (expected as u64 + 1) * INPUT_TEXT;
        let bytes = input.read_up_to(limit + 1)?;
        if bytes.len() as u64 > limit {
            return Err(input.not_one(format!(
                "it is longer than {expected} public inputs can be ({limit} bytes)"
            )));
        }
        let text = String::from_utf8(bytes).map_err(|_| input.not_one("it is not text"))?;
        (text, path.display().to_string())
    } else {
        (arg.to_string(), format!("--inputs {arg:?} (not a file)"))
    };
    text.split(|c: char| c == ',' || c.is_whitespace())
        .filter(|word| !word.is_empty())
        .enumerate()
        .map(|(i, word)| {
            parse_scalar(word)
                .map_err(|why| CliError::Invalid(format!("{source}: input {i}: {why}")))
        })
        .collect()
}

fn parse_scalar(word: &str) -> Result<Scalar, String> {
    let digits = word.strip_prefix("0x").unwrap_or(word);
    if digits.len() != 64 || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!("{word:?} is not 64 hex digits"));
    }
    let mut bytes = [0u8; 32];
    for (i, byte) in bytes.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&digits[2 * i..2 * i + 2], 16).expect("hex digits");
    }
    Option::from(Scalar::from_bytes_le(&bytes))
        .ok_or_else(|| format!("{word:?} is not below the field modulus"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::prove::inputs_hex;

    #[test]
    fn inputs_round_trip_through_hex_and_non_canonical_values_are_refused() {
        let values = [Scalar::from(7u64), -Scalar::from(1u64)];
        let list = inputs_hex(&values).join(",");
        assert_eq!(parse_inputs(&list, 2).unwrap(), values);
        let modulus = "01000000fffffffffe5bfeff02a4bd5305d8a10908d83933487d9d2953a7ed73";
        assert!(parse_scalar(modulus).unwrap_err().contains("modulus"));
        assert!(parse_inputs("nosuchfile", 1)
            .unwrap_err()
            .to_string()
            .contains("not a file"));
    }
}
