// Coordinate field of G1: Fq. curve.wgsl and msm.wgsl are written against `Field` and these
// field_* names, so the same source serves G1 and G2.

alias Field = Fq;

fn field_zero() -> Field { return fq_zero(); }
fn field_one() -> Field { return fq_one(); }
fn field_is_zero(a: Field) -> bool { return fq_is_zero(a); }
fn field_add(a: Field, b: Field) -> Field { return fq_add(a, b); }
fn field_sub(a: Field, b: Field) -> Field { return fq_sub(a, b); }
fn field_neg(a: Field) -> Field { return fq_neg(a); }
fn field_double(a: Field) -> Field { return fq_double(a); }
fn field_mul(a: Field, b: Field) -> Field { return fq_mul(a, b); }
fn field_square(a: Field) -> Field { return fq_square(a); }
fn field_frobenius(a: Field) -> Field { return a; }
