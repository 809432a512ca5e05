//! `wgpu-groth16 verify`: bellperson's verifier on a `.vk` file, a proof file and the
//! public inputs.

use std::fs;
use std::io;
use std::path::Path;
use std::process::ExitCode;

use bellperson::groth16::{prepare_verifying_key, verify_proof, Proof, VerifyingKey};
use blstrs::{Bls12, Scalar};
use wgpu_groth16::Error;

use super::output::Output;
use super::{CliError, CliResult};

pub fn run(vk: &Path, proof: &Path, inputs: &str, out: &mut Output) -> CliResult<ExitCode> {
    let vk = read_whole(vk, "verifying key", |r| VerifyingKey::<Bls12>::read(r))?;
    let proof = read_whole(proof, "proof", |r| Proof::<Bls12>::read(r))?;
    let inputs = parse_inputs(inputs)?;
    // bellperson's verifier answers a wrong count with "malformed verifying key".
    let expected = vk.ic.len().saturating_sub(1);
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

/// Decodes the file at `path` with `read`, which must use every byte of it.
fn read_whole<T>(
    path: &Path,
    what: &str,
    read: impl FnOnce(&mut &[u8]) -> io::Result<T>,
) -> CliResult<T> {
    let bytes = fs::read(path).map_err(|e| CliError::io(format!("read {what}"), path, e))?;
    let not_one =
        |why: String| CliError::Invalid(format!("{} is not a {what} file: {why}", path.display()));
    let mut rest = bytes.as_slice();
    let value = read(&mut rest).map_err(|e| match e.kind() {
        io::ErrorKind::UnexpectedEof => {
            not_one(format!("it ends too early ({} bytes)", bytes.len()))
        }
        _ => not_one(e.to_string()),
    })?;
    if !rest.is_empty() {
        return Err(not_one(format!("{} bytes follow the {what}", rest.len())));
    }
    Ok(value)
}

/// `--inputs`: a file of field elements one a line (as `prove --inputs-out` writes them) or
/// the elements themselves, comma-separated; each the hex of its canonical little-endian
/// bytes.
fn parse_inputs(arg: &str) -> CliResult<Vec<Scalar>> {
    let path = Path::new(arg);
    let (text, source) = if path.is_file() {
        let text = fs::read_to_string(path).map_err(|e| CliError::io("read inputs", path, e))?;
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
    use crate::cli::prove::inputs_hex;

    #[test]
    fn inputs_round_trip_through_hex_and_non_canonical_values_are_refused() {
        let values = [Scalar::from(7u64), -Scalar::from(1u64)];
        let list = inputs_hex(&values).join(",");
        assert_eq!(parse_inputs(&list).unwrap(), values);
        let modulus = "01000000fffffffffe5bfeff02a4bd5305d8a10908d83933487d9d2953a7ed73";
        assert!(parse_scalar(modulus).unwrap_err().contains("modulus"));
        assert!(parse_inputs("nosuchfile")
            .unwrap_err()
            .to_string()
            .contains("not a file"));
    }
}
