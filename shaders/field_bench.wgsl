// Throughput kernels for `wgpu-groth16 bench field`: each invocation runs a dependent chain of
// `params.iterations` operations on its own element, so the work cannot be folded away.

struct BenchParams {
    count: u32,
    iterations: u32,
}

// Results go to a separate buffer so every dispatch computes the same thing: the host checks
// the field chains (x^(iterations+1)) against blstrs.
@group(0) @binding(0) var<storage, read> input: array<u32>;
@group(0) @binding(1) var<storage, read_write> output: array<u32>;
@group(0) @binding(2) var<uniform> params: BenchParams;

// Eight independent chains of 32-bit multiply-adds: the adapter's raw u32 multiply rate.
@compute @workgroup_size(256)
fn u32_mul_chain(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if (i >= params.count) { return; }
    let m = input[i] | 1u;
    var x = array<u32, 8>(m, m + 1u, m + 2u, m + 3u, m + 4u, m + 5u, m + 6u, m + 7u);
    for (var it = 0u; it < params.iterations; it++) {
        x[0] = x[0] * m + 1u; x[1] = x[1] * m + 1u; x[2] = x[2] * m + 1u; x[3] = x[3] * m + 1u;
        x[4] = x[4] * m + 1u; x[5] = x[5] * m + 1u; x[6] = x[6] * m + 1u; x[7] = x[7] * m + 1u;
    }
    output[i] = x[0] ^ x[1] ^ x[2] ^ x[3] ^ x[4] ^ x[5] ^ x[6] ^ x[7];
}

// Eight independent chains of the wide multiply-accumulate the field code is built on.
@compute @workgroup_size(256)
fn mac_chain(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if (i >= params.count) { return; }
    let m = input[i] | 1u;
    var x = array<vec2<u32>, 8>(vec2(m, 1u), vec2(m, 2u), vec2(m, 3u), vec2(m, 4u),
                                vec2(m, 5u), vec2(m, 6u), vec2(m, 7u), vec2(m, 8u));
    for (var it = 0u; it < params.iterations; it++) {
        x[0] = mac(x[0].y, x[0].x, m, 1u); x[1] = mac(x[1].y, x[1].x, m, 1u);
        x[2] = mac(x[2].y, x[2].x, m, 1u); x[3] = mac(x[3].y, x[3].x, m, 1u);
        x[4] = mac(x[4].y, x[4].x, m, 1u); x[5] = mac(x[5].y, x[5].x, m, 1u);
        x[6] = mac(x[6].y, x[6].x, m, 1u); x[7] = mac(x[7].y, x[7].x, m, 1u);
    }
    let s = x[0] ^ x[1] ^ x[2] ^ x[3] ^ x[4] ^ x[5] ^ x[6] ^ x[7];
    output[i] = s.x ^ s.y;
}

@compute @workgroup_size(256)
fn fq_mul_chain(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if (i >= params.count) { return; }
    var x: Fq;
    for (var k = 0u; k < FQ_LIMBS; k++) { x[k] = input[i * FQ_LIMBS + k]; }
    let y = x;
    for (var it = 0u; it < params.iterations; it++) { x = fq_mul(x, y); }
    for (var k = 0u; k < FQ_LIMBS; k++) { output[i * FQ_LIMBS + k] = x[k]; }
}

@compute @workgroup_size(256)
fn fr_mul_chain(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if (i >= params.count) { return; }
    var x: Fr;
    for (var k = 0u; k < FR_LIMBS; k++) { x[k] = input[i * FR_LIMBS + k]; }
    let y = x;
    for (var it = 0u; it < params.iterations; it++) { x = fr_mul(x, y); }
    for (var k = 0u; k < FR_LIMBS; k++) { output[i * FR_LIMBS + k] = x[k]; }
}
