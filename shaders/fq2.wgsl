// Fq2 = Fq[u] / (u^2 + 1), the field of G2's coordinates; c0 + c1·u as blstrs lays it out.

struct Fq2 {
    c0: Fq,
    c1: Fq,
}

fn fq2_zero() -> Fq2 { return Fq2(fq_zero(), fq_zero()); }

fn fq2_one() -> Fq2 { return Fq2(fq_one(), fq_zero()); }

fn fq2_is_zero(a: Fq2) -> bool { return fq_is_zero(a.c0) && fq_is_zero(a.c1); }

fn fq2_eq(a: Fq2, b: Fq2) -> bool { return fq_eq(a.c0, b.c0) && fq_eq(a.c1, b.c1); }

fn fq2_add(a: Fq2, b: Fq2) -> Fq2 { return Fq2(fq_add(a.c0, b.c0), fq_add(a.c1, b.c1)); }

fn fq2_sub(a: Fq2, b: Fq2) -> Fq2 { return Fq2(fq_sub(a.c0, b.c0), fq_sub(a.c1, b.c1)); }

fn fq2_neg(a: Fq2) -> Fq2 { return Fq2(fq_neg(a.c0), fq_neg(a.c1)); }

fn fq2_double(a: Fq2) -> Fq2 { return Fq2(fq_double(a.c0), fq_double(a.c1)); }

fn fq2_conjugate(a: Fq2) -> Fq2 { return Fq2(a.c0, fq_neg(a.c1)); }

// Karatsuba: a·b from three Fq products, factor(a, k)·factor(b, k) for k = 0, 1, 2.
// Every call site of a field multiply is inlined by the drivers (Mesa inlines everything),
// so G2 code stays the size of G1 code only if an Fq2 product holds a single Fq product;
// the point addition runs these steps in its own loop (see curve.wgsl).
fn fq2_karatsuba_factor(a: Fq2, k: u32) -> Fq {
    if (k == 0u) { return a.c0; }
    if (k == 1u) { return a.c1; }
    return fq_add(a.c0, a.c1);
}

fn fq2_from_karatsuba(v0: Fq, v1: Fq, v2: Fq) -> Fq2 {
    return Fq2(fq_sub(v0, v1), fq_sub(fq_sub(v2, v0), v1));
}

fn fq2_mul(a: Fq2, b: Fq2) -> Fq2 {
    var v0: Fq;
    var v1: Fq;
    var last: Fq;
    for (var k = 0u; k < 3u; k++) {
        last = fq_mul(fq2_karatsuba_factor(a, k), fq2_karatsuba_factor(b, k));
        if (k == 0u) {
            v0 = last;
        } else if (k == 1u) {
            v1 = last;
        }
    }
    return fq2_from_karatsuba(v0, v1, last);
}

fn fq2_square(a: Fq2) -> Fq2 { return fq2_mul(a, a); }

// Multiplies by the sextic non-residue u + 1 (used by the tower above Fq2).
fn fq2_mul_by_nonresidue(a: Fq2) -> Fq2 {
    return Fq2(fq_sub(a.c0, a.c1), fq_add(a.c0, a.c1));
}
