// Radix-2 number-theoretic transform over Fr, in place, in the same order as bellperson's
// EvaluationDomain: bit-reversal, then log2(n) butterfly stages, output in natural order.
//
// The vector may be split into 2^part_bits equal parts, one buffer each, so that it can be
// longer than a binding allows (2^27 Fr is 4 GiB; NVIDIA binds 2 GiB). Each dispatch sees one
// part as `data` and, for the steps that pair elements of two parts, another as `partner`.
// One part is the common case and runs the same code.
//
// Powers of a base b (ω, ω^-1, the coset generator g, g^-1) come from two small tables,
// b^e = lo[e mod 2^split] · hi[e >> split], instead of an n-entry table per base.

struct NttParams {
    n: u32,
    log_n: u32,
    // ntt_butterflies(_across_parts): the stage's half-size.
    half: u32,
    // Index in `tables` of the base's lo table; its hi table follows 2^split entries later.
    table: u32,
    split: u32,
    // Index in `tables` of the factor ntt_scale and ntt_h_combine multiply by.
    factor: u32,
    // Invocations of this dispatch.
    count: u32,
    // Global index of data[0] (part index · part length).
    first: u32,
    // log2 of the number of parts.
    part_bits: u32,
    // The part `data` is, and the part `partner` is (bit reversal).
    part: u32,
    partner_part: u32,
    // ntt_butterflies_local: the first stage (log2 of its half-size) and how many stages.
    stage: u32,
    stages: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}


@group(0) @binding(0) var<uniform> params: NttParams;
@group(0) @binding(1) var<storage, read_write> data: array<Fr>;
@group(0) @binding(2) var<storage, read> tables: array<Fr>;
// The H step's other two vectors (ntt_h_combine): b and c evaluated on the coset.
@group(0) @binding(3) var<storage, read> coset_b: array<Fr>;
@group(0) @binding(4) var<storage, read> coset_c: array<Fr>;
@group(0) @binding(5) var<storage, read_write> partner: array<Fr>;

// base^e through the lo/hi tables of `params.table`. In the first half of a transform's
// stages every twiddle exponent is a multiple of 2^split (the same branch for every
// invocation): the hi entry alone is the power, and the multiplication is skipped.
fn table_power(e: u32) -> Fr {
    let hi = tables[params.table + (1u << params.split) + (e >> params.split)];
    let low_bits = e & ((1u << params.split) - 1u);
    if (low_bits == 0u) { return hi; }
    return fr_mul(tables[params.table + low_bits], hi);
}

// The low `bits` bits of x, reversed (0 for no bits: WGSL masks a shift by 32).
fn reverse_low_bits(x: u32, bits: u32) -> u32 {
    if (bits == 0u) { return 0u; }
    return reverseBits(x) >> (32u - bits);
}

// Swaps x[i] and x[rev(i)] for the elements i of part `part` whose reversal lies in part
// `partner_part` (partner_part >= part; when equal, `partner` is unused and data is swapped
// with itself). With i = part·P + o, rev(i) = rev(o)·2^part_bits + rev(part), so the
// destination part is fixed by o's low part_bits bits: those are the invocations here.
@compute @workgroup_size(64)
fn ntt_bit_reverse(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let t = thread_index(id, groups);
    if (t >= params.count) { return; }
    let k = params.part_bits;
    let part_log = params.log_n - k;
    let o = (t << k) | reverse_low_bits(params.partner_part, k);
    let reversed = (reverse_low_bits(o, part_log) << k) | reverse_low_bits(params.part, k);
    let j = reversed & ((1u << part_log) - 1u);
    if (params.part == params.partner_part) {
        if (o < j) {
            let x = data[o];
            data[o] = data[j];
            data[j] = x;
        }
    } else {
        let x = data[o];
        data[o] = partner[j];
        partner[j] = x;
    }
}

// One stage within a part: x[i] and x[i + half] with twiddle ω^(j·n/(2·half)), j = i mod half
// (parts are multiples of 2·half long here, so j is the same globally).
@compute @workgroup_size(64)
fn ntt_butterflies(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let t = thread_index(id, groups);
    if (t >= params.count) { return; }
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

const LOCAL_BITS: u32 = 8u;
var<workgroup> tile: array<Fr, 256>;

// Up to LOCAL_BITS consecutive stages in workgroup memory, so the vector crosses memory once
// for them instead of once per stage (chosen per adapter: lavapipe runs it far slower than
// ntt_butterflies, its barriers being costly on a CPU). Stages s..s+b-1 only combine elements that agree on
// every index bit outside [s, s+b): a block is {base + j·2^s : j < 2^b}, loaded into `tile`,
// where stage s+t pairs j with j + 2^t. (s = 0 is a contiguous block.)
@compute @workgroup_size(128)
fn ntt_butterflies_local(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let block = wid.x + wid.y * groups.x;
    if (block >= params.count) { return; }
    let s = params.stage;
    let size = 1u << params.stages;
    let r = block & ((1u << s) - 1u);
    let base = ((block >> s) << (s + params.stages)) + r;
    let has_pair = lid < size / 2u;
    if (has_pair) {
        tile[lid] = data[base + (lid << s)];
        tile[lid + size / 2u] = data[base + ((lid + size / 2u) << s)];
    }
    workgroupBarrier();
    for (var t = 0u; t < params.stages; t++) {
        if (has_pair) {
            let half = 1u << t;
            let jj = lid % half;
            let j0 = (lid / half) * 2u * half + jj;
            // Global stage s + t, half-size m = 2^(s+t): the pair's index mod m is r + jj·2^s.
            let w = table_power(((jj << s) + r) * (params.n >> (s + t + 1u)));
            let a = tile[j0];
            let b = fr_mul(tile[j0 + half], w);
            tile[j0] = fr_add(a, b);
            tile[j0 + half] = fr_sub(a, b);
        }
        workgroupBarrier();
    }
    if (has_pair) {
        data[base + (lid << s)] = tile[lid];
        data[base + ((lid + size / 2u) << s)] = tile[lid + size / 2u];
    }
}

// x ← x + w·y, y ← x - w·y.
fn butterfly(x: ptr<function, Fr>, y: ptr<function, Fr>, w: Fr) {
    let a = *x;
    let b = fr_mul(*y, w);
    *x = fr_add(a, b);
    *y = fr_sub(a, b);
}

// Two consecutive stages s, s+1 in registers, four elements an invocation (as
// ntt_butterflies_radix8, with half its registers).
@compute @workgroup_size(64)
fn ntt_butterflies_radix4(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let t = thread_index(id, groups);
    if (t >= params.count) { return; }
    let s = params.stage;
    let r = t & ((1u << s) - 1u);
    let base = ((t >> s) << (s + 2u)) + r;
    var x0 = data[base];
    var x1 = data[base + (1u << s)];
    var x2 = data[base + (2u << s)];
    var x3 = data[base + (3u << s)];
    let w0 = table_power(r * (params.n >> (s + 1u)));
    butterfly(&x0, &x1, w0);
    butterfly(&x2, &x3, w0);
    let step1 = params.n >> (s + 2u);
    butterfly(&x0, &x2, table_power(r * step1));
    butterfly(&x1, &x3, table_power((r + (1u << s)) * step1));
    data[base] = x0;
    data[base + (1u << s)] = x1;
    data[base + (2u << s)] = x2;
    data[base + (3u << s)] = x3;
}

// Three consecutive stages s, s+1, s+2 in registers: each invocation loads the eight
// elements {base + j·2^s : j < 8} that these stages combine (as ntt_butterflies_local's
// blocks, with neighbouring invocations on neighbouring elements, so every load and store is
// coalesced for s >= 5), and stores them once. Eight named values, not an array: a
// dynamically indexed private array would live in slow local memory.
@compute @workgroup_size(64)
fn ntt_butterflies_radix8(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let t = thread_index(id, groups);
    if (t >= params.count) { return; }
    let s = params.stage;
    let r = t & ((1u << s) - 1u);
    let base = ((t >> s) << (s + 3u)) + r;
    var x0 = data[base];
    var x1 = data[base + (1u << s)];
    var x2 = data[base + (2u << s)];
    var x3 = data[base + (3u << s)];
    var x4 = data[base + (4u << s)];
    var x5 = data[base + (5u << s)];
    var x6 = data[base + (6u << s)];
    var x7 = data[base + (7u << s)];
    // Stage s + k pairs j with j + 2^k; the pair's index mod 2^(s+k) is r + (j mod 2^k)·2^s,
    // its twiddle exponent that times n / 2^(s+k+1).
    let w0 = table_power(r * (params.n >> (s + 1u)));
    butterfly(&x0, &x1, w0);
    butterfly(&x2, &x3, w0);
    butterfly(&x4, &x5, w0);
    butterfly(&x6, &x7, w0);
    let step1 = params.n >> (s + 2u);
    let w10 = table_power(r * step1);
    let w11 = table_power((r + (1u << s)) * step1);
    butterfly(&x0, &x2, w10);
    butterfly(&x1, &x3, w11);
    butterfly(&x4, &x6, w10);
    butterfly(&x5, &x7, w11);
    let step2 = params.n >> (s + 3u);
    butterfly(&x0, &x4, table_power(r * step2));
    butterfly(&x1, &x5, table_power((r + (1u << s)) * step2));
    butterfly(&x2, &x6, table_power((r + (2u << s)) * step2));
    butterfly(&x3, &x7, table_power((r + (3u << s)) * step2));
    data[base] = x0;
    data[base + (1u << s)] = x1;
    data[base + (2u << s)] = x2;
    data[base + (3u << s)] = x3;
    data[base + (4u << s)] = x4;
    data[base + (5u << s)] = x5;
    data[base + (6u << s)] = x6;
    data[base + (7u << s)] = x7;
}

// One stage whose pairs lie in two parts (half >= part length): data[t] with partner[t],
// the part `half` elements later.
@compute @workgroup_size(64)
fn ntt_butterflies_across_parts(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let t = thread_index(id, groups);
    if (t >= params.count) { return; }
    let half = params.half;
    let j = (params.first % half) + t;
    let w = table_power(j * (params.n / (2u * half)));
    let a = data[t];
    let b = fr_mul(partner[t], w);
    data[t] = fr_add(a, b);
    partner[t] = fr_sub(a, b);
}

// x[i] *= tables[factor] (1/n after an inverse transform).
@compute @workgroup_size(64)
fn ntt_scale(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = thread_index(id, groups);
    if (i >= params.count) { return; }
    data[i] = fr_mul(data[i], tables[params.factor]);
}

// x[i] *= base^i (bellperson's distribute_powers: the coset shift by g or g^-1).
@compute @workgroup_size(64)
fn ntt_distribute_powers(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = thread_index(id, groups);
    if (i >= params.count) { return; }
    data[i] = fr_mul(data[i], table_power(params.first + i));
}

// The H step's pointwise part on the coset: a = (a·b - c) / Z, with 1/Z = tables[factor]
// (bellperson's mul_assign, sub_assign, divide_by_z_on_coset in one pass).
@compute @workgroup_size(64)
fn ntt_h_combine(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = thread_index(id, groups);
    if (i >= params.count) { return; }
    let ab = fr_mul(data[i], coset_b[i]);
    data[i] = fr_mul(fr_sub(ab, coset_c[i]), tables[params.factor]);
}
