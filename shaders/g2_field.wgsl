// Coordinate field of G2: Fq2. See g1_field.wgsl.

alias Field = Fq2;

fn field_zero() -> Field { return fq2_zero(); }
fn field_one() -> Field { return fq2_one(); }
fn field_is_zero(a: Field) -> bool { return fq2_is_zero(a); }
fn field_add(a: Field, b: Field) -> Field { return fq2_add(a, b); }
fn field_sub(a: Field, b: Field) -> Field { return fq2_sub(a, b); }
fn field_neg(a: Field) -> Field { return fq2_neg(a); }
fn field_double(a: Field) -> Field { return fq2_double(a); }
fn field_mul(a: Field, b: Field) -> Field { return fq2_mul(a, b); }
fn field_square(a: Field) -> Field { return fq2_square(a); }
fn field_frobenius(a: Field) -> Field { return fq2_conjugate(a); }
