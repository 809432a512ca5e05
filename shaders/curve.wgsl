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
fn xyzz_add(p: Xyzz, q: Xyzz, q_is_affine: bool) -> Xyzz {
    if (xyzz_is_identity(p)) { return q; }
    if (xyzz_is_identity(q)) { return p; }
    var u1 = p.x;
    var s1 = p.y;
    var zz = p.zz;
    var zzz = p.zzz;
    if (!q_is_affine) {
        u1 = field_mul(p.x, q.zz);
        s1 = field_mul(p.y, q.zzz);
        zz = field_mul(p.zz, q.zz);
        zzz = field_mul(p.zzz, q.zzz);
    }
    let u2 = field_mul(q.x, p.zz);
    let s2 = field_mul(q.y, p.zzz);
    var pd = field_sub(u2, u1);
    var r = field_sub(s2, s1);
    let doubling = field_is_zero(pd) && field_is_zero(r);
    if (field_is_zero(pd) && !doubling) { return xyzz_identity(); }
    if (doubling) {
        pd = field_double(p.y);
        let x2 = field_square(p.x);
        r = field_add(field_double(x2), x2);
        u1 = p.x;
        s1 = p.y;
        zz = p.zz;
        zzz = p.zzz;
    }
    let pp = field_square(pd);
    let ppp = field_mul(pd, pp);
    let t = field_mul(u1, pp);
    var x3 = field_sub(field_square(r), field_double(t));
    if (!doubling) { x3 = field_sub(x3, ppp); }
    let y3 = field_sub(field_mul(r, field_sub(t, x3)), field_mul(s1, ppp));
    return Xyzz(x3, y3, field_mul(zz, pp), field_mul(zzz, ppp));
}
