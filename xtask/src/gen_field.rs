//! Generates the WGSL for the prime fields (`shaders/gen/*.wgsl`).
//!
//! Each field is written over little-endian u32 limbs in Montgomery form with R = 2^(32·N),
//! the same representation blstrs keeps in memory, so host values upload without conversion;
//! the multiplication comes in two forms ([`MulForm`]), one a wide-multiply path. The code is
//! unrolled, or loops with constant indices only, with the modulus inlined as literals:
//! drivers keep such code in registers, while dynamically indexed arrays spill.

use num_bigint::BigUint;
use num_traits::{One, Zero};
use std::fmt::Write;

/// A prime field to generate code for.
pub struct FieldSpec {
    /// Lower-case prefix of every function (`fq_add`).
    pub prefix: &'static str,
    /// WGSL type name (`Fq`).
    pub type_name: &'static str,
    /// What the field is, for the file header.
    pub description: &'static str,
    /// The modulus in hex, big-endian.
    pub modulus_hex: &'static str,
    /// Number of 32-bit limbs.
    pub limbs: usize,
}

pub const FQ: FieldSpec = FieldSpec {
    prefix: "fq",
    type_name: "Fq",
    description: "BLS12-381 base field Fq (p, 381 bits)",
    modulus_hex: "1a0111ea397fe69a4b1ba7b6434bacd764774b84f38512bf6730d2a0f6b0f6241eabfffeb153ffffb9feffffffffaaab",
    limbs: 12,
};

pub const FR: FieldSpec = FieldSpec {
    prefix: "fr",
    type_name: "Fr",
    description: "BLS12-381 scalar field Fr (r, 255 bits)",
    modulus_hex: "73eda753299d7d483339d80809a1d80553bda402fffe5bfeffffffff00000001",
    limbs: 8,
};

/// Every generated file: (path relative to the repository root, generator).
pub fn outputs() -> Vec<(&'static str, String)> {
    vec![
        ("shaders/gen/fq.wgsl", generate(&FQ)),
        ("shaders/gen/fr.wgsl", generate(&FR)),
        (
            "shaders/gen/fq_mul_lazy29.wgsl",
            generate_mul(&FQ, MulForm::Lazy29),
        ),
        (
            "shaders/gen/fr_mul_lazy29.wgsl",
            generate_mul(&FR, MulForm::Lazy29),
        ),
        (
            "shaders/gen/fq_mul_rolled.wgsl",
            generate_mul(&FQ, MulForm::Rolled),
        ),
        (
            "shaders/gen/fr_mul_rolled.wgsl",
            generate_mul(&FR, MulForm::Rolled),
        ),
    ]
}

/// How a field's Montgomery multiplication is written out.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum MulForm {
    /// CIOS over the 32-bit limbs through `mac`, one round in a loop over b's limbs, b
    /// shifted down a limb per round so that every index is a constant (an index by the loop
    /// counter makes Mesa unroll the loop again). Small code for the portable path:
    /// llvmpipe's LLVM spent most of a cold GL run compiling an unrolled form (BENCHMARKS.md,
    /// "Cold start on llvmpipe GL").
    Rolled,
    /// Unrolled over 29-bit limbs held in 64-bit accumulators (the int64 path): a product of
    /// two limbs is below 2^58, so an accumulator takes one without a carry out, and carries
    /// move once a round. Each limb product is one multiply-add into a u64, where the 32-bit
    /// CIOS spends two more additions with carries on it: on the H200 the G1 MSM's
    /// accumulation ran 1.30x faster than with the unrolled CIOS (BENCHMARKS.md).
    Lazy29,
}

/// Bits of a limb in [`MulForm::Lazy29`].
const LAZY_BITS: usize = 29;

fn limbs_of(x: &BigUint, n: usize) -> Vec<u32> {
    let mut digits = x.to_u32_digits();
    assert!(digits.len() <= n, "value does not fit in {n} limbs");
    digits.resize(n, 0);
    digits
}

fn literal(limbs: &[u32], type_name: &str) -> String {
    let body: Vec<String> = limbs.iter().map(|l| format!("0x{l:08x}u")).collect();
    format!("{type_name}({})", body.join(", "))
}

/// -p^-1 mod 2^32, by Newton iteration (each step doubles the correct low bits).
fn mont_inv32(p0: u32) -> u32 {
    let mut inv: u32 = 1;
    for _ in 0..5 {
        inv = inv.wrapping_mul(2u32.wrapping_sub(p0.wrapping_mul(inv)));
    }
    assert_eq!(p0.wrapping_mul(inv), 1);
    inv.wrapping_neg()
}

/// What the generated code of one field needs: limbs of p, R mod p, R^2 mod p, -p^-1 mod 2^32.
struct Constants {
    n: usize,
    p_limbs: Vec<u32>,
    r: BigUint,
    r2: BigUint,
    inv: u32,
}

impl Constants {
    fn of(spec: &FieldSpec) -> Self {
        let n = spec.limbs;
        let p = BigUint::parse_bytes(spec.modulus_hex.as_bytes(), 16).expect("modulus hex");
        let p_limbs = limbs_of(&p, n);
        // The no-carry CIOS multiply and the carry-free add need one spare bit at the top.
        assert!(
            p_limbs[n - 1] < 0x7fff_fffe,
            "{}: the top limb leaves no spare bit",
            spec.prefix
        );
        let r = (BigUint::one() << (32 * n)) % &p;
        assert!(!r.is_zero());
        Constants {
            n,
            r2: (&r * &r) % &p,
            r,
            inv: mont_inv32(p_limbs[0]),
            p_limbs,
        }
    }
}

/// `writeln!` into a String, which cannot fail.
macro_rules! emit {
    ($w:expr, $($arg:tt)*) => {
        writeln!($w, $($arg)*).expect("writing to a String cannot fail")
    };
}

/// Everything of the field but its multiplication ([`generate_mul`]).
pub fn generate(spec: &FieldSpec) -> String {
    let Constants {
        n, p_limbs, r, r2, ..
    } = Constants::of(spec);
    let (f, t) = (spec.prefix, spec.type_name);

    let mut s = String::new();
    let w = &mut s;
    emit!(
        w,
        "// @generated by `cargo xtask gen` from xtask/src/gen_field.rs: do not edit."
    );
    emit!(
        w,
        "// {}: {n} little-endian u32 limbs, Montgomery form, R = 2^{}.",
        spec.description,
        32 * n
    );
    emit!(
        w,
        "// Needs limbs.wgsl (adc, sbb) and one of the field's multiplication files ({}_mul_*.wgsl).\n",
        f
    );
    emit!(w, "alias {t} = array<u32, {n}>;\n");
    emit!(w, "const {}_LIMBS: u32 = {n}u;\n", f.to_uppercase());

    emit!(
        w,
        "fn {f}_zero() -> {t} {{ return {}; }}\n",
        literal(&vec![0; n], t)
    );
    emit!(w, "// R mod p: the Montgomery form of 1.");
    emit!(
        w,
        "fn {f}_one() -> {t} {{ return {}; }}\n",
        literal(&limbs_of(&r, n), t)
    );
    emit!(
        w,
        "fn {f}_modulus() -> {t} {{ return {}; }}\n",
        literal(&p_limbs, t)
    );

    // Equality and zero test.
    let eq: Vec<String> = (0..n).map(|i| format!("a[{i}] == b[{i}]")).collect();
    emit!(
        w,
        "fn {f}_eq(a: {t}, b: {t}) -> bool {{\n    return {};\n}}\n",
        eq.join(" && ")
    );
    let zero: Vec<String> = (0..n).map(|i| format!("a[{i}]")).collect();
    emit!(
        w,
        "fn {f}_is_zero(a: {t}) -> bool {{\n    return ({}) == 0u;\n}}\n",
        zero.join(" | ")
    );

    // a - p if a >= p, else a. Inputs below 2p.
    emit!(w, "// Subtracts p once if a >= p; a must be below 2p.");
    emit!(w, "fn {f}_reduce_once(a: {t}) -> {t} {{");
    emit!(w, "    var d: {t};\n    var s: vec2<u32>;");
    for (i, pl) in p_limbs.iter().enumerate() {
        let borrow = if i == 0 {
            "0u".to_string()
        } else {
            "s.y".to_string()
        };
        emit!(
            w,
            "    s = sbb(a[{i}], 0x{pl:08x}u, {borrow}); d[{i}] = s.x;"
        );
    }
    emit!(w, "    // A final borrow means a < p: keep a.");
    emit!(w, "    if (s.y != 0u) {{ return a; }}\n    return d;\n}}\n");

    // Addition: the sum of two reduced values stays below 2^(32n) thanks to the spare bit.
    emit!(w, "fn {f}_add(a: {t}, b: {t}) -> {t} {{");
    emit!(w, "    var r: {t};\n    var s: vec2<u32>;");
    for i in 0..n {
        let carry = if i == 0 { "0u" } else { "s.y" };
        emit!(w, "    s = adc(a[{i}], b[{i}], {carry}); r[{i}] = s.x;");
    }
    emit!(w, "    return {f}_reduce_once(r);\n}}\n");

    // Subtraction: a - b, plus p when it borrowed.
    emit!(w, "fn {f}_sub(a: {t}, b: {t}) -> {t} {{");
    emit!(w, "    var r: {t};\n    var s: vec2<u32>;");
    for i in 0..n {
        let borrow = if i == 0 { "0u" } else { "s.y" };
        emit!(w, "    s = sbb(a[{i}], b[{i}], {borrow}); r[{i}] = s.x;");
    }
    emit!(w, "    // mask is all ones when a < b: add p back.");
    emit!(w, "    let mask = 0u - s.y;");
    for (i, pl) in p_limbs.iter().enumerate() {
        let carry = if i == 0 { "0u" } else { "s.y" };
        emit!(
            w,
            "    s = adc(r[{i}], 0x{pl:08x}u & mask, {carry}); r[{i}] = s.x;"
        );
    }
    emit!(w, "    return r;\n}}\n");

    emit!(
        w,
        "fn {f}_neg(a: {t}) -> {t} {{ return {f}_sub({f}_zero(), a); }}\n"
    );
    emit!(
        w,
        "fn {f}_double(a: {t}) -> {t} {{ return {f}_add(a, a); }}\n"
    );

    emit!(
        w,
        "fn {f}_square(a: {t}) -> {t} {{ return {f}_mul(a, a); }}\n"
    );

    emit!(
        w,
        "// Canonical integer -> Montgomery form (multiplies by R^2)."
    );
    emit!(
        w,
        "fn {f}_to_montgomery(a: {t}) -> {t} {{\n    return {f}_mul(a, {});\n}}\n",
        literal(&limbs_of(&r2, n), t)
    );
    let mut one = vec![0; n];
    one[0] = 1;
    emit!(
        w,
        "// Montgomery form -> canonical integer (multiplies by 1)."
    );
    emit!(
        w,
        "fn {f}_from_montgomery(a: {t}) -> {t} {{\n    return {f}_mul(a, {});\n}}",
        literal(&one, t)
    );
    s
}

/// The bits [start, start + width) of x as a u32 expression over its 32-bit words `v[k]`
/// (`n` words; bits past the top read as zero).
fn bits_of_words(v: &str, n: usize, start: usize, width: usize) -> String {
    let (k, shift) = (start / 32, start % 32);
    let mut parts = vec![if shift == 0 {
        format!("{v}[{k}]")
    } else {
        format!("({v}[{k}] >> {shift}u)")
    }];
    if shift + width > 32 && k + 1 < n {
        parts.push(format!("({v}[{}] << {}u)", k + 1, 32 - shift));
    }
    let mask = if width == 32 {
        u32::MAX
    } else {
        (1u32 << width) - 1
    };
    if width < 32 {
        format!("(({}) & 0x{mask:08x}u)", parts.join(" | "))
    } else {
        parts.join(" | ")
    }
}

/// [`MulForm::Lazy29`]: `{f}_mul`, and for Fq also `fq_mul_sum` (a·b + c·d with one
/// reduction, for Fq2 products).
fn generate_lazy_mul(spec: &FieldSpec) -> String {
    let (f, bits) = (spec.prefix, LAZY_BITS);
    let mut s = String::new();
    let w = &mut s;
    emit!(
        w,
        "// @generated by `cargo xtask gen` from xtask/src/gen_field.rs: do not edit."
    );
    emit!(
        w,
        "// {}: Montgomery multiplication over limbs of {bits} bits in u64 accumulators (see `MulForm::Lazy29` there).",
        spec.description
    );
    emit!(w, "// Needs {f}.wgsl and SHADER_INT64.\n");
    lazy_product(w, spec, 1);
    if spec.prefix == FQ.prefix {
        emit!(w, "");
        lazy_product(w, spec, 2);
    }
    s
}

/// One Montgomery product over 29-bit limbs of `terms` products summed (a·b, or a·b + c·d),
/// with R = 2^(32·n): rounds of 29 bits and one last round of the bits left (7 for Fq, 24
/// for Fr), so the form stays blstrs'.
fn lazy_product(w: &mut String, spec: &FieldSpec, terms: usize) {
    let Constants { n, inv, .. } = Constants::of(spec);
    let (f, t) = (spec.prefix, spec.type_name);
    let p = BigUint::parse_bytes(spec.modulus_hex.as_bytes(), 16).expect("modulus hex");
    let bits = LAZY_BITS;
    let limbs = (p.bits() as usize).div_ceil(bits);
    let total = 32 * n;
    let full_rounds = total / bits;
    let last_bits = total % bits;
    let rounds = full_rounds + usize::from(last_bits > 0);
    // Every limb of b is added in a round of its own; the rounds divide by exactly R.
    assert_eq!(rounds, limbs, "{f}: rounds and limbs of b differ");
    // With inputs below p, T < (terms·p^2 + R·p) / R < 2p when terms·p < R: T·2^(last bits)
    // fits `out_limbs` limbs, the last ones carries only.
    assert!(
        &p * terms < BigUint::one() << total,
        "{f}: T could reach 2p"
    );
    let out_limbs = (p.bits() as usize + 1 + last_bits).div_ceil(bits);
    // A slot lives `limbs` rounds and takes terms + 1 products (< 2^58) a round, plus carries
    // (< 2^35).
    let slot_bound = (terms as u128 + 1) * limbs as u128 * (1u128 << (2 * bits)) + (1 << 35);
    assert!(
        slot_bound < 1u128 << 64,
        "{f}: a u64 accumulator could overflow"
    );
    let mask = (1u64 << bits) - 1;
    let p_lazy: Vec<u64> = {
        let mut rest = p.clone();
        (0..limbs)
            .map(|_| {
                let limb = (&rest & BigUint::from(mask))
                    .to_u64_digits()
                    .first()
                    .copied();
                rest >>= bits;
                limb.unwrap_or(0)
            })
            .collect()
    };
    // Operand pairs: (a, b), then (c, d).
    let pairs = [("a", "b"), ("c", "d")];
    let pairs = &pairs[..terms];
    let params: Vec<String> = pairs
        .iter()
        .flat_map(|(x, y)| [format!("{x}: {t}"), format!("{y}: {t}")])
        .collect();
    if terms == 1 {
        emit!(w, "// Montgomery product a·b·R^-1 mod p, R = 2^{total}: {full_rounds} rounds of {bits} bits and one of {last_bits}.");
        emit!(w, "fn {f}_mul({}) -> {t} {{", params.join(", "));
    } else {
        emit!(w, "// (a·b + c·d)·R^-1 mod p with one reduction, as {f}_mul: each round adds both products.");
        emit!(w, "fn {f}_mul_sum({}) -> {t} {{", params.join(", "));
    }
    for (x, y) in pairs {
        for v in [x, y] {
            for j in 0..limbs {
                emit!(
                    w,
                    "    let {v}{j} = u64({});",
                    bits_of_words(v, n, j * bits, bits)
                );
            }
        }
    }
    for j in 0..limbs {
        emit!(w, "    var s{j} = u64(0u);");
    }
    emit!(w, "    var m: u32;");
    // Logical slot j of round i is the variable s((i + j) mod limbs): the shift down by a
    // limb after each round is a renaming.
    for i in 0..rounds {
        let slot = |j: usize| format!("s{}", (i + j) % limbs);
        let round_bits = if i < full_rounds { bits } else { last_bits };
        let round_mask = (1u64 << round_bits) - 1;
        let added: Vec<String> = pairs.iter().map(|(x, y)| format!("{x}·{y}{i}")).collect();
        emit!(
            w,
            "    // round {i}: + {}, then + m·p to clear the low {round_bits} bits",
            added.join(" + ")
        );
        for (x, y) in pairs {
            for j in 0..limbs {
                emit!(w, "    {} += {x}{j} * {y}{i};", slot(j));
            }
        }
        emit!(
            w,
            "    m = (u32({}) * 0x{:08x}u) & 0x{round_mask:08x}u;",
            slot(0),
            inv
        );
        for (j, pj) in p_lazy.iter().enumerate() {
            emit!(w, "    {} += u64(m) * u64(0x{pj:08x}u);", slot(j));
        }
        if i + 1 < rounds {
            emit!(w, "    {} += {} >> {bits}u;", slot(1), slot(0));
            emit!(w, "    {} = u64(0u);", slot(0));
        }
    }
    // The last round left its slots (limb j at s((rounds - 1 + j) mod limbs)) holding
    // T·2^(last bits): carry them into 29-bit limbs, then read T's words from bit last_bits.
    let last = |j: usize| format!("s{}", (rounds - 1 + j) % limbs);
    emit!(
        w,
        "    // carries, then T's words from bit {last_bits} of the limbs"
    );
    emit!(w, "    var carry = u64(0u);");
    for j in 0..out_limbs {
        if j < limbs {
            emit!(w, "    carry += {};", last(j));
        }
        emit!(w, "    let l{j} = u32(carry) & 0x{mask:08x}u;");
        if j + 1 < out_limbs {
            emit!(w, "    carry = carry >> {bits}u;");
        }
    }
    let words: Vec<String> = (0..n)
        .map(|k| {
            let start = last_bits + 32 * k;
            let pieces: Vec<String> = (0..out_limbs)
                .filter(|j| j * bits < start + 32 && (j + 1) * bits > start)
                .map(|j| {
                    let at = j * bits;
                    if at >= start {
                        format!("(l{j} << {}u)", at - start)
                    } else {
                        format!("(l{j} >> {}u)", start - at)
                    }
                })
                .collect();
            pieces.join(" | ")
        })
        .collect();
    emit!(
        w,
        "    return {f}_reduce_once({t}({}));\n}}",
        words.join(",\n        ")
    );
}

/// `{f}_mul` written in `form`; needs the field's own file.
pub fn generate_mul(spec: &FieldSpec, form: MulForm) -> String {
    match form {
        MulForm::Rolled => generate_rolled_mul(spec),
        MulForm::Lazy29 => generate_lazy_mul(spec),
    }
}

/// [`MulForm::Rolled`]; needs a wide-multiply file (mac) too.
fn generate_rolled_mul(spec: &FieldSpec) -> String {
    let Constants {
        n, p_limbs, inv, ..
    } = Constants::of(spec);
    let (f, t) = (spec.prefix, spec.type_name);

    let mut s = String::new();
    let w = &mut s;
    emit!(
        w,
        "// @generated by `cargo xtask gen` from xtask/src/gen_field.rs: do not edit."
    );
    emit!(
        w,
        "// {}: Montgomery multiplication, rolled (see `MulForm::Rolled` there).",
        spec.description
    );
    emit!(w, "// Needs {f}.wgsl and one wide-multiply file (mac).\n");
    // Montgomery multiplication, CIOS without the extra carry word (valid with a spare top bit).
    emit!(w, "// Montgomery product a·b·R^-1 mod p: CIOS with the carry word elided (p has a spare top bit).");
    emit!(w, "fn {f}_mul(a: {t}, b: {t}) -> {t} {{");
    for i in 0..n {
        emit!(w, "    var t{i} = 0u;");
    }
    emit!(
        w,
        "    var x: vec2<u32>;\n    var y: vec2<u32>;\n    var m: u32;"
    );
    // One round a limb of b: t = (t + a·limb + m·p) / 2^32, with m making the low word vanish.
    let shifted: Vec<String> = (1..n).map(|i| format!("rest[{i}]")).collect();
    emit!(w, "    var rest = b;");
    emit!(w, "    for (var i = 0u; i < {n}u; i++) {{");
    emit!(w, "        x = mac(t0, a[0], rest[0], 0u); t0 = x.x;");
    emit!(w, "        m = t0 * 0x{inv:08x}u;");
    emit!(w, "        y = mac(t0, m, 0x{:08x}u, 0u);", p_limbs[0]);
    for (j, pj) in p_limbs.iter().enumerate().skip(1) {
        emit!(
            w,
            "        x = mac(t{j}, a[{j}], rest[0], x.y); t{j} = x.x;"
        );
        emit!(
            w,
            "        y = mac(t{j}, m, 0x{pj:08x}u, y.y); t{} = y.x;",
            j - 1
        );
    }
    emit!(w, "        t{} = x.y + y.y;", n - 1);
    emit!(w, "        rest = {t}({}, 0u);", shifted.join(", "));
    emit!(w, "    }}");
    let ts: Vec<String> = (0..n).map(|i| format!("t{i}")).collect();
    emit!(
        w,
        "    return {f}_reduce_once({t}({}));\n}}\n",
        ts.join(", ")
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_shaders_are_up_to_date() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        for (path, text) in outputs() {
            let on_disk = std::fs::read_to_string(root.join(path)).unwrap_or_default();
            assert!(on_disk == text, "{path} is stale: run `cargo xtask gen`");
        }
    }

    #[test]
    fn montgomery_inverse_is_negative_inverse_mod_2_32() {
        for p0 in [0xffffaaabu32, 0x00000001, 0x12345679] {
            assert_eq!(p0.wrapping_mul(mont_inv32(p0)), u32::MAX);
        }
    }
}
