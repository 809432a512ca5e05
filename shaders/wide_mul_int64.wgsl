// Wide multiply and carry chains through 64-bit integers (wgpu feature SHADER_INT64: Vulkan,
// Metal, DX12).

// acc + a*b + carry as (low word, high word); (2^32-1)^2 + 2(2^32-1) = 2^64-1, so no overflow.
fn mac(acc: u32, a: u32, b: u32, carry: u32) -> vec2<u32> {
    let r = u64(a) * u64(b) + u64(acc) + u64(carry);
    return vec2<u32>(u32(r), u32(r >> 32u));
}

// a + b + carry (carry is 0 or 1): (sum, carry out). Through one u64 sum rather than two
// comparisons (the portable form), which made the MSMs and the transforms faster
// (docs/benchmarks/gpu-part-2-27.md, commit c17c5b0).
fn adc(a: u32, b: u32, carry: u32) -> vec2<u32> {
    let r = u64(a) + u64(b) + u64(carry);
    return vec2<u32>(u32(r), u32(r >> 32u));
}

// a - b - borrow (borrow is 0 or 1): (difference, borrow out). A difference below zero wraps
// to at least 2^64 - 2^32, so its top bit is the borrow.
fn sbb(a: u32, b: u32, borrow: u32) -> vec2<u32> {
    let r = u64(a) - u64(b) - u64(borrow);
    return vec2<u32>(u32(r), u32(r >> 63u));
}
