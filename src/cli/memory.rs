//! What the machine can give a command. Sizes are checked against it before anything is
//! allocated, so that a job too large for the machine is one error line with the numbers,
//! not an allocation abort or the kernel's OOM killer minutes later.

use super::{CliError, CliResult};

/// Bytes this process can still allocate without swapping: `MemAvailable` of
/// `/proc/meminfo`, lowered to the room under the process's cgroup (v2) limit, as in a
/// container. `None` where neither is known (other systems): then nothing is refused.
pub fn available() -> Option<u64> {
    let meminfo = read_small("/proc/meminfo");
    let machine = meminfo.as_deref().and_then(mem_available);
    match (machine, cgroup_room()) {
        (Some(machine), Some(room)) => Some(machine.min(room)),
        (machine, room) => machine.or(room),
    }
}

/// `MemAvailable` from the text of `/proc/meminfo`, in bytes.
fn mem_available(meminfo: &str) -> Option<u64> {
    let line = meminfo
        .lines()
        .find_map(|line| line.strip_prefix("MemAvailable:"))?;
    let kib: u64 = line.trim().strip_suffix("kB")?.trim().parse().ok()?;
    kib.checked_mul(1024)
}

/// The limit of this process's cgroup (v2) less what the cgroup uses; `None` without a
/// limit.
fn cgroup_room() -> Option<u64> {
    let cgroup = read_small("/proc/self/cgroup")?;
    let dir = cgroup.lines().find_map(|line| line.strip_prefix("0::"))?;
    let read = |file: &str| -> Option<u64> {
        let path = format!("/sys/fs/cgroup{}/{file}", dir.trim_end_matches('/'));
        read_small(&path)?.trim().parse().ok()
    };
    // "max" (no limit) does not parse.
    let limit = read("memory.max")?;
    Some(limit.saturating_sub(read("memory.current").unwrap_or(0)))
}

/// The first 64 KiB of a small system file: a file that should be small is never read
/// without bound.
fn read_small(path: &str) -> Option<String> {
    use std::io::Read;
    let mut text = String::new();
    std::fs::File::open(path)
        .ok()?
        .take(64 << 10)
        .read_to_string(&mut text)
        .ok()?;
    Some(text)
}

/// Refuses `job` when the least it needs, `needed` bytes (`why`: how that was counted), is
/// more than the machine has available.
pub fn check(job: &str, needed: u64, why: &str) -> CliResult<()> {
    match available() {
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
    fn mem_available_is_read_in_bytes_and_sizes_are_shown_in_binary_units() {
        let meminfo = "MemTotal:       24731708 kB\nMemFree:  1 kB\nMemAvailable:   23543212 kB\n";
        assert_eq!(mem_available(meminfo), Some(23_543_212 * 1024));
        assert_eq!(mem_available("MemTotal: 1 kB\n"), None);
        assert_eq!(bytes(512), "512 bytes");
        assert_eq!(bytes(3 << 29), "1.50 GiB");
        assert_eq!(bytes(u64::MAX), "16.00 EiB");
    }
}
