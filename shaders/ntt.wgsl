// Radix-2 number-theoretic transform over Fr, in place, in the same order as bellperson's
// EvaluationDomain: bit-reversal, then log2(n) butterfly stages, output in natural order
// (decimation in time). Each butterfly kernel has a twin in frequency (`_dif`): the stages
// from the top down on natural-order input, output in bit-reversed order, so that an inverse
// transform followed by a forward one (the H step's way to the coset) needs neither bit
// reversal. The twins share one function, called with a literal `dif`, so that after
// inlining each entry point holds one kind of butterfly and no branch on it.
//
// The vector may be split into 2^part_bits equal parts, one buffer each, so that it can be
// longer than a binding allows (2^27 Fr is 4 GiB; NVIDIA binds 2 GiB). Each dispatch sees one
// part as `data` and, for the steps that pair elements of two parts, another as `partner`.
// One part is the common case and runs the same code.
//
// Powers of a base b (ω, ω^-1, the coset generator g, g^-1) come from two tables,
// b^e = lo[e mod 2^split] · hi[e >> split], instead of an n-entry table per base (hi holds
// up to HIGH_TABLE_BITS of the exponent, src/ntt/tables.rs; below that size split is 0 and
// lo is [1]).

struct NttParams {
    n: u32,
    log_n: u32,
    // ntt_butterflies(_across_parts): the stage's half-size.
    half: u32,
    // Index in `tables` of the base's lo table; its hi table follows 2^split entries later.
    table: u32,
    split: u32,
    // Index in `tables` of the factor ntt_scale, ntt_h_finish and a scaled
    // ntt_distribute_powers multiply by.
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
    // ntt_distribute_powers: 1 when the data is in bit-reversed order (element i takes
    // base^rev(i)).
    bit_reversed: u32,
    // ntt_distribute_powers: 1 to multiply by tables[factor] as well (an inverse transform's
    // 1/n, in the same pass).
    scaled: u32,
    _pad: u32,
}

// Elements cross memory (and workgroup memory) as FrWords, two 16-byte vectors: two wide
// accesses where an array<u32, 8> took eight of one word (measured faster:
// docs/benchmarks/gpu-part-2-27.md, commit 0559c8d).
@group(0) @binding(0) var<uniform> params: NttParams;
@group(0) @binding(1) var<storage, read_write> data: array<FrWords>;
@group(0) @binding(2) var<storage, read> tables: array<FrWords>;
// The H step's other two vectors: b evaluated on the coset (ntt_h_product), and n times c's
// coefficients in bit-reversed order (ntt_h_finish).
@group(0) @binding(3) var<storage, read> h_b: array<FrWords>;
@group(0) @binding(4) var<storage, read> h_c: array<FrWords>;
@group(0) @binding(5) var<storage, read_write> partner: array<FrWords>;

// base^e through the lo/hi tables of `params.table`. In all but a transform's last `split`
// stages every twiddle exponent is a multiple of 2^split (the same branch for every
// invocation): the hi entry alone is the power, and the multiplication is skipped.
fn table_power(e: u32) -> Fr {
    let hi = fr_from_words(tables[params.table + (1u << params.split) + (e >> params.split)]);
    let low_bits = e & ((1u << params.split) - 1u);
    if (low_bits == 0u) { return hi; }
    return fr_mul(fr_from_words(tables[params.table + low_bits]), hi);
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

// Decimation in time: x <- x + w·y, y <- x - w·y. In frequency: x <- x + y, y <- (x - y)·w.
// One multiplication call site either way (each is inlined where it is called).
fn butterfly(x: ptr<function, Fr>, y: ptr<function, Fr>, w: Fr, dif: bool) {
    let a = *x;
    let b = *y;
    var factor = b;
    if (dif) { factor = fr_sub(a, b); }
    let m = fr_mul(factor, w);
    if (dif) {
        *x = fr_add(a, b);
        *y = m;
    } else {
        *x = fr_add(a, m);
        *y = fr_sub(a, m);
    }
}

// One stage within a part: x[i] and x[i + half] with twiddle ω^(j·n/(2·half)), j = i mod half
// (parts are multiples of 2·half long here, so j is the same globally).
fn one_stage(t: u32, dif: bool) {
    if (t >= params.count) { return; }
    let half = params.half;
    let j = t % half;
    let i0 = (t / half) * 2u * half + j;
    let i1 = i0 + half;
    var x = fr_from_words(data[i0]);
    var y = fr_from_words(data[i1]);
    butterfly(&x, &y, table_power(j * (params.n / (2u * half))), dif);
    data[i0] = fr_to_words(x);
    data[i1] = fr_to_words(y);
}

@compute @workgroup_size(64)
fn ntt_butterflies(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    one_stage(thread_index(id, groups), false);
}

@compute @workgroup_size(64)
fn ntt_butterflies_dif(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    one_stage(thread_index(id, groups), true);
}

const LOCAL_BITS: u32 = 8u;
var<workgroup> tile: array<FrWords, 256>;

// Up to LOCAL_BITS consecutive stages in workgroup memory, so the vector crosses memory once
// for them instead of once per stage (chosen per adapter: lavapipe runs it far slower than
// ntt_butterflies, its barriers being costly on a CPU). Stages s..s+b-1 only combine elements that agree on
// every index bit outside [s, s+b): a block is {base + j·2^s : j < 2^b}, loaded into `tile`,
// where stage s+t pairs j with j + 2^t. (s = 0 is a contiguous block.)
fn local_stages(lid: u32, block: u32, dif: bool) {
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
    for (var k = 0u; k < params.stages; k++) {
        if (has_pair) {
            var t = k;
            if (dif) { t = params.stages - 1u - k; }
            let half = 1u << t;
            let jj = lid % half;
            let j0 = (lid / half) * 2u * half + jj;
            // Global stage s + t, half-size m = 2^(s+t): the pair's index mod m is r + jj·2^s.
            var x = fr_from_words(tile[j0]);
            var y = fr_from_words(tile[j0 + half]);
            butterfly(&x, &y, table_power(((jj << s) + r) * (params.n >> (s + t + 1u))), dif);
            tile[j0] = fr_to_words(x);
            tile[j0 + half] = fr_to_words(y);
        }
        workgroupBarrier();
    }
    if (has_pair) {
        data[base + (lid << s)] = tile[lid];
        data[base + ((lid + size / 2u) << s)] = tile[lid + size / 2u];
    }
}

@compute @workgroup_size(128)
fn ntt_butterflies_local(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    local_stages(lid, wid.x + wid.y * groups.x, false);
}

@compute @workgroup_size(128)
fn ntt_butterflies_local_dif(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    local_stages(lid, wid.x + wid.y * groups.x, true);
}

// Stage s of a radix-4 pass: x0 with x1 and x2 with x3.
fn radix4_lower(x0: ptr<function, Fr>, x1: ptr<function, Fr>, x2: ptr<function, Fr>, x3: ptr<function, Fr>, r: u32, dif: bool) {
    let w0 = table_power(r * (params.n >> (params.stage + 1u)));
    butterfly(x0, x1, w0, dif);
    butterfly(x2, x3, w0, dif);
}

// Stage s + 1 of a radix-4 pass: x0 with x2 and x1 with x3.
fn radix4_upper(x0: ptr<function, Fr>, x1: ptr<function, Fr>, x2: ptr<function, Fr>, x3: ptr<function, Fr>, r: u32, dif: bool) {
    let step1 = params.n >> (params.stage + 2u);
    butterfly(x0, x2, table_power(r * step1), dif);
    butterfly(x1, x3, table_power((r + (1u << params.stage)) * step1), dif);
}

// Two consecutive stages s, s+1 in registers, four elements an invocation (as
// ntt_butterflies_radix8, with half its registers); straight-line code, the stages in either
// order.
fn radix4_stages(t: u32, dif: bool) {
    if (t >= params.count) { return; }
    let s = params.stage;
    let r = t & ((1u << s) - 1u);
    let base = ((t >> s) << (s + 2u)) + r;
    var x0 = fr_from_words(data[base]);
    var x1 = fr_from_words(data[base + (1u << s)]);
    var x2 = fr_from_words(data[base + (2u << s)]);
    var x3 = fr_from_words(data[base + (3u << s)]);
    if (dif) {
        radix4_upper(&x0, &x1, &x2, &x3, r, dif);
        radix4_lower(&x0, &x1, &x2, &x3, r, dif);
    } else {
        radix4_lower(&x0, &x1, &x2, &x3, r, dif);
        radix4_upper(&x0, &x1, &x2, &x3, r, dif);
    }
    data[base] = fr_to_words(x0);
    data[base + (1u << s)] = fr_to_words(x1);
    data[base + (2u << s)] = fr_to_words(x2);
    data[base + (3u << s)] = fr_to_words(x3);
}

@compute @workgroup_size(64)
fn ntt_butterflies_radix4(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    radix4_stages(thread_index(id, groups), false);
}

@compute @workgroup_size(64)
fn ntt_butterflies_radix4_dif(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    radix4_stages(thread_index(id, groups), true);
}

// Three consecutive stages s, s+1, s+2 in registers: each invocation loads the eight
// elements {base + j·2^s : j < 8} that these stages combine (as ntt_butterflies_local's
// blocks, with neighbouring invocations on neighbouring elements, so every load and store is
// coalesced for s >= 5), and stores them once. Eight named values, not an array: a
// dynamically indexed private array would live in slow local memory.
fn radix8_stages(t: u32, dif: bool) {
    if (t >= params.count) { return; }
    let s = params.stage;
    let r = t & ((1u << s) - 1u);
    let base = ((t >> s) << (s + 3u)) + r;
    var x0 = fr_from_words(data[base]);
    var x1 = fr_from_words(data[base + (1u << s)]);
    var x2 = fr_from_words(data[base + (2u << s)]);
    var x3 = fr_from_words(data[base + (3u << s)]);
    var x4 = fr_from_words(data[base + (4u << s)]);
    var x5 = fr_from_words(data[base + (5u << s)]);
    var x6 = fr_from_words(data[base + (6u << s)]);
    var x7 = fr_from_words(data[base + (7u << s)]);
    // Stage s + k pairs j with j + 2^k; the pair's index mod 2^(s+k) is r + (j mod 2^k)·2^s,
    // its twiddle exponent that times n / 2^(s+k+1).
    // Stages s, s + 1, s + 2 (in frequency: from s + 2 down).
    for (var k = 0u; k < 3u; k++) {
        var level = k;
        if (dif) { level = 2u - k; }
        switch level {
            case 0u: {
                let w0 = table_power(r * (params.n >> (s + 1u)));
                butterfly(&x0, &x1, w0, dif);
                butterfly(&x2, &x3, w0, dif);
                butterfly(&x4, &x5, w0, dif);
                butterfly(&x6, &x7, w0, dif);
            }
            case 1u: {
                let step1 = params.n >> (s + 2u);
                let w10 = table_power(r * step1);
                let w11 = table_power((r + (1u << s)) * step1);
                butterfly(&x0, &x2, w10, dif);
                butterfly(&x1, &x3, w11, dif);
                butterfly(&x4, &x6, w10, dif);
                butterfly(&x5, &x7, w11, dif);
            }
            default: {
                let step2 = params.n >> (s + 3u);
                butterfly(&x0, &x4, table_power(r * step2), dif);
                butterfly(&x1, &x5, table_power((r + (1u << s)) * step2), dif);
                butterfly(&x2, &x6, table_power((r + (2u << s)) * step2), dif);
                butterfly(&x3, &x7, table_power((r + (3u << s)) * step2), dif);
            }
        }
    }
    data[base] = fr_to_words(x0);
    data[base + (1u << s)] = fr_to_words(x1);
    data[base + (2u << s)] = fr_to_words(x2);
    data[base + (3u << s)] = fr_to_words(x3);
    data[base + (4u << s)] = fr_to_words(x4);
    data[base + (5u << s)] = fr_to_words(x5);
    data[base + (6u << s)] = fr_to_words(x6);
    data[base + (7u << s)] = fr_to_words(x7);
}

@compute @workgroup_size(64)
fn ntt_butterflies_radix8(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    radix8_stages(thread_index(id, groups), false);
}

@compute @workgroup_size(64)
fn ntt_butterflies_radix8_dif(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    radix8_stages(thread_index(id, groups), true);
}

// One stage whose pairs lie in two parts (half >= part length): data[t] with partner[t],
// the part `half` elements later.
fn across_parts(t: u32, dif: bool) {
    if (t >= params.count) { return; }
    let half = params.half;
    let j = (params.first % half) + t;
    var x = fr_from_words(data[t]);
    var y = fr_from_words(partner[t]);
    butterfly(&x, &y, table_power(j * (params.n / (2u * half))), dif);
    data[t] = fr_to_words(x);
    partner[t] = fr_to_words(y);
}

@compute @workgroup_size(64)
fn ntt_butterflies_across_parts(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    across_parts(thread_index(id, groups), false);
}

@compute @workgroup_size(64)
fn ntt_butterflies_across_parts_dif(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    across_parts(thread_index(id, groups), true);
}

// x[i] *= tables[factor] (1/n after an inverse transform).
@compute @workgroup_size(64)
fn ntt_scale(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = thread_index(id, groups);
    if (i >= params.count) { return; }
    data[i] = fr_to_words(fr_mul(fr_from_words(data[i]), fr_from_words(tables[params.factor])));
}

// x[i] *= base^i (bellperson's distribute_powers: the coset shift by g or g^-1), base^rev(i)
// on bit-reversed data; times tables[factor] too when `scaled`.
@compute @workgroup_size(64)
fn ntt_distribute_powers(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = thread_index(id, groups);
    if (i >= params.count) { return; }
    var e = params.first + i;
    if (params.bit_reversed != 0u) { e = reverse_low_bits(e, params.log_n); }
    var power = table_power(e);
    if (params.scaled != 0u) { power = fr_mul(power, fr_from_words(tables[params.factor])); }
    data[i] = fr_to_words(fr_mul(fr_from_words(data[i]), power));
}

// The H step's product on the coset: a = a·b.
@compute @workgroup_size(64)
fn ntt_h_product(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = thread_index(id, groups);
    if (i >= params.count) { return; }
    data[i] = fr_to_words(fr_mul(fr_from_words(data[i]), fr_from_words(h_b[i])));
}

// The H step's last pass, on the bit-reversed output of the unscaled inverse transform of
// a·b: with k = rev(i), h_k = (x·g^-k - c')·tables[factor], c' being n times C's k-th
// coefficient and the factor 1/(n·Z). This is bellperson's coset inverse transform of
// (a·b - c)/Z on the coset: Z is one constant there, and the coset inverse transform of C
// on the coset is C's coefficients, which c's own inverse transform gives without c's trip
// to the coset and back.
@compute @workgroup_size(64)
fn ntt_h_finish(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = thread_index(id, groups);
    if (i >= params.count) { return; }
    let k = reverse_low_bits(params.first + i, params.log_n);
    let shifted = fr_mul(fr_from_words(data[i]), table_power(k));
    data[i] = fr_to_words(fr_mul(fr_sub(shifted, fr_from_words(h_c[i])), fr_from_words(tables[params.factor])));
}
