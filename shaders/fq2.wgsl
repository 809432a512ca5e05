// Fq2 = Fq[u] / (u^2 + 1), the field of G2's coordinates; c0 + c1·u as blstrs lays it out.
// fq2_mul comes from the wide-multiply path's file (fq2_mul_*.wgsl).

struct Fq2 {
    c0: Fq,
    c1: Fq,
}

fn fq2_zero() -> Fq2 { return Fq2(fq_zero(), fq_zero()); }

fn fq2_one() -> Fq2 { return Fq2(fq_one(), fq_zero()); }

fn fq2_is_zero(a: Fq2) -> bool { return fq_is_zero(a.c0) && fq_is_zero(a.c1); }

fn fq2_add(a: Fq2, b: Fq2) -> Fq2 { return Fq2(fq_add(a.c0, b.c0), fq_add(a.c1, b.c1)); }

fn fq2_sub(a: Fq2, b: Fq2) -> Fq2 { return Fq2(fq_sub(a.c0, b.c0), fq_sub(a.c1, b.c1)); }

fn fq2_neg(a: Fq2) -> Fq2 { return Fq2(fq_neg(a.c0), fq_neg(a.c1)); }

fn fq2_double(a: Fq2) -> Fq2 { return Fq2(fq_double(a.c0), fq_double(a.c1)); }

fn fq2_conjugate(a: Fq2) -> Fq2 { return Fq2(a.c0, fq_neg(a.c1)); }

fn fq2_square(a: Fq2) -> Fq2 { return fq2_mul(a, a); }

// Multiplies by the sextic non-residue u + 1 (used by the tower above Fq2).
fn fq2_mul_by_nonresidue(a: Fq2) -> Fq2 {
    return Fq2(fq_sub(a.c0, a.c1), fq_add(a.c0, a.c1));
}
