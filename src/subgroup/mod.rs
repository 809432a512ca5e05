//! Curve and prime-order subgroup membership of curve points on the GPU
//! (`shaders/subgroup.wgsl`): the checks a parameter file's points need once, run where the
//! points go anyway. On the curve as blst's deserializer asks it; then P is in the subgroup
//! iff \[k\]P = -endo(P): on G1 k = z^2 and endo(x, y) = (beta x, y); on G2 k = |z| and
//! endo = psi (Scott 2021). blstrs' `is_on_curve` and `is_torsion_free` are the reference the
//! tests hold them to.

pub mod program;

use std::ops::Range;
use std::sync::Arc;

use blstrs::{Fp, Fp2, G1Affine, G2Affine};
use ff::Field;

use crate::curve::{sample_bases, GpuCurve, G1, G2};
use crate::error::{Error, Result};
use crate::field::GpuField;
use crate::gpu::{Compiled, GpuContext, WideMul};
use crate::groth16::params::{CpuCurveCheck, CurveCheck, Invalid};
use crate::msm::plan::PointCosts;
use program::{SubgroupEntry, SubgroupParams, SubgroupProgram};

/// |z|, BLS12-381's parameter (z itself is negative).
const Z: u64 = 0xd201000000010000;

/// A curve's membership test: \[k\]P = -endo(P), endo(x, y) = (c0 frob(x), c1 frob(y)) with
/// frob the identity on Fq and conjugation on Fq2 (`field_frobenius`).
pub trait SubgroupCurve: GpuCurve {
    const PROGRAM_NAME: &'static str;
    /// k, and its bit length.
    fn k() -> (u128, u32);
    /// endo's coefficients.
    fn endo() -> [Self::Base; 2];
    /// b of the curve's y^2 = x^3 + b.
    fn b() -> Self::Base;
    /// Whether blst refuses a point with x = 0 (G1's (0, ±2), of order three) where its
    /// deserializer checks the curve. G2 has no such point: the all-zero encoding is its
    /// identity, and 4(1 + u) is not a square.
    const X_ZERO_REFUSED: bool;
    /// Whether `point` is on the curve and in the subgroup, by blstrs: the reference the
    /// kernels answer like.
    fn in_subgroup_on_cpu(point: &Self::Affine) -> bool;
    /// A point on the curve outside the subgroup: the first x = 1, 2, ... with a square
    /// x^3 + b (outside, as blst confirms: the cofactor leaves almost no point of the curve
    /// inside).
    fn outside_point() -> Self::Affine;
    /// (1, 1), off the curve: 1 is not 1 + b.
    fn off_curve_point() -> Self::Affine;
}

/// p's little-endian u64 limbs, less one, divided by `d` (which must divide p - 1).
fn p_minus_one_over(d: u64) -> [u64; 6] {
    let bytes = (-Fp::ONE).to_bytes_le();
    let mut out = [0u64; 6];
    let mut rest: u128 = 0;
    for i in (0..6).rev() {
        let limb = u64::from_le_bytes(bytes[8 * i..8 * i + 8].try_into().expect("8 bytes"));
        let current = (rest << 64) | u128::from(limb);
        out[i] = (current / u128::from(d)) as u64;
        rest = current % u128::from(d);
    }
    out
}

impl SubgroupCurve for G1 {
    const PROGRAM_NAME: &'static str = "SubgroupG1";

    fn k() -> (u128, u32) {
        let k = u128::from(Z) * u128::from(Z);
        (k, 128 - k.leading_zeros())
    }

    /// beta = 2^((p - 1) / 3): the cube root of unity for which φ(P) = -[z^2]P on G1.
    fn endo() -> [Fp; 2] {
        [Fp::from(2u64).pow_vartime(p_minus_one_over(3)), Fp::ONE]
    }

    fn b() -> Fp {
        Fp::from(4u64)
    }

    const X_ZERO_REFUSED: bool = true;

    fn in_subgroup_on_cpu(point: &G1Affine) -> bool {
        (point.is_on_curve() & point.is_torsion_free()).into()
    }

    fn outside_point() -> G1Affine {
        (1u64..)
            .filter_map(|i| {
                let x = Fp::from(i);
                let y = Option::<Fp>::from((x.square() * x + Self::b()).sqrt())?;
                let point = G1Affine::from_raw_unchecked(x, y, false);
                (!Self::in_subgroup_on_cpu(&point)).then_some(point)
            })
            .next()
            .expect("the curve has points outside the subgroup")
    }

    fn off_curve_point() -> G1Affine {
        G1Affine::from_raw_unchecked(Fp::ONE, Fp::ONE, false)
    }
}

impl SubgroupCurve for G2 {
    const PROGRAM_NAME: &'static str = "SubgroupG2";

    fn k() -> (u128, u32) {
        (u128::from(Z), 64 - Z.leading_zeros())
    }

    /// psi's: 1 / (u + 1)^((p - 1) / 3) and 1 / (u + 1)^((p - 1) / 2).
    fn endo() -> [Fp2; 2] {
        let u_plus_one = Fp2::new(Fp::ONE, Fp::ONE);
        [3, 2].map(|d| {
            Option::from(u_plus_one.pow_vartime(p_minus_one_over(d)).invert())
                .expect("u + 1 is not zero")
        })
    }

    fn b() -> Fp2 {
        Fp2::new(Fp::from(4u64), Fp::from(4u64))
    }

    const X_ZERO_REFUSED: bool = false;

    fn in_subgroup_on_cpu(point: &G2Affine) -> bool {
        (point.is_on_curve() & point.is_torsion_free()).into()
    }

    fn outside_point() -> G2Affine {
        let b = Self::b();
        (1u64..)
            .filter_map(|i| {
                let x = Fp2::new(Fp::from(i), Fp::ONE);
                let y = Option::<Fp2>::from((x.square() * x + b).sqrt())?;
                let point = G2Affine::from_raw_unchecked(x, y, false);
                (!Self::in_subgroup_on_cpu(&point)).then_some(point)
            })
            .next()
            .expect("the curve has points outside the subgroup")
    }

    fn off_curve_point() -> G2Affine {
        G2Affine::from_raw_unchecked(Fp2::ONE, Fp2::ONE, false)
    }
}

/// The curve and subgroup checks of curve `C` on one device, for one wide-multiply path.
pub struct SubgroupKernels<C: SubgroupCurve> {
    gpu: GpuContext,
    program: Arc<Compiled<SubgroupProgram<C>>>,
    /// Bits of k a pass runs: all of them on GPUs, fewer under llvmpipe's loop cap.
    bits_per_pass: u32,
    /// Points a chunk holds (its buffers are made once a call and reused).
    points_per_dispatch: usize,
}

/// Points a chunk holds by default: its buffers (outside the VRAM budget's pool, while
/// parameters load) stay under 150 MB on G2.
const POINTS_PER_DISPATCH: usize = 1 << 18;

impl<C: SubgroupCurve> SubgroupKernels<C> {
    pub fn new(gpu: &GpuContext, wide: WideMul) -> Result<Self> {
        let costs = PointCosts::new(
            C::AFFINE_BYTES as u64,
            C::XYZZ_BYTES as u64,
            C::Base::mul_loop_trips(wide),
        )
        .with_loop_cap(gpu.loop_cap());
        // A doubling and an addition a bit at most (18 products, less than two of the MSM's
        // additions), and the comparison's six products after them.
        let bits_per_pass = (costs.iterations_under_cap().saturating_sub(4) / 2).max(1);
        Ok(SubgroupKernels {
            gpu: gpu.clone(),
            program: Arc::new(gpu.compile(wide)?),
            bits_per_pass,
            points_per_dispatch: POINTS_PER_DISPATCH,
        })
    }

    /// The same kernels checking `points` a chunk (at least one): smaller chunks hold less
    /// device memory.
    pub fn with_points_per_dispatch(&self, points: usize) -> Self {
        SubgroupKernels {
            gpu: self.gpu.clone(),
            program: self.program.clone(),
            bits_per_pass: self.bits_per_pass,
            points_per_dispatch: points.max(1),
        }
    }

    /// Known answers: points of the subgroup pass, one on the curve outside it is found
    /// among them, and one off the curve is named before it.
    fn self_test(&self) -> Result<()> {
        let mut points = sample_bases::<C>(1, 64);
        let clean = self.first_invalid(&points)?;
        points[17] = C::outside_point();
        let outside = self.first_invalid(&points)?;
        points[40] = C::off_curve_point();
        let off = self.first_invalid(&points)?;
        let expected = (
            None,
            Some((17, Invalid::Outside)),
            Some((40, Invalid::OffCurve)),
        );
        if (clean, outside, off) == expected {
            return Ok(());
        }
        Err(Error::Internal(format!(
            "the GPU's {} curve and subgroup checks answered {:?} on known points, not {expected:?}",
            C::NAME,
            (clean, outside, off)
        )))
    }

    /// The first of `points` off the curve (as blst's deserializer finds it), or where all
    /// are on it, the first outside the prime-order subgroup; `None` where all are in it.
    pub fn first_invalid(&self, points: &[C::Affine]) -> Found {
        Ok(self.findings(points)?.first_invalid())
    }

    /// Both kernels' answers over `points`: the first off the curve, and the first whose
    /// subgroup check fails (on the curve or not; the identity passes). The points go
    /// through one buffer of a chunk, reused: each chunk's upload is queued after the
    /// previous chunk's passes, which read the buffer before it, and is written while they
    /// run.
    pub fn findings(&self, points: &[C::Affine]) -> Result<Findings> {
        if points.is_empty() {
            return Ok(Findings::default());
        }
        let chunk = points.len().min(self.points_per_dispatch);
        let staged = self
            .gpu
            .empty_storage_buffer("subgroup points", (chunk * C::AFFINE_BYTES) as u64)?;
        self.checks(points.len(), chunk, |range| {
            self.gpu
                .upload(&staged, 0, C::affine_bytes(&points[range]))?;
            Ok(staged.as_entire_buffer_binding())
        })
    }

    /// [`findings`](Self::findings) over the first `len` points of `points`, a device
    /// buffer holding them as [`GpuCurve::affine_bytes`] lays them out (the MSM's resident
    /// bases do): checked where they are, nothing uploaded.
    pub fn findings_on_device(&self, points: &wgpu::Buffer, len: usize) -> Result<Findings> {
        let bytes = (len * C::AFFINE_BYTES) as u64;
        if bytes > points.size() {
            return Err(Error::InvalidInput(format!(
                "{len} {} points to check in a buffer of {} bytes",
                C::NAME,
                points.size()
            )));
        }
        // Each chunk is bound at its offset, a multiple of the alignment the device asks.
        let align = self.gpu.limits.min_storage_buffer_offset_alignment.max(1) as usize;
        let chunk = self.points_per_dispatch.next_multiple_of(align);
        self.checks(len, chunk, |range| {
            Ok(wgpu::BufferBinding {
                buffer: points,
                offset: (range.start * C::AFFINE_BYTES) as u64,
                size: wgpu::BufferSize::new((range.len() * C::AFFINE_BYTES) as u64),
            })
        })
    }

    /// Both checks over `len` points, `chunk` at a time, each chunk's points bound where
    /// `chunk_points` puts them; the answers are read once, after the last.
    fn checks<'a>(
        &self,
        len: usize,
        chunk: usize,
        mut chunk_points: impl FnMut(Range<usize>) -> Result<wgpu::BufferBinding<'a>>,
    ) -> Result<Findings> {
        if len == 0 {
            return Ok(Findings::default());
        }
        let count = u32::try_from(len)
            .map_err(|_| Error::InvalidInput(format!("{len} points to check: at most 2^32 - 1")))?;
        let gpu = &self.gpu;
        let (k, k_bits) = C::k();
        let words = [0, 32, 64, 96].map(|shift| (k >> shift) as u32);
        let [c0, c1] = C::endo();
        let constants =
            gpu.storage_buffer("subgroup constants", C::Base::as_bytes(&[c0, c1, C::b()]))?;
        let chunk = chunk.min(len);
        // Jacobian sums: three coordinates, half as large again as an affine point.
        let jacobian_bytes = C::AFFINE_BYTES / 2 * 3;
        let sums = gpu.empty_storage_buffer("subgroup sums", (chunk * jacobian_bytes) as u64)?;
        let first_bad = gpu.storage_buffer("subgroup first bad", &[0xff; 8])?;
        for first in (0..len).step_by(chunk) {
            let range = first..len.min(first + chunk);
            let part = range.len() as u32;
            let points = chunk_points(range)?;
            let params = |high, low| SubgroupParams {
                count: part,
                high,
                low,
                k_bits,
                k0: words[0],
                k1: words[1],
                k2: words[2],
                k3: words[3],
                first: first as u32,
                x_zero_refused: u32::from(C::X_ZERO_REFUSED),
            };
            let dispatch = |entry, params: SubgroupParams| -> Result<()> {
                let params = gpu.uniform_buffer("subgroup params", bytemuck::bytes_of(&params))?;
                let resources = [
                    params.as_entire_binding(),
                    wgpu::BindingResource::Buffer(points.clone()),
                    sums.as_entire_binding(),
                    constants.as_entire_binding(),
                    first_bad.as_entire_binding(),
                ];
                gpu.dispatch_bound(&self.program, entry, &resources, u64::from(part), 1)
                    .map(drop)
            };
            dispatch(SubgroupEntry::CurveCheck, params(k_bits, 0))?;
            let mut high = k_bits;
            while high > 0 {
                let low = high.saturating_sub(self.bits_per_pass);
                dispatch(SubgroupEntry::SubgroupCheck, params(high, low))?;
                high = low;
            }
        }
        let found = gpu.read_buffer(&first_bad)?;
        let index = |k: usize| -> Result<Option<usize>> {
            let word = found.get(4 * k..4 * k + 4).ok_or_else(|| {
                Error::Internal("the curve and subgroup checks read back fewer than 8 bytes".into())
            })?;
            match u32::from_le_bytes(word.try_into().expect("4 bytes")) {
                u32::MAX => Ok(None),
                index if index < count => Ok(Some(index as usize)),
                index => Err(Error::Internal(format!(
                    "the curve and subgroup checks named point {index} of {count}"
                ))),
            }
        };
        Ok(Findings {
            off_curve: index(0)?,
            outside: index(1)?,
        })
    }
}

/// What [`SubgroupKernels::findings`] found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Findings {
    /// The first point off the curve.
    pub off_curve: Option<usize>,
    /// The first point whose subgroup check failed.
    pub outside: Option<usize>,
}

impl Findings {
    /// The first point off the curve, or where all are on it, the first outside the
    /// subgroup: off the curve first, as blst's deserializer refuses such a point before
    /// any subgroup check (the subgroup kernel's answer for it means nothing).
    pub fn first_invalid(&self) -> Option<(usize, Invalid)> {
        self.off_curve
            .map(|index| (index, Invalid::OffCurve))
            .or(self.outside.map(|index| (index, Invalid::Outside)))
    }
}

/// Both curves' checks on one device: a parameter file's points checked on its GPU
/// ([`CurveCheck`]).
pub struct GpuCurveCheck {
    g1: SubgroupKernels<G1>,
    g2: SubgroupKernels<G2>,
}

impl GpuCurveCheck {
    /// Compiles both curves' checks and tries them on known points: a driver that computes
    /// them wrong is an error here, not a refused parameter file (or an accepted bad one).
    pub fn new(gpu: &GpuContext, wide: WideMul) -> Result<Self> {
        let check = GpuCurveCheck {
            g1: SubgroupKernels::new(gpu, wide)?,
            g2: SubgroupKernels::new(gpu, wide)?,
        };
        check.g1.self_test()?;
        check.g2.self_test()?;
        Ok(check)
    }
}

type Found = Result<Option<(usize, Invalid)>>;

/// The GPU's answer, or the CPU's where the GPU failed (a lost device): the check is never
/// skipped for it.
fn or_on_cpu(on_gpu: Found, on_cpu: impl FnOnce() -> Found) -> Found {
    on_gpu.or_else(|e| {
        log::warn!("curve and subgroup checks on the GPU failed ({e}): checking on the CPU");
        on_cpu()
    })
}

impl CurveCheck for GpuCurveCheck {
    fn first_invalid_g1(&self, points: &[G1Affine]) -> Found {
        or_on_cpu(self.g1.first_invalid(points), || {
            CpuCurveCheck.first_invalid_g1(points)
        })
    }

    fn first_invalid_g2(&self, points: &[G2Affine]) -> Found {
        or_on_cpu(self.g2.first_invalid(points), || {
            CpuCurveCheck.first_invalid_g2(points)
        })
    }

    fn describe(&self) -> String {
        format!("on {}", self.g1.gpu.describe())
    }
}
