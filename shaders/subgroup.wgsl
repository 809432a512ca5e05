// Curve and prime-order subgroup membership of affine points (G1 or G2 through the Field
// prelude), as a parameter file's points need once. `curve_check` asks what blst's
// deserializer asks: y^2 = x^3 + b, where the all-zero encoding counts as the identity, and
// on G1 no x = 0 (blst refuses (0, ±2), which are not in G1). `subgroup_check` then asks:
// a point P on the curve is in the subgroup iff [k]P = -endo(P), where
//
//   G1: k = z^2, endo(x, y) = (beta x, y), beta a cube root of unity in Fq;
//   G2: k = |z|, endo = psi(x, y) = (c0 conj(x), c1 conj(y)), the untwist-Frobenius-twist map,
//
// z = -0xd201000000010000 the curve's parameter (Scott, "A note on group membership tests
// for G1, G2 and GT on BLS pairing-friendly curves", 2021). The host gives k and endo's two
// coefficients (G1: beta and 1), so the same source serves both curves.
//
// One point a thread. [k]P runs by double-and-add from k's top bit, one call site each of
// xyzz_double and xyzz_add_affine (15 and 14 products a step through xyzz_add, 9 and 10
// here), in passes of at most `high - low` bits where a loop cap
// bounds an invocation (llvmpipe): each pass keeps its sum in `sums` for the next, the first
// starts from P, the last compares. A point that fails lowers its kernel's entry of `first_bad`
// (0: off the curve, 1: outside the subgroup) to its index among all the points checked, so
// the host reads both once, after every chunk; a point off the curve may be named outside too.

struct SubgroupParams {
    // Points in this dispatch.
    count: u32,
    // The bits of k this pass runs through: from bit `high` - 1 down to `low`. A pass with
    // high == k_bits starts the sum at P (k's top bit); one with low == 0 compares.
    high: u32,
    low: u32,
    k_bits: u32,
    // k, least significant word first.
    k0: u32,
    k1: u32,
    k2: u32,
    k3: u32,
    // The index, among all the points checked, of this dispatch's first.
    first: u32,
    // 1 where a point with x = 0 is refused (G1), 0 where the identity's (0, 0) is the only
    // one and is on the curve (G2).
    x_zero_refused: u32,
}

const NONE_BAD: u32 = 0xffffffffu;

@group(0) @binding(0) var<uniform> params: SubgroupParams;
@group(0) @binding(1) var<storage, read> points: array<Affine>;
@group(0) @binding(2) var<storage, read_write> sums: array<Xyzz>;
// endo's coefficients and the curve's b: [beta, 1, 4] on G1, [c0, c1, 4(1 + u)] on G2.
@group(0) @binding(3) var<storage, read> constants: array<Field, 3>;
@group(0) @binding(4) var<storage, read_write> first_bad: array<atomic<u32>, 2>;

fn k_bit(i: u32) -> bool {
    let words = array<u32, 4>(params.k0, params.k1, params.k2, params.k3);
    return ((words[i / 32u] >> (i % 32u)) & 1u) == 1u;
}

@compute @workgroup_size(64)
fn curve_check(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let index = thread_index(id, groups);
    if (index >= params.count) { return; }
    let p = points[index];
    var on_curve: bool;
    if (params.x_zero_refused == 1u && field_is_zero(p.x)) {
        on_curve = false;
    } else if (affine_is_identity(p)) {
        on_curve = true;
    } else {
        let rhs = field_add(field_mul(field_square(p.x), p.x), constants[2]);
        on_curve = field_is_zero(field_sub(field_square(p.y), rhs));
    }
    if (!on_curve) { atomicMin(&first_bad[0], params.first + index); }
}

@compute @workgroup_size(64)
fn subgroup_check(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let index = thread_index(id, groups);
    if (index >= params.count) { return; }
    let p = points[index];
    if (affine_is_identity(p)) {
        // The identity is in every subgroup; its sum stays the identity.
        sums[index] = xyzz_identity();
        return;
    }
    var sum = sums[index];
    var bit = params.high;
    if (params.high == params.k_bits) {
        sum = Xyzz(p.x, p.y, field_one(), field_one());
        bit = params.k_bits - 1u;
    }
    // Bit `bit` (when above `low`) doubles, then adds P where it is set.
    var add_next = false;
    loop {
        if (bit <= params.low && !add_next) { break; }
        if (add_next) {
            sum = xyzz_add_affine(sum, p);
            add_next = false;
        } else {
            sum = xyzz_double(sum);
            bit = bit - 1u;
            add_next = k_bit(bit);
        }
    }
    if (params.low > 0u) {
        sums[index] = sum;
        return;
    }
    // [k]P = -endo(P): X = ex ZZ and Y = -ey ZZZ, for the affine (ex, ey) = endo(P).
    let ex = field_mul(constants[0], field_frobenius(p.x));
    let ey = field_mul(constants[1], field_frobenius(p.y));
    let equal = !xyzz_is_identity(sum)
        && field_is_zero(field_sub(sum.x, field_mul(ex, sum.zz)))
        && field_is_zero(field_add(sum.y, field_mul(ey, sum.zzz)));
    if (!equal) { atomicMin(&first_bad[1], params.first + index); }
}
