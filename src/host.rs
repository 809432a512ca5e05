//! What the host machine can give: sizes are checked against it before anything is
//! allocated, so that a job too large for the machine is one error with the numbers, not an
//! allocation abort or the kernel's OOM killer minutes later.

/// Bytes this process can still allocate without swapping: `MemAvailable` of
/// `/proc/meminfo`, lowered to the room under the process's cgroup (v2) limit, as in a
/// container. `None` where neither is known (other systems): then nothing is refused.
pub fn available_memory() -> Option<u64> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mem_available_is_read_in_bytes() {
        let meminfo = "MemTotal:       24731708 kB\nMemFree:  1 kB\nMemAvailable:   23543212 kB\n";
        assert_eq!(mem_available(meminfo), Some(23_543_212 * 1024));
        assert_eq!(mem_available("MemTotal: 1 kB\n"), None);
    }
}
