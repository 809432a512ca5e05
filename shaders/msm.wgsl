// Pippenger multi-scalar multiplication over `Affine` bases (G1 or G2 through the Field
// prelude), in five kernels run per chunk of points:
//
// 0. msm_clear_counts zeroes the counts; after the scan msm_start_cursors copies the offsets
//    into the cursors. Kernels, not buffer fills and copies: a chunk's passes then wait on
//    no transfer, so the next chunk's bases and scalars, queued before them, upload while
//    they run (record.rs).
// 1. msm_count: each scalar out of Montgomery form (written back for the scatter) and its
//    signed digits, window by window (windows of c or c + 1 bits); count entries per
//    (window, bucket).
// 2. (scan.wgsl turns the counts into bucket offsets.)
// 3. msm_scatter: write every non-zero digit as (key = the window's first key + |digit|,
//    base | sign) at its bucket's place: a counting sort done by all threads at once, one
//    window per workgroup row in z. Key 1, where every scalar 1 and -1 lands, is counted and
//    placed a workgroup at a time (HOT_KEY).
// 4. msm_accumulate_bases, then msm_accumulate_partials once per further level: the sorted
//    list is cut into equal segments of `segment` entries, whatever the buckets are, so a
//    bucket holding most points (0/1-heavy witnesses) is summed by many threads (at level 0
//    fewer entries a segment where the list is far below its bound: `level_segment`). A run of
//    equal keys that lies inside one segment is stored in its bucket; a run crossing a
//    segment edge leaves a partial sum, and the partials (two slots per segment, still
//    sorted) form the next level's list. Chunks after the first start each key's first run
//    from the bucket the earlier chunks left (`fold`), so every chunk adds into one array.
// 5. msm_reduce_groups + msm_sum_pairs: per window, sum_b b * bucket[b] by running sums
//    over groups of buckets, in parallel, then a pairwise tree over the groups; the host
//    combines the windows.

struct MsmParams {
    // Points in this chunk.
    count: u32,
    // c: the width of every window but the first `wide_windows`, which are c + 1 bits.
    window_bits: u32,
    windows: u32,
    wide_windows: u32,
    // Entries per accumulation segment.
    segment: u32,
    // Accumulation level: 0 reads the sorted bases, later levels the partials. In
    // msm_sum_pairs: the tree stride.
    level: u32,
    // Bucket groups of a c-bit window in the reduction (a wide window has twice as many).
    groups: u32,
    // 1 for chunks after the first: level 0 adds each key's sum so far from `buckets`.
    fold: u32,
}

const SIGN_BIT: u32 = 0x80000000u;
const NO_KEY: u32 = 0xffffffffu;
// Set on the key of a partial slot no run filled (keys are below 2^31).
const PLACEHOLDER: u32 = 0x80000000u;

@group(0) @binding(0) var<uniform> params: MsmParams;
// In Montgomery form as staged; msm_count leaves them out of it.
@group(0) @binding(1) var<storage, read_write> scalars: array<FrWords>;
@group(0) @binding(2) var<storage, read> bases: array<Affine>;
@group(0) @binding(3) var<storage, read_write> counts: array<atomic<u32>>;
@group(0) @binding(4) var<storage, read_write> cursor: array<atomic<u32>>;
// (key, base index | sign) in bucket order: written by msm_scatter, read by level 0.
@group(0) @binding(5) var<storage, read_write> sorted: array<vec2<u32>>;
// Partial lists: key (| PLACEHOLDER for an empty slot) and sum.
@group(0) @binding(6) var<storage, read_write> keys_in: array<u32>;
@group(0) @binding(7) var<storage, read_write> points_in: array<Xyzz>;
@group(0) @binding(8) var<storage, read_write> keys_out: array<u32>;
@group(0) @binding(9) var<storage, read_write> points_out: array<Xyzz>;
@group(0) @binding(10) var<storage, read_write> buckets: array<Xyzz>;
// lengths[l]: entries in level l's list (lengths[0] is the scan's total).
@group(0) @binding(11) var<storage, read_write> lengths: array<u32>;
@group(0) @binding(12) var<storage, read_write> sums: array<Xyzz>;
// Per point: 1 + its last window with a non-zero digit (0 for the scalar 0), from msm_count,
// so that msm_scatter reads the scalar only for the windows it has digits in (the bits of
// 0/1 witnesses have one).
@group(0) @binding(13) var<storage, read_write> digit_windows: array<u32>;

// Windows of mixed widths: w < wide_windows is c + 1 bits wide, the rest c, so that a window
// count W need not round its width up (256 = 9 × 20 + 4 × 19 bits for W = 13).
fn window_width(w: u32) -> u32 { return params.window_bits + select(0u, 1u, w < params.wide_windows); }

fn window_first_bit(w: u32) -> u32 { return w * params.window_bits + min(w, params.wide_windows); }

// A window of width c has buckets for digit magnitudes 0..=2^(c-1) (0 is never stored).
fn window_buckets(w: u32) -> u32 { return (1u << (window_width(w) - 1u)) + 1u; }

// Window w's bucket 0 in the key space (keys of window w are its first key + magnitude).
fn window_first_key(w: u32) -> u32 {
    let narrow = (1u << (params.window_bits - 1u)) + 1u;
    return w * narrow + min(w, params.wide_windows) * (narrow - 1u);
}

// Reduction groups: a wide window has twice the buckets of a c-bit one and twice the groups,
// so every group holds as many buckets. Window w's group sums start at its first group.
fn window_groups(w: u32) -> u32 { return params.groups << select(0u, 1u, w < params.wide_windows); }

fn window_first_group(w: u32) -> u32 { return (w + min(w, params.wide_windows)) * params.groups; }

// The signed digit of scalar s (out of Montgomery form) in window w of width c_w, given the
// carry out of window w - 1, which it updates: |digit| | SIGN_BIT when negative. Windows run
// in order from 0, so no array of digits is kept (a dynamically indexed array lives in
// memory). Digits lie in [-(2^(c_w-1) - 1), 2^(c_w-1)]; the sum of digit_w 2^(first bit of w)
// is the scalar, and the top window never carries out (the widths sum to >= 256 > 255 bits).
fn signed_digit(s: Fr, w: u32, carry: ptr<function, u32>) -> u32 {
    let c = window_width(w);
    let bit = window_first_bit(w);
    let limb = bit / 32u;
    let shift = bit % 32u;
    var v = 0u;
    if (limb < FR_LIMBS) { v = s[limb] >> shift; }
    if (shift + c > 32u && limb + 1u < FR_LIMBS) { v |= s[limb + 1u] << (32u - shift); }
    v = (v & ((1u << c) - 1u)) + *carry;
    if (v > (1u << (c - 1u))) {
        *carry = 1u;
        return ((1u << c) - v) | SIGN_BIT;
    }
    *carry = 0u;
    return v;
}

// Scalars 1 and -1 (the set bits of 0/1-heavy witnesses) all have key 1: window 0, digit ±1.
// A global atomic each serialized on that one counter, so that skewed scalars counted slower
// than uniform ones of many times the entries (docs/benchmarks/gpu-part-2-27.md, commits
// 08e231e and 51572ed). Each workgroup counts its own in workgroup memory and takes its
// places in one global atomic.
const HOT_KEY: u32 = 1u;
var<workgroup> hot_entries: atomic<u32>;
var<workgroup> hot_start: u32;

// params.count: the count slots (window buckets and one past them).
@compute @workgroup_size(64)
fn msm_clear_counts(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = thread_index(id, groups);
    if (i < params.count) { atomicStore(&counts[i], 0u); }
}

// After the scan: each bucket's cursor starts at its offset; the last slot's offset is the
// sorted list's length (level 0's).
@compute @workgroup_size(64)
fn msm_start_cursors(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = thread_index(id, groups);
    if (i < params.count) {
        let offset = atomicLoad(&counts[i]);
        atomicStore(&cursor[i], offset);
        if (i + 1u == params.count) { lengths[0] = offset; }
    }
}

// Both kernels run every invocation to the workgroup barriers, those past the end without
// work.
@compute @workgroup_size(64)
fn msm_count(@builtin(global_invocation_id) id: vec3<u32>, @builtin(local_invocation_index) lane: u32, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = thread_index(id, groups);
    if (lane == 0u) { atomicStore(&hot_entries, 0u); }
    workgroupBarrier();
    if (i < params.count) {
        let s = fr_from_montgomery(fr_from_words(scalars[i]));
        scalars[i] = fr_to_words(s);
        var carry = 0u;
        var used = 0u;
        for (var w = 0u; w < params.windows; w++) {
            let magnitude = signed_digit(s, w, &carry) & ~SIGN_BIT;
            let key = window_first_key(w) + magnitude;
            if (key == HOT_KEY) {
                atomicAdd(&hot_entries, 1u);
            } else if (magnitude != 0u) {
                atomicAdd(&counts[key], 1u);
            }
            if (magnitude != 0u) { used = w + 1u; }
        }
        digit_windows[i] = used;
    }
    workgroupBarrier();
    if (lane == 0u) {
        let hot = atomicLoad(&hot_entries);
        if (hot != 0u) { atomicAdd(&counts[HOT_KEY], hot); }
    }
}

// Window z of the grid (workgroups run in z order, so the window's cursors and the parts of
// the list being written stay in L2 while it is placed, where all windows at once did not).
// Only window 0 holds key 1, so only its workgroups meet at barriers.
@compute @workgroup_size(64)
fn msm_scatter(@builtin(global_invocation_id) id: vec3<u32>, @builtin(local_invocation_index) lane: u32, @builtin(workgroup_id) group: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = thread_index(id, groups);
    let w = group.z;
    if (w == 0u) {
        place_in_window_zero(i, lane);
    } else {
        place_digit(i, w, scatter_digit(i, w));
    }
}

// Point i's signed digit in window w (0 past the count and past the point's last digit).
fn scatter_digit(i: u32, w: u32) -> u32 {
    if (i >= params.count || w >= digit_windows[i]) { return 0u; }
    let s = fr_from_words(scalars[i]);
    // The carry into window w: the digits below it, recomputed.
    var carry = 0u;
    for (var below = 0u; below < w; below++) { _ = signed_digit(s, below, &carry); }
    return signed_digit(s, w, &carry);
}

// A non-zero digit at its bucket's place.
fn place_digit(i: u32, w: u32, digit: u32) {
    let magnitude = digit & ~SIGN_BIT;
    if (magnitude == 0u) { return; }
    let key = window_first_key(w) + magnitude;
    let at = atomicAdd(&cursor[key], 1u);
    sorted[at] = vec2<u32>(key, i | (digit & SIGN_BIT));
}

// Window 0's digit of point i; key 1 (digit ±1) takes its place a workgroup at a time.
fn place_in_window_zero(i: u32, lane: u32) {
    if (lane == 0u) { atomicStore(&hot_entries, 0u); }
    workgroupBarrier();
    let digit = scatter_digit(i, 0u);
    // This invocation's place among the workgroup's key-1 entries.
    var hot_place = NO_KEY;
    if (window_first_key(0u) + (digit & ~SIGN_BIT) == HOT_KEY) {
        hot_place = atomicAdd(&hot_entries, 1u);
    } else {
        place_digit(i, 0u, digit);
    }
    workgroupBarrier();
    if (lane == 0u) {
        let places = atomicLoad(&hot_entries);
        if (places != 0u) { hot_start = atomicAdd(&cursor[HOT_KEY], places); }
    }
    workgroupBarrier();
    if (hot_place != NO_KEY) {
        sorted[hot_start + hot_place] = vec2<u32>(HOT_KEY, i | (digit & SIGN_BIT));
    }
}

// Threads that fill a GPU (`FULL_LEVEL_THREADS` in msm/plan).
const FULL_LEVEL_THREADS: u32 = 65536u;
// The shortest segment level 0 takes (`SEGMENTS` in msm/plan starts there).
const SHORTEST_SEGMENT: u32 = 4u;

// Entries a thread takes at this level. Level 0 over a list far below its bound (0/1
// witnesses give a point one entry, not one a window) takes shorter segments than the plan's,
// so that enough threads run to fill the GPU, each a shorter chain of additions: never more
// threads than the dispatch has (its partials then stay within level 1's bound) nor a longer
// segment than the plan's.
fn level_segment(len: u32, from_bases: bool) -> u32 {
    if (!from_bases) { return params.segment; }
    let dispatched = (params.count * params.windows + params.segment - 1u) / params.segment;
    let threads = max(min(dispatched, FULL_LEVEL_THREADS), 1u);
    return clamp((len + threads - 1u) / threads, min(SHORTEST_SEGMENT, params.segment), params.segment);
}

fn entry_key(i: u32, from_bases: bool) -> u32 {
    if (from_bases) { return sorted[i].x; }
    return keys_in[i] & ~PLACEHOLDER;
}

// The segment `seg` of the current level's list: runs of equal keys are summed; a run lying
// wholly inside the segment is stored in its bucket (it is the only sum that key gets in this
// chunk: all its entries are here), a run crossing an edge goes to one of the segment's two
// slots in the next level's list. Called with a literal `from_bases`, so after inlining each
// entry point holds one point addition: the mixed (affine) one at level 0, the XYZZ one above.
//
// With `fold`, the run that starts a key at level 0 begins from the key's bucket, so the
// chunk's sum ends up added to the earlier chunks' in whichever run finally stores it. A run
// made only of placeholders stores nothing (its key was stored whole at an earlier level);
// any other run stores its sum, the identity included (the bucket may hold an earlier sum).
fn accumulate_segment(seg: u32, from_bases: bool) {
    let len = lengths[params.level];
    let t = level_segment(len, from_bases);
    if (seg == 0u) { lengths[params.level + 1u] = 2u * ((len + t - 1u) / t); }
    let start = seg * t;
    if (start >= len) { return; }
    let end = min(start + t, len);
    let fold = from_bases && params.fold != 0u;
    var run_key = entry_key(start, from_bases);
    var run_start = start;
    var run_has_sums = from_bases;
    var acc = xyzz_identity();
    if (fold && (start == 0u || entry_key(start - 1u, true) != run_key)) { acc = buckets[run_key]; }
    // Slots default to placeholders; written to memory at once rather than held in
    // registers, which the point sums need.
    keys_out[2u * seg] = run_key | PLACEHOLDER;
    points_out[2u * seg] = xyzz_identity();
    keys_out[2u * seg + 1u] = entry_key(end - 1u, from_bases) | PLACEHOLDER;
    points_out[2u * seg + 1u] = xyzz_identity();
    // i == end closes the last run.
    for (var i = start; i <= end; i++) {
        var key = NO_KEY;
        if (i < end) { key = entry_key(i, from_bases); }
        if (key != run_key) {
            let starts_here = run_start > start || start == 0u || entry_key(start - 1u, from_bases) != run_key;
            let ends_here = i < end || end == len || entry_key(end, from_bases) != run_key;
            // A run of placeholders only stores nothing, and its slot stays a placeholder.
            if (run_has_sums && starts_here && ends_here) {
                buckets[run_key] = acc;
            } else if (run_has_sums) {
                var slot = 2u * seg + 1u;
                if (run_start == start) { slot = 2u * seg; }
                keys_out[slot] = run_key;
                points_out[slot] = acc;
            }
            acc = xyzz_identity();
            if (fold && i < end) { acc = buckets[key]; }
            run_key = key;
            run_start = i;
            run_has_sums = from_bases;
        }
        if (i < end) {
            if (from_bases) {
                let e = sorted[i].y;
                var base = bases[e & ~SIGN_BIT];
                if ((e & SIGN_BIT) != 0u) { base.y = field_neg(base.y); }
                acc = xyzz_add_affine(acc, base);
            } else if ((keys_in[i] & PLACEHOLDER) == 0u) {
                acc = xyzz_add(acc, points_in[i]);
                run_has_sums = true;
            }
        }
    }
}

@compute @workgroup_size(64)
fn msm_accumulate_bases(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    accumulate_segment(thread_index(id, groups), true);
}

@compute @workgroup_size(64)
fn msm_accumulate_partials(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    accumulate_segment(thread_index(id, groups), false);
}

// sum_{b in group} b * bucket[b] for one group of one window. Running sums from the top give
// sum (b - lo + 1) * bucket[b]; then (lo - 1) * (the group's sum) by double-and-add makes up
// the rest. One addition per iteration, as in msm_accumulate.
@compute @workgroup_size(64)
fn msm_reduce_groups(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let t = thread_index(id, groups);
    // Threads t = the window's first group + g: the wide windows' groups first.
    let wide_groups = 2u * params.groups * params.wide_windows;
    var w = t / (2u * params.groups);
    if (t >= wide_groups) { w = params.wide_windows + (t - wide_groups) / params.groups; }
    if (w >= params.windows) { return; }
    let g = t - window_first_group(w);
    let window_end = window_buckets(w);
    let per_group = (window_end - 1u + window_groups(w) - 1u) / window_groups(w);
    let lo = min(1u + g * per_group, window_end);
    let hi = min(lo + per_group, window_end);
    var running = xyzz_identity();
    var acc = xyzz_identity();
    var doubled = xyzz_identity();
    var b = hi;
    var k = lo - 1u;
    var into_acc = false;
    var multiplying = false;
    loop {
        var lhs: Xyzz;
        var rhs: Xyzz;
        // Destination: 0 running, 1 acc, 2 doubled.
        var dest = 0u;
        if (!multiplying) {
            if (b == lo) {
                multiplying = true;
                doubled = running;
                continue;
            }
            if (!into_acc) {
                lhs = running;
                rhs = buckets[window_first_key(w) + b - 1u];
            } else {
                lhs = acc;
                rhs = running;
                dest = 1u;
                b--;
            }
            into_acc = !into_acc;
        } else {
            if (k == 0u) { break; }
            if ((k & 1u) != 0u && !into_acc) {
                lhs = acc;
                rhs = doubled;
                dest = 1u;
                into_acc = true;
            } else {
                lhs = doubled;
                rhs = doubled;
                dest = 2u;
                k >>= 1u;
                into_acc = false;
            }
        }
        let sum = xyzz_add(lhs, rhs);
        if (dest == 0u) {
            running = sum;
        } else if (dest == 1u) {
            acc = sum;
        } else {
            doubled = sum;
        }
    }
    sums[t] = acc;
}

// One step of a pairwise tree over each window's group sums: with stride s (params.level),
// sums[2js] += sums[2js + s] within the window's groups. After log2(most groups) steps the
// window's first group holds window w. Every window is given the pairs of the most groups.
@compute @workgroup_size(64)
fn msm_sum_pairs(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let t = thread_index(id, groups);
    let stride = params.level;
    let pairs = (window_groups(0u) + 2u * stride - 1u) / (2u * stride);
    if (t >= params.windows * pairs) { return; }
    let w = t / pairs;
    let left = (t % pairs) * 2u * stride;
    if (left + stride >= window_groups(w)) { return; }
    let at = window_first_group(w) + left;
    sums[at] = xyzz_add(sums[at], sums[at + stride]);
}
