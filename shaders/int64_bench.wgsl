// The adapter's raw 64-bit multiply rate (SHADER_INT64 only), for `bench field`.

struct Int64BenchParams {
    count: u32,
    iterations: u32,
}

@group(0) @binding(0) var<storage, read> input: array<u32>;
@group(0) @binding(1) var<storage, read_write> output: array<u32>;
@group(0) @binding(2) var<uniform> params: Int64BenchParams;

@compute @workgroup_size(256)
fn u64_mul_chain(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if (i >= params.count) { return; }
    let m = u64(input[i] | 1u) | (u64(i) << 32u);
    var x = array<u64, 8>(m, m + 1lu, m + 2lu, m + 3lu, m + 4lu, m + 5lu, m + 6lu, m + 7lu);
    for (var it = 0u; it < params.iterations; it++) {
        x[0] = x[0] * m + 1lu; x[1] = x[1] * m + 1lu; x[2] = x[2] * m + 1lu; x[3] = x[3] * m + 1lu;
        x[4] = x[4] * m + 1lu; x[5] = x[5] * m + 1lu; x[6] = x[6] * m + 1lu; x[7] = x[7] * m + 1lu;
    }
    let s = x[0] ^ x[1] ^ x[2] ^ x[3] ^ x[4] ^ x[5] ^ x[6] ^ x[7];
    output[i] = u32(s) ^ u32(s >> 32u);
}
