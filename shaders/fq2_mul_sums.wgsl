// Fq2 multiplication on the int64 path (after fq2.wgsl and fq_mul_lazy.wgsl):
// (a0 b0 - a1 b1) + (a0 b1 + a1 b0)·u as two sums of products, each reduced once
// (fq_mul_sum), a1 b1 subtracted as a1 (p - b1). Karatsuba's three products cost the same
// limb products here but a third reduction and five additions more. One fq_mul_sum call site
// in a loop: drivers inline every call, and G2 code should stay the size of G1 code.
fn fq2_mul(a: Fq2, b: Fq2) -> Fq2 {
    var c0: Fq;
    var c1: Fq;
    for (var k = 0u; k < 2u; k++) {
        var y = b.c1;
        var w = b.c0;
        if (k == 0u) {
            y = b.c0;
            w = fq_neg(b.c1);
        }
        let m = fq_mul_sum(a.c0, y, a.c1, w);
        if (k == 0u) {
            c0 = m;
        } else {
            c1 = m;
        }
    }
    return Fq2(c0, c1);
}
