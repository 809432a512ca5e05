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

// Karatsuba: three Fq products instead of four, computed by one Fq multiply in a loop.
// Every call site of a field multiply is inlined by the drivers (Mesa inlines everything),
// so G2 code stays the size of G1 code only if an Fq2 product holds a single Fq product.
fn fq2_mul(a: Fq2, b: Fq2) -> Fq2 {
    var v0: Fq;
    var v1: Fq;
    var cross: Fq;
    for (var k = 0u; k < 3u; k++) {
        var x = a.c0;
        var y = b.c0;
        if (k == 1u) {
            x = a.c1;
            y = b.c1;
        } else if (k == 2u) {
            x = fq_add(a.c0, a.c1);
            y = fq_add(b.c0, b.c1);
        }
        let m = fq_mul(x, y);
        if (k == 0u) {
            v0 = m;
        } else if (k == 1u) {
            v1 = m;
        } else {
            cross = m;
        }
    }
    return Fq2(fq_sub(v0, v1), fq_sub(fq_sub(cross, v0), v1));
}

fn fq2_square(a: Fq2) -> Fq2 { return fq2_mul(a, a); }

// Multiplies by the sextic non-residue u + 1 (used by the tower above Fq2).
fn fq2_mul_by_nonresidue(a: Fq2) -> Fq2 {
    return Fq2(fq_sub(a.c0, a.c1), fq_add(a.c0, a.c1));
}
