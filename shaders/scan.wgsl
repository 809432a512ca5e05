// Exclusive prefix sum of u32 in blocks of 256: scan_blocks scans each block in workgroup
// memory and records the block totals; the host scans the totals the same way and
// scan_add_offsets adds each block's offset back.

struct ScanParams {
    len: u32,
}

const BLOCK: u32 = 256u;

@group(0) @binding(0) var<uniform> params: ScanParams;
@group(0) @binding(1) var<storage, read_write> data: array<u32>;
@group(0) @binding(2) var<storage, read_write> block_sums: array<u32>;

var<workgroup> tile: array<u32, BLOCK>;

fn block_index(wid: vec3<u32>, groups: vec3<u32>) -> u32 {
    return wid.x + wid.y * groups.x;
}

@compute @workgroup_size(256)
fn scan_blocks(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let block = block_index(wid, groups);
    let i = block * BLOCK + lid;
    var v = 0u;
    if (i < params.len) { v = data[i]; }
    tile[lid] = v;
    workgroupBarrier();
    // Hillis-Steele inclusive scan.
    for (var step = 1u; step < BLOCK; step <<= 1u) {
        var add = 0u;
        if (lid >= step) { add = tile[lid - step]; }
        workgroupBarrier();
        tile[lid] += add;
        workgroupBarrier();
    }
    if (i < params.len) { data[i] = tile[lid] - v; }
    if (lid == BLOCK - 1u) { block_sums[block] = tile[lid]; }
}

@compute @workgroup_size(256)
fn scan_add_offsets(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let block = block_index(wid, groups);
    let i = block * BLOCK + lid;
    if (i < params.len) { data[i] += block_sums[block]; }
}
