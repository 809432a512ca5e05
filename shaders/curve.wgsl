// Short Weierstrass curve arithmetic (y^2 = x^3 + b, a = 0) over `Field`, for G1 and G2.
//
// Affine points are laid out as blstrs keeps them (x, y), with blst's identity (0, 0).
// Accumulators are XYZZ coordinates (x = X/ZZ, y = Y/ZZZ, ZZ^3 = ZZZ^2), identity ZZ = 0:
// adding an affine point costs 8M + 2S and needs no inversion. Coordinates lie below the
// field's bound (fq_bound: 2p on the int64 path, whose products skip their final subtraction);
// the host reduces the sums it reads back.
//
// There are two additions, `xyzz_add` (any two accumulators) and `xyzz_add_affine` (an
// accumulator and an affine point, the MSM's level 0), and a doubling, `xyzz_double` (the
// subgroup check's scalar multiplication); a kernel calls each it needs from a single place
// in its loop: drivers inline every call (Mesa always does), so each call site of a point
// operation is thousands of instructions, and compile time grows faster than linearly with
// them.

struct Affine {
    x: Field,
    y: Field,
}

struct Xyzz {
    x: Field,
    y: Field,
    zz: Field,
    zzz: Field,
}

fn xyzz_identity() -> Xyzz {
    return Xyzz(field_one(), field_one(), field_zero(), field_zero());
}

fn xyzz_is_identity(p: Xyzz) -> bool { return field_is_zero(p.zz); }

fn affine_is_identity(a: Affine) -> bool { return field_is_zero(a.x) && field_is_zero(a.y); }

// p + q, for any p and q (identity, equal, opposite). EFD add-2008-s; when p == q the same
// multiplications compute dbl-2008-s-1 (P = 2Y, R = 3X^2, and no -PPP term in X3), so
// doubling needs no second copy of the formula.
//
// Every multiplication goes through one call of field_mul in a loop over the formula's
// steps, operands chosen per step: drivers inline each call site (an Fq multiplication is
// hundreds of instructions), and eleven inlined copies made a kernel too large to stay in the
// instruction cache. Inside the loop every variable is live throughout, so the formula works
// in place on p's four coordinates and four temporaries: registers bound this kernel (each
// field element is 12 words, 24 for G2), and fewer live elements mean more threads resident.
// q itself is copied into the temporaries before the loop, so it is not live across it.
fn xyzz_add(p: Xyzz, q: Xyzz) -> Xyzz {
    if (xyzz_is_identity(p)) { return q; }
    if (xyzz_is_identity(q)) { return p; }
    // x, y: X1 and Y1 brought to q's scale (U1, S1), then X3 and Y3.
    var x = p.x;
    var y = p.y;
    var zz = p.zz;
    var zzz = p.zzz;
    // t0: q's X, then U2, then P (or 2Y), then PPP. t1: q's Y, then S2, then R (or 3X^2),
    // then R (Q - X3). t2: q's ZZ, then PP, then Q. t3: q's ZZZ.
    var t0 = q.x;
    var t1 = q.y;
    var t2 = q.zz;
    var t3 = q.zzz;
    var doubling = false;
    // Steps 0-1 bring q to p's scale, 2-5 p to q's, 6 is doubling's X^2, 7-14 the common
    // tail.
    var step = 0u;
    loop {
        if (step > 14u) { break; }
        var a: Field;
        var b: Field;
        switch step {
            case 0u: { a = t0; b = zz; }
            case 1u: { a = t1; b = zzz; }
            case 2u: { a = x; b = t2; }
            case 3u: { a = y; b = t3; }
            case 4u: { a = zz; b = t2; }
            case 5u: { a = zzz; b = t3; }
            case 6u: { a = x; b = x; }
            case 7u: { a = t0; b = t0; }
            case 8u: { a = t0; b = t2; }
            case 9u: { a = zz; b = t2; }
            case 10u: { a = zzz; b = t0; }
            case 11u: { a = x; b = t2; }
            case 12u: { a = t1; b = t1; }
            case 13u: { a = t1; b = field_sub(t2, x); }
            default: { a = y; b = t0; }
        }
        let m = field_mul(a, b);
        switch step {
            case 0u: { t0 = m; }
            case 1u: { t1 = m; }
            case 2u: { x = m; }
            case 3u: { y = m; }
            case 4u: { zz = m; }
            case 5u: { zzz = m; }
            case 6u: { t1 = field_add(field_double(m), m); }
            case 7u: { t2 = m; }
            case 8u: { t0 = m; }
            case 9u: { zz = m; }
            case 10u: { zzz = m; }
            case 11u: { t2 = m; }
            case 12u: {
                x = field_sub(m, field_double(t2));
                if (!doubling) { x = field_sub(x, t0); }
            }
            case 13u: { t1 = m; }
            default: { y = field_sub(t1, m); }
        }
        if (step == 5u) {
            // Both points on one scale: P = U2 - U1, R = S2 - S1.
            t0 = field_sub(t0, x);
            t1 = field_sub(t1, y);
            if (field_is_zero(t0)) {
                if (!field_is_zero(t1)) { return xyzz_identity(); }
                doubling = true;
                t0 = field_double(y);
            } else {
                step = 6u; // no X^2 to compute
            }
        }
        step++;
    }
    return Xyzz(x, y, zz, zzz);
}

// p + (x, y) for an affine point q (sign applied by the caller), any p and q: EFD
// madd-2008-s, 8M + 2S, and dbl-2008-s-1 for p == q as in xyzz_add. Level 0 of the MSM adds
// every base through it. Its steps are xyzz_add's for ZZ2 = ZZZ2 = 1 without the four that
// scale p, and its tail repeats xyzz_add's on purpose: one loop serving both (a flag skipping
// those steps) kept q's ZZZ live and chose among fifteen cases, and was slower on G1
// (docs/benchmarks/gpu-part-2-27.md, commit a7bc6ac).
fn xyzz_add_affine(p: Xyzz, q: Affine) -> Xyzz {
    if (affine_is_identity(q)) { return p; }
    if (xyzz_is_identity(p)) { return Xyzz(q.x, q.y, field_one(), field_one()); }
    var x = p.x;
    var y = p.y;
    var zz = p.zz;
    var zzz = p.zzz;
    // t0: q's x, then U2, then P (or 2Y), then PPP. t1: q's y, then S2, then R (or 3X^2),
    // then R (Q - X3). t2: PP, then Q.
    var t0 = q.x;
    var t1 = q.y;
    var t2: Field;
    var doubling = false;
    // Steps 0-1 bring q to p's scale, 2 is doubling's X^2, 3-10 the common tail.
    var step = 0u;
    loop {
        if (step > 10u) { break; }
        var a: Field;
        var b: Field;
        switch step {
            case 0u: { a = t0; b = zz; }
            case 1u: { a = t1; b = zzz; }
            case 2u: { a = x; b = x; }
            case 3u: { a = t0; b = t0; }
            case 4u: { a = t0; b = t2; }
            case 5u: { a = zz; b = t2; }
            case 6u: { a = zzz; b = t0; }
            case 7u: { a = x; b = t2; }
            case 8u: { a = t1; b = t1; }
            case 9u: { a = t1; b = field_sub(t2, x); }
            default: { a = y; b = t0; }
        }
        let m = field_mul(a, b);
        switch step {
            case 0u: { t0 = m; }
            case 1u: {
                // P = U2 - X1, R = S2 - Y1.
                t0 = field_sub(t0, x);
                t1 = field_sub(m, y);
            }
            case 2u: { t1 = field_add(field_double(m), m); }
            case 3u: { t2 = m; }
            case 4u: { t0 = m; }
            case 5u: { zz = m; }
            case 6u: { zzz = m; }
            case 7u: { t2 = m; }
            case 8u: {
                x = field_sub(m, field_double(t2));
                if (!doubling) { x = field_sub(x, t0); }
            }
            case 9u: { t1 = m; }
            default: { y = field_sub(t1, m); }
        }
        if (step == 1u) {
            if (field_is_zero(t0)) {
                if (!field_is_zero(t1)) { return xyzz_identity(); }
                doubling = true;
                t0 = field_double(y);
            } else {
                step = 2u; // no X^2 to compute
            }
        }
        step++;
    }
    return Xyzz(x, y, zz, zzz);
}

// 2p: EFD dbl-2008-s-1 (a = 0), 6M + 3S, where doubling through xyzz_add costs 15
// products (its six that bring two points to one scale, then the same tail). One call of
// field_mul in a loop over the steps, in place, as in xyzz_add. A point of order two
// (Y = 0) doubles to ZZ = 0, the identity.
fn xyzz_double(p: Xyzz) -> Xyzz {
    if (xyzz_is_identity(p)) { return p; }
    var x = p.x;
    var y = p.y;
    var zz = p.zz;
    var zzz = p.zzz;
    // t0: U = 2Y, then W = U V, then W Y. t1: V = U^2, then M = 3X^2. t2: S = X V.
    var t0 = field_double(y);
    var t1: Field;
    var t2: Field;
    var step = 0u;
    loop {
        if (step > 8u) { break; }
        var a: Field;
        var b: Field;
        switch step {
            case 0u: { a = t0; b = t0; }
            case 1u: { a = t0; b = t1; }
            case 2u: { a = x; b = t1; }
            case 3u: { a = zz; b = t1; }
            case 4u: { a = zzz; b = t0; }
            case 5u: { a = x; b = x; }
            case 6u: { a = t1; b = t1; }
            case 7u: { a = y; b = t0; }
            default: { a = t1; b = field_sub(t2, x); }
        }
        let m = field_mul(a, b);
        switch step {
            case 0u: { t1 = m; }
            case 1u: { t0 = m; }
            case 2u: { t2 = m; }
            case 3u: { zz = m; }
            case 4u: { zzz = m; }
            case 5u: { t1 = field_add(field_double(m), m); }
            // X3 = M^2 - 2S
            case 6u: { x = field_sub(m, field_double(t2)); }
            case 7u: { t0 = m; }
            // Y3 = M (S - X3) - W Y
            default: { y = field_sub(m, t0); }
        }
        step++;
    }
    return Xyzz(x, y, zz, zzz);
}
