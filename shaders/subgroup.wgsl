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
// One point a thread. [k]P runs by double-and-add from k's top bit in Jacobian coordinates,
// one call site each of jacobian_double (7 products) and jacobian_add_affine (11), where the
// MSM's XYZZ forms take 9 and 10: k's few set bits (G1: 127 doublings and 16 additions; G2: 63
// and 5) make the doubling what counts, ~18% fewer products a point. It runs in passes of at
// most `high - low` bits where a loop cap bounds an invocation (llvmpipe): each pass keeps
// its sum in `sums` for the next, the first starts from P, the last compares. A point that
// fails lowers its kernel's entry of `first_bad` (0: off the curve, 1: outside the
// subgroup) to its index among all the points checked, so the host reads both once, after
// every chunk; a point off the curve may be named outside too.
//
// The ladder's sums are [m]P for the prefixes m of k, 2 <= m < k < r. For P in the subgroup
// (prime order r) none is the identity or ±P; where one is, P is outside, and the formulas
// below then give the identity (Z = 0), which stays the identity and fails the comparison.
// So they need no case for equal or opposite points, and give no wrong answer for them.

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
@group(0) @binding(2) var<storage, read_write> sums: array<Jacobian>;
// endo's coefficients and the curve's b: [beta, 1, 4] on G1, [c0, c1, 4(1 + u)] on G2.
@group(0) @binding(3) var<storage, read> constants: array<Field, 3>;
@group(0) @binding(4) var<storage, read_write> first_bad: array<atomic<u32>, 2>;

fn k_bit(i: u32) -> bool {
    let words = array<u32, 4>(params.k0, params.k1, params.k2, params.k3);
    return ((words[i / 32u] >> (i % 32u)) & 1u) == 1u;
}

// (X / Z^2, Y / Z^3); Z = 0 is the identity.
struct Jacobian {
    x: Field,
    y: Field,
    z: Field,
}

// 2p: EFD dbl-2009-l (a = 0), 2M + 5S, one call of field_mul in a loop over the steps as in
// curve.wgsl. Z3 = 2 Y Z: the identity (Z = 0) and a point of order two (Y = 0) double to
// the identity.
fn jacobian_double(p: Jacobian) -> Jacobian {
    var x = p.x;
    var y = p.y;
    var z = p.z;
    // t0: A = X^2, then E = 3A. t1: B = Y^2. t2: C = B^2. t3: D = 2((X + B)^2 - A - C).
    var t0: Field;
    var t1: Field;
    var t2: Field;
    var t3: Field;
    var step = 0u;
    loop {
        if (step > 6u) { break; }
        var a: Field;
        var b: Field;
        switch step {
            case 0u: { a = x; b = x; }
            case 1u: { a = y; b = y; }
            case 2u: { a = t1; b = t1; }
            case 3u: { a = field_add(x, t1); b = a; }
            case 4u: { a = t0; b = t0; }
            case 5u: { a = y; b = z; }
            default: { a = t0; b = field_sub(t3, x); }
        }
        let m = field_mul(a, b);
        switch step {
            case 0u: { t0 = m; }
            case 1u: { t1 = m; }
            case 2u: { t2 = m; }
            case 3u: {
                t3 = field_double(field_sub(field_sub(m, t0), t2));
                t0 = field_add(field_double(t0), t0);
            }
            // X3 = E^2 - 2D
            case 4u: { x = field_sub(m, field_double(t3)); }
            // Z3 = 2 Y Z, with Y still p's
            case 5u: { z = field_double(m); }
            // Y3 = E (D - X3) - 8C
            default: { y = field_sub(m, field_double(field_double(field_double(t2)))); }
        }
        step++;
    }
    return Jacobian(x, y, z);
}

// p + q for an affine q, not the identity: EFD madd-2007-bl, 7M + 4S, with Z3 = 2 Z1 H. So
// where p and q share x (p = ±q, H = 0) it gives the identity, as the ladder above needs (see
// the top), and an identity p (Z1 = 0) stays the identity.
fn jacobian_add_affine(p: Jacobian, q: Affine) -> Jacobian {
    var x = p.x;
    var y = p.y;
    var z = p.z;
    // t0: Z1^2. t1: U2 = X2 Z1^2, then H = U2 - X1. t2: Z1^3, then S2 = Y2 Z1^3, then
    // r = 2(S2 - Y1). t3: HH, then I = 4HH. t4: J = H I, then 2 Y1 J. t5: V = X1 I.
    var t0: Field;
    var t1: Field;
    var t2: Field;
    var t3: Field;
    var t4: Field;
    var t5: Field;
    var step = 0u;
    loop {
        if (step > 10u) { break; }
        var a: Field;
        var b: Field;
        switch step {
            case 0u: { a = z; b = z; }
            case 1u: { a = q.x; b = t0; }
            case 2u: { a = z; b = t0; }
            case 3u: { a = q.y; b = t2; }
            case 4u: { a = t1; b = t1; }
            case 5u: { a = t1; b = t3; }
            case 6u: { a = x; b = t3; }
            case 7u: { a = t2; b = t2; }
            case 8u: { a = z; b = t1; }
            case 9u: { a = y; b = t4; }
            default: { a = t2; b = field_sub(t5, x); }
        }
        let m = field_mul(a, b);
        switch step {
            case 0u: { t0 = m; }
            case 1u: { t1 = field_sub(m, x); }
            case 2u: { t2 = m; }
            case 3u: { t2 = field_double(field_sub(m, y)); }
            case 4u: { t3 = field_double(field_double(m)); }
            case 5u: { t4 = m; }
            case 6u: { t5 = m; }
            // X3 = r^2 - J - 2V
            case 7u: { x = field_sub(field_sub(m, t4), field_double(t5)); }
            case 8u: { z = field_double(m); }
            // 2 Y1 J, with Y1 still p's
            case 9u: { t4 = field_double(m); }
            // Y3 = r (V - X3) - 2 Y1 J
            default: { y = field_sub(m, t4); }
        }
        step++;
    }
    return Jacobian(x, y, z);
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
        // The identity is in every subgroup; no pass computes its sum.
        return;
    }
    var sum = sums[index];
    var bit = params.high;
    if (params.high == params.k_bits) {
        sum = Jacobian(p.x, p.y, field_one());
        bit = params.k_bits - 1u;
    }
    // Bit `bit` (when above `low`) doubles, then adds P where it is set.
    var add_next = false;
    loop {
        if (bit <= params.low && !add_next) { break; }
        if (add_next) {
            sum = jacobian_add_affine(sum, p);
            add_next = false;
        } else {
            sum = jacobian_double(sum);
            bit = bit - 1u;
            add_next = k_bit(bit);
        }
    }
    if (params.low > 0u) {
        sums[index] = sum;
        return;
    }
    // [k]P = -endo(P): X = ex Z^2 and Y = -ey Z^3, for the affine (ex, ey) = endo(P).
    let ex = field_mul(constants[0], field_frobenius(p.x));
    let ey = field_mul(constants[1], field_frobenius(p.y));
    let zz = field_mul(sum.z, sum.z);
    let equal = !field_is_zero(sum.z)
        && field_is_zero(field_sub(sum.x, field_mul(ex, zz)))
        && field_is_zero(field_add(sum.y, field_mul(ey, field_mul(zz, sum.z))));
    if (!equal) { atomicMin(&first_bad[1], params.first + index); }
}
