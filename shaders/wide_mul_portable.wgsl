// Wide multiply and carry chains without optional features (runs on GL, WebGPU and every
// Vulkan driver): the 64-bit product is assembled from four 16x16-bit products.

// acc + a*b + carry as (low word, high word); it cannot overflow 64 bits.
fn mac(acc: u32, a: u32, b: u32, carry: u32) -> vec2<u32> {
    let a0 = a & 0xffffu;
    let a1 = a >> 16u;
    let b0 = b & 0xffffu;
    let b1 = b >> 16u;
    let p00 = a0 * b0;
    let p10 = a1 * b0;
    // a0*b1 <= 2^32 - 2^17 + 1, so adding two 16-bit values cannot overflow.
    let mid = a0 * b1 + (p00 >> 16u) + (p10 & 0xffffu);
    var lo = (mid << 16u) | (p00 & 0xffffu);
    var hi = a1 * b1 + (mid >> 16u) + (p10 >> 16u);
    lo += acc;
    hi += select(0u, 1u, lo < acc);
    lo += carry;
    hi += select(0u, 1u, lo < carry);
    return vec2<u32>(lo, hi);
}

// a + b + carry (carry is 0 or 1): (sum, carry out).
fn adc(a: u32, b: u32, carry: u32) -> vec2<u32> {
    let s = a + b;
    let r = s + carry;
    return vec2<u32>(r, select(0u, 1u, s < a) | select(0u, 1u, r < s));
}

// a - b - borrow (borrow is 0 or 1): (difference, borrow out).
fn sbb(a: u32, b: u32, borrow: u32) -> vec2<u32> {
    let d = a - b;
    let r = d - borrow;
    return vec2<u32>(r, select(0u, 1u, a < b) | select(0u, 1u, d < borrow));
}
