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
// A Field product as FIELD_PRODUCTS Fq products (see g2_field.wgsl): here just one.
const FIELD_PRODUCTS: u32 = 1u;
fn field_factor(a: Field, k: u32) -> Fq { return a; }
fn field_from_products(v0: Fq, v1: Fq, last: Fq) -> Field { return last; }
fn field_square(a: Field) -> Field { return fq_square(a); }
