// Radix-2 number-theoretic transform over Fr, in place, in the same order as bellperson's
// EvaluationDomain: bit-reversal, then log2(n) butterfly stages, output in natural order.
//
// Powers of a base b (ω, ω^-1, the coset generator g, g^-1) come from two small tables,
// b^e = lo[e mod 2^split] · hi[e >> split], instead of an n-entry table per base.

struct NttParams {
    n: u32,
    log_n: u32,
    // Butterfly half-size of this stage (1, 2, 4, ... n/2).
    half: u32,
    // Index in `tables` of the base's lo table; its hi table follows 2^split entries later.
    table: u32,
    split: u32,
    // Index in `tables` of the factor ntt_scale and ntt_h_combine multiply by.
    factor: u32,
    _pad0: u32,
    _pad1: u32,
}

const WORKGROUP: u32 = 64u;

@group(0) @binding(0) var<uniform> params: NttParams;
@group(0) @binding(1) var<storage, read_write> data: array<Fr>;
@group(0) @binding(2) var<storage, read> tables: array<Fr>;
// The H step's other two vectors (ntt_h_combine): b and c evaluated on the coset.
@group(0) @binding(3) var<storage, read> coset_b: array<Fr>;
@group(0) @binding(4) var<storage, read> coset_c: array<Fr>;

fn thread_index(id: vec3<u32>, groups: vec3<u32>) -> u32 {
    return id.x + id.y * groups.x * WORKGROUP;
}

// base^e through the lo/hi tables of `params.table`.
fn table_power(e: u32) -> Fr {
    let lo = tables[params.table + (e & ((1u << params.split) - 1u))];
    let hi = tables[params.table + (1u << params.split) + (e >> params.split)];
    return fr_mul(lo, hi);
}

@compute @workgroup_size(64)
fn ntt_bit_reverse(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = thread_index(id, groups);
    if (i >= params.n || params.log_n == 0u) { return; }
    let j = reverseBits(i) >> (32u - params.log_n);
    if (i < j) {
        let t = data[i];
        data[i] = data[j];
        data[j] = t;
    }
}

// One stage: thread t joins x[i] and x[i + half] with twiddle ω_{2·half}^j = ω^(j·n/(2·half)).
@compute @workgroup_size(64)
fn ntt_butterflies(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let t = thread_index(id, groups);
    if (t >= params.n / 2u) { return; }
    let half = params.half;
    let j = t % half;
    let i0 = (t / half) * 2u * half + j;
    let i1 = i0 + half;
    let w = table_power(j * (params.n / (2u * half)));
    let a = data[i0];
    let b = fr_mul(data[i1], w);
    data[i0] = fr_add(a, b);
    data[i1] = fr_sub(a, b);
}

// x[i] *= tables[factor] (1/n after an inverse transform).
@compute @workgroup_size(64)
fn ntt_scale(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = thread_index(id, groups);
    if (i >= params.n) { return; }
    data[i] = fr_mul(data[i], tables[params.factor]);
}

// x[i] *= base^i (bellperson's distribute_powers: the coset shift by g or g^-1).
@compute @workgroup_size(64)
fn ntt_distribute_powers(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = thread_index(id, groups);
    if (i >= params.n) { return; }
    data[i] = fr_mul(data[i], table_power(i));
}

// The H step's pointwise part on the coset: a = (a·b - c) / Z, with 1/Z = tables[factor]
// (bellperson's mul_assign, sub_assign, divide_by_z_on_coset in one pass).
@compute @workgroup_size(64)
fn ntt_h_combine(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = thread_index(id, groups);
    if (i >= params.n) { return; }
    let ab = fr_mul(data[i], coset_b[i]);
    data[i] = fr_mul(fr_sub(ab, coset_c[i]), tables[params.factor]);
}
