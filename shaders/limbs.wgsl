// Carry and borrow chains over u32 limbs, shared by every field.

// a + b + carry (carry is 0 or 1): (sum, carry out).
fn adc(a: u32, b: u32, carry: u32) -> vec2<u32> {
    let s = a + b;
    let r = s + carry;
    return vec2<u32>(r, select(0u, 1u, s < a) | select(0u, 1u, r < s));
}

// a - b - borrow (borrow is 0 or 1): (difference, borrow out).
fn sbb(a: u32, b: u32, borrow: u32) -> vec2<u32> {
    let d = a - b;
    let r = d - borrow;
    return vec2<u32>(r, select(0u, 1u, a < b) | select(0u, 1u, d < borrow));
}
