//! Criterion: a vector of Fq and Fr multiplications through the GPU kernels (upload, kernel,
//! read-back) beside blstrs on the CPU, for the same inputs. Raw kernel throughput lives in
//! `wgpu-groth16 bench field`; this bench shows the round trip a caller pays.

use blstrs::{Fp, Scalar};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use wgpu_groth16::field::ops::{apply_cpu, FieldKernels, FieldOp, ReferenceField};
use wgpu_groth16::field::samples::random;
use wgpu_groth16::gpu::{AdapterSelector, GpuContext};

const LOG_SIZES: [u32; 2] = [12, 16];

fn bench_field<F: ReferenceField>(c: &mut Criterion, kernels: &[FieldKernels]) {
    let mut group = c.benchmark_group(format!("{}_mul", F::NAME));
    for log_n in LOG_SIZES {
        let n = 1usize << log_n;
        let (a, b) = (random::<F>(1, n), random::<F>(2, n));
        group.throughput(Throughput::Elements(n as u64));
        group.bench_with_input(BenchmarkId::new("blstrs", n), &n, |bench, _| {
            bench.iter(|| apply_cpu(FieldOp::Mul, &a, &b).unwrap())
        });
        for k in kernels {
            let id = BenchmarkId::new(format!("gpu-{}", k.wide_mul()), n);
            group.bench_with_input(id, &n, |bench, _| {
                bench.iter(|| k.apply(FieldOp::Mul, &a, &b).unwrap())
            });
        }
    }
    group.finish();
}

fn field(c: &mut Criterion) {
    let kernels = match GpuContext::new(&AdapterSelector::default()) {
        Ok(gpu) => gpu
            .supported_wide_muls()
            .into_iter()
            .map(|w| FieldKernels::new(&gpu, w).expect("field kernels compile"))
            .collect(),
        Err(err) => {
            eprintln!("no adapter, CPU rows only: {err}");
            Vec::new()
        }
    };
    bench_field::<Fp>(c, &kernels);
    bench_field::<Scalar>(c, &kernels);
}

criterion_group!(benches, field);
criterion_main!(benches);
