// Short Weierstrass curve arithmetic (y^2 = x^3 + b, a = 0) over `Field`, for G1 and G2.
//
// Affine points are laid out as blstrs keeps them (x, y), with blst's identity (0, 0).
// Accumulators are XYZZ coordinates (x = X/ZZ, y = Y/ZZZ, ZZ^3 = ZZZ^2), identity ZZ = 0:
// adding an affine point costs 8M + 2S and needs no inversion.
//
// There is one addition, `xyzz_add`, and kernels call it from a single place in their loops:
// drivers inline every call (Mesa always does), so each call site of a point addition is
// thousands of instructions, and compile time grows faster than linearly with them.

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

// The affine point as an accumulator with ZZ = ZZZ = 1 (identity stays identity); pass it to
// xyzz_add with q_is_affine = true to skip the multiplications by one.
fn xyzz_from_affine(a: Affine, negate: bool) -> Xyzz {
    if (affine_is_identity(a)) { return xyzz_identity(); }
    var y = a.y;
    if (negate) { y = field_neg(y); }
    return Xyzz(a.x, y, field_one(), field_one());
}

// p + q, for any p and q (identity, equal, opposite). EFD add-2008-s; when p == q the same
// multiplications compute dbl-2008-s-1 (pd = 2Y, r = 3X^2, and no -PPP term in X3), so
// doubling needs no second copy of the formula. `q_is_affine` means q.zz = q.zzz = 1.
//
// Every multiplication goes through one call of field_mul in a loop over the formula's
// steps, operands chosen per step: drivers inline each call site (an Fq multiplication is
// hundreds of instructions), and eleven inlined copies made a kernel too large to stay in the
// instruction cache.
fn xyzz_add(p: Xyzz, q: Xyzz, q_is_affine: bool) -> Xyzz {
    if (xyzz_is_identity(p)) { return q; }
    if (xyzz_is_identity(q)) { return p; }
    var u1 = p.x;
    var s1 = p.y;
    var zz = p.zz;
    var zzz = p.zzz;
    var pd: Field;
    var r: Field;
    var pp: Field;
    var ppp: Field;
    var t: Field;
    var x3: Field;
    var y3: Field;
    var doubling = false;
    // Steps 0-3 bring p to q's scale (skipped for affine q), 4-5 bring q to p's, 6 is
    // doubling's X^2, 7-14 the common tail.
    var step = 0u;
    if (q_is_affine) { step = 4u; }
    loop {
        if (step > 14u) { break; }
        var a: Field;
        var b: Field;
        switch step {
            case 0u: { a = p.x; b = q.zz; }
            case 1u: { a = p.y; b = q.zzz; }
            case 2u: { a = p.zz; b = q.zz; }
            case 3u: { a = p.zzz; b = q.zzz; }
            case 4u: { a = q.x; b = p.zz; }
            case 5u: { a = q.y; b = p.zzz; }
            case 6u: { a = p.x; b = p.x; }
            case 7u: { a = pd; b = pd; }
            case 8u: { a = pd; b = pp; }
            case 9u: { a = u1; b = pp; }
            case 10u: { a = r; b = r; }
            case 11u: { a = r; b = field_sub(t, x3); }
            case 12u: { a = s1; b = ppp; }
            case 13u: { a = zz; b = pp; }
            default: { a = zzz; b = ppp; }
        }
        let m = field_mul(a, b);
        switch step {
            case 0u: { u1 = m; }
            case 1u: { s1 = m; }
            case 2u: { zz = m; }
            case 3u: { zzz = m; }
            case 4u: { pd = field_sub(m, u1); }
            case 5u: {
                r = field_sub(m, s1);
                if (field_is_zero(pd)) {
                    if (!field_is_zero(r)) { return xyzz_identity(); }
                    doubling = true;
                    pd = field_double(p.y);
                    u1 = p.x;
                    s1 = p.y;
                    zz = p.zz;
                    zzz = p.zzz;
                } else {
                    step = 6u; // no X^2 to compute
                }
            }
            case 6u: { r = field_add(field_double(m), m); }
            case 7u: { pp = m; }
            case 8u: { ppp = m; }
            case 9u: { t = m; }
            case 10u: {
                x3 = field_sub(m, field_double(t));
                if (!doubling) { x3 = field_sub(x3, ppp); }
            }
            case 11u: { y3 = m; }
            case 12u: { y3 = field_sub(y3, m); }
            case 13u: { zz = m; }
            default: { zzz = m; }
        }
        step++;
    }
    return Xyzz(x3, y3, zz, zzz);
}
