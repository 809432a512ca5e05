// Element-wise field operations: out[i] = op(lhs[i], rhs[i]). Used by the tests and the
// self-test to compare every operation with blstrs; not on any hot path.

struct FieldOpParams {
    count: u32,
    op: u32,
}

// Operation codes, mirrored by `FieldOp` in src/field/ops.rs.
const OP_ADD: u32 = 0u;
const OP_SUB: u32 = 1u;
const OP_NEG: u32 = 2u;
const OP_DOUBLE: u32 = 3u;
const OP_MUL: u32 = 4u;
const OP_SQUARE: u32 = 5u;
const OP_TO_MONTGOMERY: u32 = 6u;
const OP_FROM_MONTGOMERY: u32 = 7u;
const OP_MUL_BY_NONRESIDUE: u32 = 8u;

@group(0) @binding(0) var<storage, read> lhs: array<u32>;
@group(0) @binding(1) var<storage, read> rhs: array<u32>;
@group(0) @binding(2) var<storage, read_write> out: array<u32>;
@group(0) @binding(3) var<uniform> params: FieldOpParams;

fn load_fq(from_rhs: bool, base: u32) -> Fq {
    var r: Fq;
    for (var k = 0u; k < FQ_LIMBS; k++) {
        r[k] = select(lhs[base + k], rhs[base + k], from_rhs);
    }
    return r;
}

fn store_fq(base: u32, v: Fq) {
    for (var k = 0u; k < FQ_LIMBS; k++) {
        out[base + k] = v[k];
    }
}

fn load_fr(from_rhs: bool, base: u32) -> Fr {
    var r: Fr;
    for (var k = 0u; k < FR_LIMBS; k++) {
        r[k] = select(lhs[base + k], rhs[base + k], from_rhs);
    }
    return r;
}

fn store_fr(base: u32, v: Fr) {
    for (var k = 0u; k < FR_LIMBS; k++) {
        out[base + k] = v[k];
    }
}

@compute @workgroup_size(64)
fn fq_ops(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if (i >= params.count) { return; }
    let a = load_fq(false, i * FQ_LIMBS);
    let b = load_fq(true, i * FQ_LIMBS);
    var r = fq_zero();
    switch params.op {
        case OP_ADD: { r = fq_add(a, b); }
        case OP_SUB: { r = fq_sub(a, b); }
        case OP_NEG: { r = fq_neg(a); }
        case OP_DOUBLE: { r = fq_double(a); }
        case OP_MUL: { r = fq_mul(a, b); }
        case OP_SQUARE: { r = fq_square(a); }
        case OP_TO_MONTGOMERY: { r = fq_to_montgomery(a); }
        case OP_FROM_MONTGOMERY: { r = fq_from_montgomery(a); }
        default: {}
    }
    store_fq(i * FQ_LIMBS, r);
}

@compute @workgroup_size(64)
fn fr_ops(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if (i >= params.count) { return; }
    let a = load_fr(false, i * FR_LIMBS);
    let b = load_fr(true, i * FR_LIMBS);
    var r = fr_zero();
    switch params.op {
        case OP_ADD: { r = fr_add(a, b); }
        case OP_SUB: { r = fr_sub(a, b); }
        case OP_NEG: { r = fr_neg(a); }
        case OP_DOUBLE: { r = fr_double(a); }
        case OP_MUL: { r = fr_mul(a, b); }
        case OP_SQUARE: { r = fr_square(a); }
        case OP_TO_MONTGOMERY: { r = fr_to_montgomery(a); }
        case OP_FROM_MONTGOMERY: { r = fr_from_montgomery(a); }
        default: {}
    }
    store_fr(i * FR_LIMBS, r);
}

@compute @workgroup_size(64)
fn fq2_ops(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if (i >= params.count) { return; }
    let base = i * 2u * FQ_LIMBS;
    let a = Fq2(load_fq(false, base), load_fq(false, base + FQ_LIMBS));
    let b = Fq2(load_fq(true, base), load_fq(true, base + FQ_LIMBS));
    var r = fq2_zero();
    switch params.op {
        case OP_ADD: { r = fq2_add(a, b); }
        case OP_SUB: { r = fq2_sub(a, b); }
        case OP_NEG: { r = fq2_neg(a); }
        case OP_DOUBLE: { r = fq2_double(a); }
        case OP_MUL: { r = fq2_mul(a, b); }
        case OP_SQUARE: { r = fq2_square(a); }
        case OP_MUL_BY_NONRESIDUE: { r = fq2_mul_by_nonresidue(a); }
        default: {}
    }
    store_fq(base, r.c0);
    store_fq(base + FQ_LIMBS, r.c1);
}
