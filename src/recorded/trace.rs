//! The trace of a synthesis: what a witness run is checked against, so that a circuit that
//! allocates or constrains otherwise than the recorded one is refused.

/// The sequence of a synthesis' allocations and constraints as a polynomial in a fixed point
/// modulo 2^61 - 1: a check that a witness run followed the recorded circuit, not a
/// cryptographic digest. Unlike a running hash it composes, so a witness computed in parts
/// ([`CircuitParts`](super::CircuitParts)) is checked as a whole: the trace of a sequence `s` then `t` is
/// `trace(s) * x^|t| + trace(t)`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Trace(pub(super) u64);

const TRACE_MODULUS: u64 = (1 << 61) - 1;
/// The point x: any fixed value of the field works.
const TRACE_POINT: u64 = 0x0d1c_2b3a_4958_6776;

fn trace_reduce(value: u128) -> u64 {
    let folded = (value & u128::from(TRACE_MODULUS)) + (value >> 61);
    let folded = (folded & u128::from(TRACE_MODULUS)) as u64 + (folded >> 61) as u64;
    if folded >= TRACE_MODULUS {
        folded - TRACE_MODULUS
    } else {
        folded
    }
}

fn trace_power(mut exponent: u64) -> u64 {
    let (mut power, mut square) = (1u64, TRACE_POINT);
    while exponent > 0 {
        if exponent & 1 == 1 {
            power = trace_reduce(u128::from(power) * u128::from(square));
        }
        square = trace_reduce(u128::from(square) * u128::from(square));
        exponent >>= 1;
    }
    power
}

impl Trace {
    pub(super) fn step(&mut self, event: u8) {
        self.0 = trace_reduce(u128::from(self.0) * u128::from(TRACE_POINT) + u128::from(event));
    }

    /// The trace of this sequence followed by `next`, a sequence of `next_steps` events.
    pub(super) fn then(self, next: Trace, next_steps: u64) -> Trace {
        Trace(trace_reduce(
            u128::from(self.0) * u128::from(trace_power(next_steps)) + u128::from(next.0),
        ))
    }

    /// The trace of what follows `prefix` in this sequence, `steps` events after it.
    pub(super) fn after(self, prefix: Trace, steps: u64) -> Trace {
        let shifted = trace_reduce(u128::from(prefix.0) * u128::from(trace_power(steps)));
        Trace(trace_reduce(
            u128::from(self.0) + u128::from(TRACE_MODULUS - shifted),
        ))
    }
}

pub(super) const INPUT: u8 = b'i';
pub(super) const ALLOC: u8 = b'a';
pub(super) const ENFORCE: u8 = b'e';
