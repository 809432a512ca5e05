//! The fields' Montgomery multiplication, in the form each wide-multiply path runs best.

use num_bigint::BigUint;
use num_traits::One;
use std::fmt::Write;

use super::{below_2p, emit_bound, Constants, FieldSpec, GENERATED};

/// How a field's Montgomery multiplication is written out.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum MulForm {
    /// CIOS over the 32-bit limbs through `mac`, one round in a loop over b's limbs, b
    /// shifted down a limb per round so that every index is a constant (an index by the loop
    /// counter makes Mesa unroll the loop again). Small code for the portable path:
    /// llvmpipe's LLVM spent most of a cold GL run compiling an unrolled form
    /// (docs/benchmarks/cold-start.md).
    Rolled,
    /// Unrolled over limbs of `FieldSpec::lazy_bits` (29 or 30) held in 64-bit accumulators
    /// (the int64 path): a product of two limbs is below 2^60, so an accumulator takes several
    /// without a carry out; carries move once a round, and a carry pass every few rounds
    /// where 30-bit limbs need one. Each limb product is one multiply-add into a u64, where
    /// the 32-bit CIOS spends two more additions with carries on it: the G1 MSM's
    /// accumulation ran faster than with the unrolled CIOS, and faster again with Fq's 13
    /// limbs of 30 bits than with 14 of 29 (docs/benchmarks/gpu-part-2-27.md, commits
    /// 5cb2be4 and 2105610).
    Lazy,
}

/// [`MulForm::Lazy`]: `{f}_bound`, `{f}_mul`, and `{f}_mul_sum` where the spec asks for it.
fn generate_lazy_mul(spec: &FieldSpec) -> String {
    let (f, bits) = (spec.prefix, spec.lazy_bits);
    let lazy = below_2p(spec);
    let mut s = String::new();
    let w = &mut s;
    emit!(w, "{GENERATED}");
    emit!(
        w,
        "// {}: Montgomery multiplication over limbs of {bits} bits in u64 accumulators (see `MulForm::Lazy` there).",
        spec.description
    );
    emit!(w, "// Needs {f}.wgsl and SHADER_INT64.\n");
    emit_bound(w, spec, lazy);
    lazy_product(w, spec, 1, lazy);
    if spec.mul_sum {
        emit!(w, "");
        lazy_product(w, spec, 2, lazy);
    }
    s
}

/// One Montgomery product over limbs of `lazy_bits` of `terms` products summed (a·b, or
/// a·b + c·d), with R = 2^(32·n): rounds of that many bits and one last round of the bits
/// left (24 for Fq's 30, 24 for Fr's 29), so the form stays blstrs'. `below_2p`: inputs and result below 2p, no final
/// subtraction; otherwise below p.
fn lazy_product(w: &mut String, spec: &FieldSpec, terms: usize, below_2p: bool) {
    let Constants { n, inv, .. } = Constants::of(spec);
    let (f, t) = (spec.prefix, spec.type_name);
    let p = BigUint::parse_bytes(spec.modulus_hex.as_bytes(), 16).expect("modulus hex");
    let bits = spec.lazy_bits;
    let limbs = (p.bits() as usize).div_ceil(bits);
    // Inputs below 2p have one bit more: they must fit the same limbs.
    assert!(
        !below_2p || (p.bits() as usize + 1).div_ceil(bits) == limbs,
        "{f}: 2p needs another limb"
    );
    let total = 32 * n;
    let full_rounds = total / bits;
    let last_bits = total % bits;
    let rounds = full_rounds + usize::from(last_bits > 0);
    // Every limb of b is added in a round of its own; the rounds divide by exactly R.
    assert_eq!(rounds, limbs, "{f}: rounds and limbs of b differ");
    // With inputs below B (p, or 2p), T < (terms·B^2 + R·p) / R < 2p when terms·B^2 < R·p:
    // T·2^(last bits) fits `out_limbs` limbs, the last ones carries only.
    let input_factor = if below_2p { 4 * terms } else { terms };
    assert!(
        &p * input_factor < BigUint::one() << total,
        "{f}: T could reach 2p"
    );
    let out_limbs = (p.bits() as usize + 1 + last_bits).div_ceil(bits);
    // A slot takes terms + 1 products (< 2^(2·bits)) a round and a carry (< 2^(64 - bits));
    // after a carry pass every slot is below 2^bits plus a carry. Rounds between carry passes:
    // as many as keep every slot below 2^64 (a slot lives `limbs` rounds in all).
    let carry_bound = 1u128 << (64 - bits);
    let per_round = (terms as u128 + 1) * (1u128 << (2 * bits)) + carry_bound;
    let rounds_between_passes = ((1u128 << 64) - (1u128 << bits) - carry_bound - 1) / per_round;
    assert!(
        rounds_between_passes >= 1,
        "{f}: one round could overflow a u64 accumulator"
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
    let mut since_pass = 0;
    for i in 0..rounds {
        let slot = |j: usize| format!("s{}", (i + j) % limbs);
        if since_pass == rounds_between_passes as usize {
            emit!(
                w,
                "    // carry pass: every slot below 2^{bits} but the top one"
            );
            for j in 0..limbs - 1 {
                emit!(w, "    {} += {} >> {bits}u;", slot(j + 1), slot(j));
                emit!(w, "    {} &= u64(0x{mask:08x}u);", slot(j));
            }
            since_pass = 0;
        }
        since_pass += 1;
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
    // T·2^(last bits): carry them into limbs, then read T's words from bit last_bits.
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
    let result = format!("{t}({})", words.join(",\n        "));
    if below_2p {
        emit!(w, "    return {result};\n}}");
    } else {
        emit!(w, "    return {f}_reduce_once({result});\n}}");
    }
}

/// `{f}_mul` written in `form`; needs the field's own file.
pub fn generate_mul(spec: &FieldSpec, form: MulForm) -> String {
    match form {
        MulForm::Rolled => generate_rolled_mul(spec),
        MulForm::Lazy => generate_lazy_mul(spec),
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
    emit!(w, "{GENERATED}");
    emit!(
        w,
        "// {}: Montgomery multiplication, rolled (see `MulForm::Rolled` there).",
        spec.description
    );
    emit!(w, "// Needs {f}.wgsl and one wide-multiply file (mac).\n");
    emit_bound(w, spec, false);
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
