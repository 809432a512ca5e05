//! How the 256 bits of a scalar are cut into windows, and how many buckets each has.

/// Widest window a caller may ask for.
pub const MAX_WINDOW_BITS: u32 = 22;
/// Window counts a caller may ask for: 12 windows are 21 and 22 bits wide, 64 are 4.
pub const WINDOW_COUNTS: std::ops::RangeInclusive<u32> = 12..=64;
/// Window counts chosen from n. Not 12: at 2^26 and 2^27 the count, scan and scatter over
/// twelve windows' 16.8M keys a chunk cost what the accumulation of a window fewer saved
/// (docs/benchmarks/gpu-part-2-27.md, commit f1e7e85).
pub const AUTO_WINDOWS: std::ops::RangeInclusive<u32> = 13..=64;

/// How the 256 bits of a signed-digit scalar are cut into windows: the first `wide` windows
/// are `bits + 1` wide, the rest `bits`. A window of width c holds digits of magnitude up to
/// 2^(c-1), so it has 2^(c-1) + 1 buckets (bucket 0 unused); widths summing to 256 or more
/// let the top window absorb the last carry (scalars are below 2^255).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WindowLayout {
    pub bits: u32,
    pub wide: u32,
    pub windows: u32,
}

impl WindowLayout {
    /// Every window `bits` wide, as many as cover 256 bits.
    pub const fn uniform(bits: u32) -> Self {
        WindowLayout {
            bits,
            wide: 0,
            windows: 256u32.div_ceil(bits),
        }
    }

    /// `windows` windows summing to exactly 256 bits, none more than a bit wider than
    /// another: the fewest buckets for that many windows (13 windows: 9 of 20 bits and 4 of
    /// 19, 5.8M buckets, where 13 of 20 bits have 6.8M).
    pub const fn mixed(windows: u32) -> Self {
        WindowLayout {
            bits: 256 / windows,
            wide: 256 % windows,
            windows,
        }
    }

    pub fn width(&self, window: u32) -> u32 {
        self.bits + u32::from(window < self.wide)
    }

    pub fn widest(&self) -> u32 {
        self.width(0)
    }

    /// Bit of the scalar where `window` starts.
    pub fn first_bit(&self, window: u32) -> u32 {
        window * self.bits + window.min(self.wide)
    }

    pub fn buckets(&self, window: u32) -> u32 {
        (1 << (self.width(window) - 1)) + 1
    }

    /// The key of `window`'s bucket 0: each window's buckets follow the one's below.
    pub fn first_key(&self, window: u32) -> u64 {
        (0..window).map(|w| self.buckets(w) as u64).sum()
    }

    /// Buckets of every window together (the key space of the sort).
    pub fn total_buckets(&self) -> u64 {
        self.first_key(self.windows)
    }
}

/// "13 × 20 bits", or "4 × 22 + 8 × 21 bits".
impl std::fmt::Display for WindowLayout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.wide > 0 {
            write!(f, "{} × {} + ", self.wide, self.bits + 1)?;
        }
        write!(f, "{} × {} bits", self.windows - self.wide, self.bits)
    }
}
