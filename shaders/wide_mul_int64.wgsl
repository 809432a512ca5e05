// Wide multiply through 64-bit integers (wgpu feature SHADER_INT64: Vulkan, Metal, DX12).

// acc + a*b + carry as (low word, high word); (2^32-1)^2 + 2(2^32-1) = 2^64-1, so no overflow.
fn mac(acc: u32, a: u32, b: u32, carry: u32) -> vec2<u32> {
    let r = u64(a) * u64(b) + u64(acc) + u64(carry);
    return vec2<u32>(u32(r), u32(r >> 32u));
}
