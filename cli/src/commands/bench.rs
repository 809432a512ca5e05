//! `wgpu-groth16 bench ...`: measurements, printed as tables for BENCHMARKS.md.

use blstrs::Scalar;
use rayon::prelude::*;
use std::process::ExitCode;
use std::time::{Duration, Instant};
use wgpu_groth16::curve::{sample_bases, GpuCurve};
use wgpu_groth16::field::bench::{run as run_field_bench, FieldBenchConfig};
use wgpu_groth16::field::samples::{sample_scalars, ScalarMix};
use wgpu_groth16::gpu::{AdapterSelector, GpuContext, StagingMemory, WideMul};
use wgpu_groth16::groth16::params::Invalid;
use wgpu_groth16::msm::{
    msm_cpu, MsmBases, MsmConfig, MsmJob, MsmKernels, MsmLimits, Scalars, CHUNK_ALIGN,
};
use wgpu_groth16::ntt::{h_coefficients_cpu, ntt_cpu, NttKernels, NttOp, StagePasses};
use wgpu_groth16::subgroup::{SubgroupCurve, SubgroupKernels};
use wgpu_groth16::{Error, Result};

fn rate(x: f64) -> String {
    if x >= 1e9 {
        format!("{:.2} G/s", x / 1e9)
    } else {
        format!("{:.2} M/s", x / 1e6)
    }
}

pub fn field(selector: &AdapterSelector, threads: Option<u32>) -> Result<ExitCode> {
    let gpu = GpuContext::new(selector)?;
    let mut config = FieldBenchConfig::for_device(&gpu);
    if let Some(t) = threads {
        config.threads = t;
    }
    println!("{}", crate::adapter_line(&gpu));
    println!(
        "threads per dispatch: {}, best of {}",
        config.threads, config.repetitions
    );
    let rates = run_field_bench(&gpu, &config)?;
    println!(
        "{}",
        table_header(&[
            "operation",
            "path",
            "rate",
            "share of ceiling (u32 mul rate / limb products)",
            "compile",
        ])
    );
    for r in &rates {
        let path = r.wide_mul.map_or("-".to_string(), |w| w.to_string());
        // A field mul's ceiling: the raw multiply rate over the multiplies one mul needs.
        let ceiling = r.ceiling.and_then(|(raw, per_op)| {
            rates
                .iter()
                .find(|m| m.operation == raw)
                .map(|m| r.ops_per_second * per_op as f64 / m.ops_per_second)
        });
        println!(
            "| {} | {path} | {} | {} | {:.2?} |",
            r.operation,
            rate(r.ops_per_second),
            ceiling.map_or("-".to_string(), |c| format!("{:.0}%", c * 100.0)),
            r.compile_time
        );
    }
    Ok(ExitCode::SUCCESS)
}

pub struct MsmOptions {
    pub log_n: Vec<u32>,
    pub scalars: ScalarMix,
    /// Also time the MSM with every base streamed in chunks of this many points.
    pub streamed_chunk_points: Option<usize>,
    /// Also time this many streamed MSMs together (`MsmKernels::msm_together`).
    pub together: Option<usize>,
    /// Job k of those draws its scalars as the k-th of these (cycled; empty: `scalars`).
    pub together_scalars: Vec<ScalarMix>,
    pub check: bool,
    pub runs: u32,
    pub path: Option<String>,
    pub config: MsmConfig,
}

/// A markdown table's header row and its delimiter row, one cell per column.
pub fn table_header(columns: &[&str]) -> String {
    format!(
        "| {} |\n|{}",
        columns.join(" | "),
        "---|".repeat(columns.len())
    )
}

pub fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

/// The wide-multiply path `--path` names, the adapter's fastest without one.
fn wide_mul_path(gpu: &GpuContext, path: Option<&str>) -> Result<WideMul> {
    match path {
        None => Ok(gpu.preferred_wide_mul()),
        Some("portable") => Ok(WideMul::Portable),
        Some("int64") => Ok(WideMul::Int64),
        Some(other) => Err(Error::InvalidInput(format!(
            "--path {other:?}: expected portable or int64"
        ))),
    }
}

pub fn msm<C: GpuCurve>(selector: &AdapterSelector, options: &MsmOptions) -> Result<ExitCode> {
    let gpu = GpuContext::new(selector)?;
    let wide = wide_mul_path(&gpu, options.path.as_deref())?;
    let start = Instant::now();
    let kernels = MsmKernels::<C>::new(&gpu, wide, options.config.clone())?;
    println!(
        "{}; {} MSM, {wide} path; pipelines built in {} (driver compile {}); CPU: blstrs on {} threads",
        crate::adapter_line(&gpu),
        C::NAME,
        ms(start.elapsed()),
        ms(kernels.compile_time()),
        rayon::current_num_threads()
    );
    if let Some(&first) = options.log_n.first() {
        let segment = kernels.plan(1 << first)?.segment;
        println!("segment: {segment} entries per accumulation thread");
    }
    let gpu_column = format!("GPU (best of {})", options.runs);
    println!(
        "{}",
        table_header(&[
            "curve",
            "n",
            "scalars",
            "windows",
            "chunks",
            &gpu_column,
            "upload",
            "bases streamed",
            "blstrs CPU",
            "speed-up",
            "equal",
        ])
    );
    let mut all_equal = true;
    for &log_n in &options.log_n {
        let n = 1usize << log_n;
        let bases = sample_bases::<C>(log_n as u64, n);
        let scalars = sample_scalars(log_n as u64 + 1, n, options.scalars);
        let plan = kernels.plan(n)?;
        let t = Instant::now();
        let resident = kernels.upload_bases(&bases)?;
        let upload = t.elapsed();
        // Warm-up: allocates the workspace, and keeps the GPU busy long enough for its clocks
        // to leave idle (the first sizes measured slow without it).
        let warm_up = Instant::now();
        let result = kernels.msm(&resident, &scalars)?;
        while warm_up.elapsed() < Duration::from_millis(500) {
            kernels.msm(&resident, &scalars)?;
        }
        let mut best = Duration::MAX;
        for _ in 0..options.runs.max(1) {
            let t = Instant::now();
            let again = kernels.msm(&resident, &scalars)?;
            best = best.min(t.elapsed());
            if again != result {
                return Err(Error::WrongResult(format!(
                    "2^{log_n}: two GPU runs disagree"
                )));
            }
        }
        // The resident run's passes (the streamed runs below replace the last profile).
        let mut profiles = vec![("GPU passes", kernels.last_profile())];
        // Every base from host memory, chunk by chunk: what the streamed chunks cost beyond
        // the resident run, against the upload alone, says how much of the upload the
        // kernels hide.
        let streamed = match options.streamed_chunk_points {
            Some(points) => {
                let host = MsmBases {
                    resident: None,
                    host: &bases,
                };
                let limits = MsmLimits::chunks_of(points);
                let mut best = Duration::MAX;
                for _ in 0..options.runs.max(1) {
                    let t = Instant::now();
                    let sum = kernels.msm_streaming(&host, Scalars::Host(&scalars), limits)?;
                    best = best.min(t.elapsed());
                    if sum != result {
                        return Err(Error::WrongResult(format!(
                            "2^{log_n}: the MSM with streamed bases disagrees"
                        )));
                    }
                }
                profiles.push(("GPU passes, bases streamed", kernels.last_profile()));
                Some(best)
            }
            None => None,
        };
        let together = match (options.together, options.streamed_chunk_points) {
            (Some(count), Some(points)) => Some(msms_together(
                &kernels,
                &bases,
                log_n,
                count,
                options,
                MsmLimits::chunks_of(points),
            )?),
            _ => None,
        };
        let (cpu, equal) = if options.check {
            let t = Instant::now();
            let expected = msm_cpu::<C>(&bases, &scalars)?;
            let cpu = t.elapsed();
            (Some(cpu), Some(expected == result))
        } else {
            (None, None)
        };
        all_equal &= equal != Some(false);
        println!(
            "| {} | 2^{log_n} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            C::NAME,
            options.scalars.name(),
            plan.layout,
            n.div_ceil(plan.chunk),
            ms(best),
            ms(upload),
            streamed.map_or("-".into(), |d| format!(
                "{} ({} points a chunk)",
                ms(d),
                options.streamed_chunk_points.unwrap_or_default()
            )),
            cpu.map_or("-".into(), ms),
            cpu.map_or("-".into(), |c| format!(
                "{:.1}x",
                c.as_secs_f64() / best.as_secs_f64()
            )),
            equal.map_or("-", |e| if e { "yes" } else { "NO" })
        );
        if let Some(line) = together {
            println!("|   | {line} | | | | | | | | | |");
        }
        for (what, profile) in profiles.iter().filter(|(_, p)| !p.is_empty()) {
            let parts: Vec<String> = profile
                .iter()
                .map(|(label, ms)| format!("{label} {ms:.2} ms"))
                .collect();
            let total: f64 = profile.iter().map(|(_, ms)| ms).sum();
            println!(
                "|   | {what} ({total:.2} ms in all): {} | | | | | | | | | |",
                parts.join(", ")
            );
        }
    }
    Ok(if all_equal {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// `count` MSMs of other scalars each, bases streamed within `limits`, run together over
/// the same bases and over different ones (job k over the bases from point 256k), against
/// the same MSMs run one after another: one line for the table. Each sum must equal the
/// one the MSM gave alone.
fn msms_together<C: GpuCurve>(
    kernels: &MsmKernels<C>,
    bases: &[C::Affine],
    log_n: u32,
    count: usize,
    options: &MsmOptions,
    limits: MsmLimits,
) -> Result<String> {
    let n = bases.len();
    // Job k's mix: the k-th of `--together-scalars`, cycled (`--scalars` where none).
    let given = &options.together_scalars;
    let mixes: Vec<ScalarMix> = (0..count)
        .map(|k| {
            given
                .get(k % given.len().max(1))
                .copied()
                .unwrap_or(options.scalars)
        })
        .collect();
    let scalar_sets: Vec<Vec<Scalar>> = mixes
        .iter()
        .enumerate()
        .map(|(k, &mix)| sample_scalars(log_n as u64 + 2 + k as u64, n, mix))
        .collect();
    let mut cells = Vec::new();
    for (what, offset) in [("same bases", 0), ("different bases", CHUNK_ALIGN as usize)] {
        let jobs: Vec<MsmJob<'_, C>> = scalar_sets
            .iter()
            .enumerate()
            .map(|(k, scalars)| MsmJob {
                bases: MsmBases {
                    resident: None,
                    host: &bases[k * offset..],
                },
                scalars: Scalars::Host(&scalars[k * offset..]),
            })
            .collect();
        let (mut alone, mut together) = (Duration::MAX, Duration::MAX);
        for _ in 0..options.runs.max(1) {
            let t = Instant::now();
            let sums = jobs
                .iter()
                .map(|job| kernels.msm_streaming(&job.bases, job.scalars, limits))
                .collect::<Result<Vec<_>>>()?;
            alone = alone.min(t.elapsed());
            let t = Instant::now();
            let sums_together = kernels.msm_together(&jobs, limits)?;
            together = together.min(t.elapsed());
            if sums_together != sums {
                return Err(Error::WrongResult(format!(
                    "2^{log_n}: {count} MSMs together over {what} disagree with each alone"
                )));
            }
        }
        cells.push(format!(
            "{what} {} ({} one after another)",
            ms(together),
            ms(alone)
        ));
    }
    let drawn: Vec<&str> = mixes.iter().map(|mix| mix.name()).collect();
    Ok(format!(
        "{count} MSMs together ({}): {}",
        drawn.join(", "),
        cells.join("; ")
    ))
}

pub fn ntt(
    selector: &AdapterSelector,
    log_ns: &[u32],
    runs: u32,
    passes: Option<StagePasses>,
    check: bool,
    device_only: bool,
) -> Result<ExitCode> {
    let gpu = GpuContext::new(selector)?;
    let wide = gpu.preferred_wide_mul();
    let mut kernels = NttKernels::new(&gpu, wide)?;
    // The CPU reference, timed, when asked for.
    let reference =
        |f: &dyn Fn() -> Result<Vec<Scalar>>| -> Result<Option<(Vec<Scalar>, Duration)>> {
            if !check {
                return Ok(None);
            }
            let t = Instant::now();
            let out = f()?;
            Ok(Some((out, t.elapsed())))
        };
    if let Some(passes) = passes {
        kernels = kernels.with_stage_passes(passes);
    }
    println!(
        "{}; NTT, {wide} path, stage passes: {}; pipelines built in {}; CPU: bellperson on {} threads",
        crate::adapter_line(&gpu),
        log_ns
            .iter()
            .map(|&l| format!("{} at 2^{l}", kernels.stage_passes(l)))
            .collect::<Vec<_>>()
            .join(", "),
        ms(kernels.compile_time()),
        rayon::current_num_threads()
    );
    let gpu_column = format!("GPU (best of {runs})");
    println!(
        "{}",
        table_header(&[
            "n",
            "step",
            &gpu_column,
            "bellperson CPU",
            "speed-up",
            "equal"
        ])
    );
    let mut all_equal = true;
    for &log_n in log_ns {
        let values = sample_scalars(log_n as u64, 1 << log_n, ScalarMix::Uniform);
        let data = kernels.upload(&values, log_n)?;
        let warm_up = Instant::now();
        while warm_up.elapsed() < Duration::from_millis(500) {
            kernels.transform_resident(&data, NttOp::Forward)?;
        }
        let mut best = Duration::MAX;
        for _ in 0..runs.max(1) {
            let t = Instant::now();
            kernels.transform_resident(&data, NttOp::Forward)?;
            best = best.min(t.elapsed());
        }
        let gpu_result = kernels.transform(&values, NttOp::Forward)?;
        let cpu = reference(&|| ntt_cpu(&values, NttOp::Forward))?;
        all_equal &= print_ntt_row(
            log_n,
            "forward NTT, data on the device",
            best,
            cpu.as_ref(),
            &gpu_result,
        );

        // The H step from host vectors to host coefficients (uploads and read-back included).
        let (a, b) = (
            sample_scalars(log_n as u64 + 1, 1 << log_n, ScalarMix::Uniform),
            &values,
        );
        let c: Vec<_> = a.iter().zip(b).map(|(x, y)| x * y).collect();
        let mut host_to_host = None;
        if !device_only {
            let mut best = Duration::MAX;
            let mut h_gpu = Vec::new();
            for _ in 0..runs.max(1) {
                let t = Instant::now();
                h_gpu = kernels.h_coefficients(&a, b, &c)?;
                best = best.min(t.elapsed());
            }
            host_to_host = Some((best, h_gpu));
        }
        let mut best_resident = Duration::MAX;
        let mut h_resident = Vec::new();
        for _ in 0..runs.max(1) {
            let [da, db, dc] = [&a, b, &c].map(|v| kernels.upload(v, log_n));
            let (da, db, dc) = (da?, db?, dc?);
            gpu.wait_for(gpu.submit([]))?;
            let t = Instant::now();
            gpu.wait_for(kernels.h_resident(&da, &db, &dc)?)?;
            best_resident = best_resident.min(t.elapsed());
            h_resident = da.download(&gpu)?;
            h_resident.truncate((1 << log_n) - 1);
        }
        let cpu = reference(&|| h_coefficients_cpu(&a, b, &c))?;
        if let Some((best, h_gpu)) = host_to_host {
            all_equal &= print_ntt_row(log_n, "H step, host to host", best, cpu.as_ref(), &h_gpu);
        }
        all_equal &= print_ntt_row(
            log_n,
            "H step, data on the device",
            best_resident,
            cpu.as_ref(),
            &h_resident,
        );
    }
    Ok(if all_equal {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// One table row; with the CPU reference, whether `gpu` equals it (returned).
fn print_ntt_row(
    log_n: u32,
    step: &str,
    gpu: Duration,
    cpu: Option<&(Vec<Scalar>, Duration)>,
    gpu_result: &[Scalar],
) -> bool {
    let equal = cpu.map(|(expected, _)| expected.as_slice() == gpu_result);
    println!(
        "| 2^{log_n} | {step} | {} | {} | {} | {} |",
        ms(gpu),
        cpu.map_or("-".into(), |(_, t)| ms(*t)),
        cpu.map_or("-".into(), |(_, t)| format!(
            "{:.1}x",
            t.as_secs_f64() / gpu.as_secs_f64()
        )),
        match equal {
            Some(true) => "yes",
            Some(false) => "NO",
            None => "-",
        }
    );
    equal != Some(false)
}

/// The curve and subgroup checks of `2^n` points of `C` (one outside the subgroup, two
/// thirds in), on the GPU from host memory as a parameter file's first read runs them and
/// over the points already on the device, beside blstrs' `is_on_curve` and
/// `is_torsion_free` on every core; a differing answer fails the command.
pub fn subgroup<C: SubgroupCurve>(
    selector: &AdapterSelector,
    log_n: &[u32],
    runs: u32,
    path: Option<&str>,
) -> Result<ExitCode> {
    let gpu = GpuContext::new(selector)?;
    let wide = wide_mul_path(&gpu, path)?;
    let start = Instant::now();
    let kernels = SubgroupKernels::<C>::new(&gpu, wide)?;
    println!(
        "{}; {} subgroup check, {wide} path; built and self-tested in {}; CPU: blstrs on {} threads",
        crate::adapter_line(&gpu),
        C::NAME,
        ms(start.elapsed()),
        rayon::current_num_threads()
    );
    let gpu_column = format!("GPU (best of {runs})");
    let on_device_column = format!("points on the device (best of {runs})");
    println!(
        "{}",
        table_header(&[
            "curve",
            "n",
            &gpu_column,
            "GPU points/s",
            &on_device_column,
            "blstrs CPU",
            "CPU points/s",
            "answers"
        ])
    );
    let mut all_equal = true;
    for &n in log_n {
        let mut points = sample_bases::<C>(u64::from(n), 1 << n);
        let planted = points.len() * 2 / 3;
        points[planted] = C::outside_point();
        let mut gpu_answer = kernels.first_invalid(&points)?;
        let mut best = Duration::MAX;
        for _ in 0..runs.max(1) {
            let t = Instant::now();
            gpu_answer = kernels.first_invalid(&points)?;
            best = best.min(t.elapsed());
        }
        // The same checks where the points already are (as on resident bases): what the
        // uploads add to the time above.
        let held = gpu.storage_buffer("subgroup bench points", C::affine_bytes(&points))?;
        let mut held_answer = kernels.findings_on_device(&held, points.len())?;
        let mut best_held = Duration::MAX;
        for _ in 0..runs.max(1) {
            let t = Instant::now();
            held_answer = kernels.findings_on_device(&held, points.len())?;
            best_held = best_held.min(t.elapsed());
        }
        drop(held);
        let t = Instant::now();
        let cpu_answer = points
            .par_iter()
            .position_first(|p| !C::in_subgroup_on_cpu(p));
        let cpu = t.elapsed();
        let expected = cpu_answer.map(|index| (index, Invalid::Outside));
        let equal = gpu_answer == expected
            && held_answer.first_invalid() == expected
            && cpu_answer == Some(planted);
        all_equal &= equal;
        let per_second = |d: Duration| rate(points.len() as f64 / d.as_secs_f64());
        println!(
            "| {} | 2^{n} | {} | {} | {} | {} | {} | {} |",
            C::NAME,
            ms(best),
            per_second(best),
            ms(best_held),
            ms(cpu),
            per_second(cpu),
            if equal {
                format!("equal (point {planted})")
            } else {
                format!(
                    "DIFFER: GPU {gpu_answer:?}, on the device {:?}, CPU {cpu_answer:?}, \
                     planted {planted}",
                    held_answer.first_invalid()
                )
            }
        );
    }
    Ok(if all_equal {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Host <-> device bandwidth: our staging path (`GpuContext::upload` / `download`) beside
/// wgpu's own `Queue::write_buffer` and a fresh read-back buffer per call, the paths it
/// replaced.
pub fn transfer(selector: &AdapterSelector, mib: &[u64], runs: u32) -> Result<ExitCode> {
    let gpu = GpuContext::new(selector)?;
    println!("{}", crate::adapter_line(&gpu));
    let best_column = format!("best of {runs}");
    println!(
        "{}",
        table_header(&["size", "direction", "path", &best_column, "rate"])
    );
    let mut all_equal = true;
    let mut back = Vec::new();
    for &size in mib {
        let bytes = size << 20;
        let host: Vec<u8> = (0..bytes).map(|i| ((i * 2654435761) >> 13) as u8).collect();
        if bytes > gpu.limits.max_buffer_size {
            return Err(Error::TooLarge {
                what: "a transfer bench buffer",
                needed: bytes,
                limit: gpu.limits.max_buffer_size,
            });
        }
        let buffer = gpu.allocating("the transfer bench's buffer", bytes, || {
            gpu.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("transfer bench"),
                size: bytes,
                usage: wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            })
        })?;
        let row = |direction: &str, path: &str, best: Duration| {
            println!(
                "| {size} MiB | {direction} | {path} | {} | {:.2} GB/s |",
                ms(best),
                bytes as f64 / best.as_secs_f64() / 1e9
            );
        };
        let time = |f: &mut dyn FnMut() -> Result<()>| -> Result<Duration> {
            let mut best = Duration::MAX;
            for _ in 0..runs.max(1) {
                let t = Instant::now();
                f()?;
                best = best.min(t.elapsed());
            }
            Ok(best)
        };
        for memory in [StagingMemory::Wgpu, StagingMemory::Host] {
            gpu.set_upload_staging(memory);
            let best = time(&mut || {
                gpu.upload(&buffer, 0, &host)?;
                gpu.wait_for(gpu.submit([]))
            })?;
            let path = match (memory, gpu.upload_staging()) {
                (StagingMemory::Host, StagingMemory::Host) => "staging buffers in host memory",
                (StagingMemory::Host, StagingMemory::Wgpu) => {
                    "staging buffers mapped by wgpu (host memory refused)"
                }
                (StagingMemory::Wgpu, _) => "staging buffers mapped by wgpu (ours)",
            };
            row("upload", path, best);
            back = gpu.download(&buffer, 0, bytes)?;
            all_equal &= back == host;
        }
        gpu.set_upload_staging(StagingMemory::Wgpu);
        let best = time(&mut || {
            gpu.queue.write_buffer(&buffer, 0, &host);
            gpu.wait_for(gpu.submit([]))
        })?;
        row("upload", "Queue::write_buffer", best);
        let best = time(&mut || {
            back = gpu.download(&buffer, 0, bytes)?;
            Ok(())
        })?;
        row(
            "download",
            "staging buffers (ours), into fresh memory",
            best,
        );
        all_equal &= back == host;
        // The same into memory written before: fresh memory faults in each page first.
        let mut best = Duration::MAX;
        for _ in 0..runs.max(1) {
            back.fill(0);
            let t = Instant::now();
            gpu.download_into(&buffer, 0, &mut back)?;
            best = best.min(t.elapsed());
            all_equal &= back == host;
        }
        row(
            "download",
            "staging buffers (ours), into memory written before",
            best,
        );
        let best = time(&mut || {
            let staging = gpu.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("fresh read-back"),
                size: bytes,
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            });
            let mut encoder = gpu.device.create_command_encoder(&Default::default());
            encoder.copy_buffer_to_buffer(&buffer, 0, &staging, 0, bytes);
            back = gpu.read_mapped(&staging, gpu.submit([encoder.finish()]))?;
            Ok(())
        })?;
        row("download", "fresh MAP_READ buffer", best);
        all_equal &= back == host;
    }
    if !all_equal {
        eprintln!("a read-back differs from what was uploaded");
    }
    Ok(if all_equal {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
