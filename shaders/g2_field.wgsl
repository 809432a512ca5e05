// Coordinate field of G2: Fq2. See g1_field.wgsl.

alias Field = Fq2;

fn field_zero() -> Field { return fq2_zero(); }
fn field_one() -> Field { return fq2_one(); }
fn field_is_zero(a: Field) -> bool { return fq2_is_zero(a); }
fn field_add(a: Field, b: Field) -> Field { return fq2_add(a, b); }
fn field_sub(a: Field, b: Field) -> Field { return fq2_sub(a, b); }
fn field_neg(a: Field) -> Field { return fq2_neg(a); }
fn field_double(a: Field) -> Field { return fq2_double(a); }
// A Field product as FIELD_PRODUCTS Fq products: field_factor(a, k) * field_factor(b, k) for
// each k, combined by field_from_products (v0, v1 and the last one).
const FIELD_PRODUCTS: u32 = 3u;
fn field_factor(a: Field, k: u32) -> Fq { return fq2_karatsuba_factor(a, k); }
fn field_from_products(v0: Fq, v1: Fq, last: Fq) -> Field { return fq2_from_karatsuba(v0, v1, last); }
fn field_square(a: Field) -> Field { return fq2_square(a); }
