//! Jobs larger than the machine, refused before anything is allocated: one error line with
//! the numbers ([`wgpu_groth16::host::available_memory`]), not an allocation abort or the
//! kernel's OOM killer minutes later.

use wgpu_groth16::host::available_memory;

use crate::{CliError, CliResult};

/// Refuses `job` when the least it needs, `needed` bytes (`why`: how that was counted), is
/// more than the machine has available.
pub fn check(job: &str, needed: u64, why: &str) -> CliResult<()> {
    match available_memory() {
        Some(available) if needed > available => Err(CliError::Invalid(format!(
            "{job} needs at least {} of memory ({why}); this machine has {} available",
            bytes(needed),
            bytes(available)
        ))),
        _ => Ok(()),
    }
}

/// "1.50 GiB", "3.41 TiB", "512 bytes".
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    let mut value = n as f64;
    let mut unit = None;
    for name in UNITS {
        if value < 1024.0 {
            break;
        }
        value /= 1024.0;
        unit = Some(name);
    }
    match unit {
        Some(unit) => format!("{value:.2} {unit}"),
        None => format!("{n} bytes"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_shown_in_binary_units() {
        assert_eq!(bytes(512), "512 bytes");
        assert_eq!(bytes(3 << 29), "1.50 GiB");
        assert_eq!(bytes(u64::MAX), "16.00 EiB");
    }
}
