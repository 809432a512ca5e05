// Fq2 multiplication on the portable path (after fq2.wgsl and the rolled fq_mul).

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
