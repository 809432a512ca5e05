// Sparse matrix-vector products over Fr: a = A·z, b = B·z, c = C·z of a recorded constraint
// system (groth16/precompiled.rs), z being the inputs then the aux variables, written where
// the H step reads them.
//
// A matrix is cut into chunks of rows in compressed sparse rows, each within one part of the
// output vector and one binding; a dispatch computes one chunk, one row per invocation. An
// entry is a column and a coefficient: the column an input index, or an aux index tagged with
// the top bit; the coefficient an index into the circuit's table of distinct values, whose
// first two are ONE and -ONE (no multiplication for them: most coefficients are). A chunk's
// columns come first in its entries buffer, then its coefficients, as the host's compressed
// rows hold them: streamed chunks are uploaded from there without rearranging.
//
// The A and B queries' scalars are gathered the same way (sparse_gather): the variables each
// query's densities select, listed once per circuit as tagged columns.
//
// The aux vector is the one the L MSM reads, in up to four parts (2^27 Fr on a 1 GiB
// binding limit); unused part bindings repeat part 0.

struct SparseParams {
    // Rows of this chunk (sparse_rows), or values it gathers (sparse_gather).
    count: u32,
    // Index in `out` of the chunk's first output.
    out_first: u32,
    // Index in `table` of input 0: the coefficient values come first.
    inputs_at: u32,
    // log2 of the elements in one aux part.
    aux_part_log: u32,
    // Index in `entries` of the chunk's first coefficient (its entry count).
    coefficients_at: u32,
}

const AUX_TAG: u32 = 0x80000000u;
const PLUS_ONE: u32 = 0u;
const MINUS_ONE: u32 = 1u;

@group(0) @binding(0) var<uniform> params: SparseParams;
// sparse_rows: row r's columns are entries[words[r]..words[r + 1]] (relative to the chunk),
// its coefficients the same range from coefficients_at.
// sparse_gather: the tagged column of each output.
@group(0) @binding(1) var<storage, read> words: array<u32>;
@group(0) @binding(2) var<storage, read> entries: array<u32>;
// The coefficient values, then the proof's inputs.
@group(0) @binding(3) var<storage, read> table: array<FrWords>;
@group(0) @binding(4) var<storage, read> aux0: array<FrWords>;
@group(0) @binding(5) var<storage, read> aux1: array<FrWords>;
@group(0) @binding(6) var<storage, read> aux2: array<FrWords>;
@group(0) @binding(7) var<storage, read> aux3: array<FrWords>;
@group(0) @binding(8) var<storage, read_write> out: array<FrWords>;

fn aux_value(index: u32) -> Fr {
    let at = index & ((1u << params.aux_part_log) - 1u);
    switch (index >> params.aux_part_log) {
        case 0u: { return fr_from_words(aux0[at]); }
        case 1u: { return fr_from_words(aux1[at]); }
        case 2u: { return fr_from_words(aux2[at]); }
        default: { return fr_from_words(aux3[at]); }
    }
}

// z at a tagged column.
fn variable(column: u32) -> Fr {
    if ((column & AUX_TAG) != 0u) {
        return aux_value(column & ~AUX_TAG);
    }
    return fr_from_words(table[params.inputs_at + column]);
}

@compute @workgroup_size(64)
fn sparse_rows(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let row = thread_index(id, groups);
    if (row >= params.count) { return; }
    var acc = fr_zero();
    let end = words[row + 1u];
    for (var e = words[row]; e < end; e++) {
        let value = variable(entries[e]);
        let coefficient = entries[params.coefficients_at + e];
        switch (coefficient) {
            case PLUS_ONE: { acc = fr_add(acc, value); }
            case MINUS_ONE: { acc = fr_sub(acc, value); }
            default: { acc = fr_add(acc, fr_mul(value, fr_from_words(table[coefficient]))); }
        }
    }
    out[params.out_first + row] = fr_to_words(acc);
}

@compute @workgroup_size(64)
fn sparse_gather(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let k = thread_index(id, groups);
    if (k >= params.count) { return; }
    out[params.out_first + k] = fr_to_words(variable(words[k]));
}
