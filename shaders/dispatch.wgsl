// Flat invocation index for kernels of 64 invocations dispatched over x and y (the host
// spreads large dispatches over y past the per-dimension limit: `gpu::workgroup_grid`).

const WORKGROUP: u32 = 64u;

fn thread_index(id: vec3<u32>, groups: vec3<u32>) -> u32 {
    return id.x + id.y * groups.x * WORKGROUP;
}
