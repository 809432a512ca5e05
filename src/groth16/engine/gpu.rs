//! The heavy steps on one device: the MSM and NTT kernels compiled once, a buffer pool within
//! a VRAM budget, and the two stage locks.

use std::sync::{Arc, Mutex};

use blstrs::Scalar;

use super::cpu::select_ab;
use super::{Engine, StageGuard};
use crate::curve::{GpuCurve, G1, G2};
use crate::gpu::pool::{BufferPool, Reservation};
use crate::gpu::vector::PartLayout;
use crate::gpu::waits::{self, Stage};
use crate::gpu::{DeviceVector, GpuContext};
use crate::groth16::params::ProvingParameters;
use crate::groth16::synthesis::ProvingAssignment;
use crate::msm::{MsmConfig, MsmKernels, ResidentBases, Scalars, WORKSPACES_KEPT};
use crate::ntt::{NttKernels, NttOp};
use crate::recorded::RecordedSystem;
use crate::sparse::{query_lengths, ProductLayouts, ResidentMatrices, SparseKernels};
use crate::{Error, Result};

/// The kernels of one device, compiled once.
pub struct GpuEngine {
    gpu: GpuContext,
    pool: BufferPool,
    g1: MsmKernels<G1>,
    g2: MsmKernels<G2>,
    ntt: NttKernels,
    /// Compiled on first use: only proofs of recorded constraint systems need it.
    sparse: Mutex<Option<Arc<SparseKernels>>>,
    /// Held by the worker whose proof is in its staging stage (uploads).
    staging: Mutex<()>,
    /// Held by the worker whose proof is in its compute stage (its kernels and results).
    compute: Mutex<()>,
}

/// Fr values for the GPU engine: still in host memory (uploaded where they are used), or in
/// a pooled device vector.
pub enum GpuVector<'a> {
    Host(&'a [Scalar]),
    Device(Box<DeviceVector<Scalar>>),
}

/// A curve's bases for the GPU engine: resident on the device, or in host memory and
/// uploaded for each MSM (when they do not fit the VRAM budget).
pub struct GpuBases<'a, C: GpuCurve> {
    host: &'a [C::Affine],
    resident: Option<&'a ResidentBases<C>>,
}

/// A parameter set's bases kept on the device, counted against the engine's VRAM budget
/// until dropped.
pub struct ResidentParams {
    pub h: ResidentBases<G1>,
    pub l: ResidentBases<G1>,
    pub a: ResidentBases<G1>,
    pub b_g1: ResidentBases<G1>,
    pub b_g2: ResidentBases<G2>,
    _budget: Reservation,
}

impl ResidentParams {
    /// Device bytes of `params`' bases.
    pub fn bytes(params: &ProvingParameters) -> u64 {
        let g1 = params.h.len() + params.l.len() + params.a.len() + params.b_g1.len();
        (g1 * G1::AFFINE_BYTES + params.b_g2.len() * G2::AFFINE_BYTES) as u64
    }
}

impl GpuEngine {
    pub(super) fn new(gpu: GpuContext, msm: MsmConfig, vram_budget: Option<u64>) -> Result<Self> {
        let wide = gpu.preferred_wide_mul();
        let pool = BufferPool::new(&gpu, vram_budget.unwrap_or(u64::MAX));
        Ok(GpuEngine {
            g1: MsmKernels::new(&gpu, wide, msm.clone())?.with_pool(pool.clone()),
            g2: MsmKernels::new(&gpu, wide, msm)?.with_pool(pool.clone()),
            ntt: NttKernels::new(&gpu, wide)?.with_pool(pool.clone()),
            sparse: Mutex::new(None),
            pool,
            gpu,
            staging: Mutex::new(()),
            compute: Mutex::new(()),
        })
    }

    pub fn gpu(&self) -> &GpuContext {
        &self.gpu
    }

    pub fn g1(&self) -> &MsmKernels<G1> {
        &self.g1
    }

    pub fn g2(&self) -> &MsmKernels<G2> {
        &self.g2
    }

    pub fn ntt(&self) -> &NttKernels {
        &self.ntt
    }

    /// The sparse-product kernel, compiled on first use.
    pub fn sparse(&self) -> Result<Arc<SparseKernels>> {
        let mut sparse = self.sparse.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(kernels) = &*sparse {
            return Ok(kernels.clone());
        }
        let kernels = Arc::new(SparseKernels::new(&self.gpu, self.ntt.wide_mul())?);
        *sparse = Some(kernels.clone());
        Ok(kernels)
    }

    /// `system`'s matrices on the device for the products and query scalars of their witnesses,
    /// within the VRAM budget ([`Error::VramBudget`] when it has no room).
    pub fn upload_matrices(&self, system: &RecordedSystem) -> Result<ResidentMatrices> {
        let [a, b] = query_lengths(system);
        let layouts = ProductLayouts {
            products: self.padded_layout(system.rows())?,
            aux: self.padded_layout(system.aux)?,
            a: self.padded_layout(a)?,
            b: self.padded_layout(b)?,
        };
        self.sparse()?.upload(system, layouts, Some(&self.pool))
    }

    /// The layout of `len` values zero-padded to the next power of two, as
    /// [`Engine::upload`] stores them.
    fn padded_layout(&self, len: usize) -> Result<PartLayout> {
        self.ntt
            .part_layout(len.max(1).next_power_of_two().trailing_zeros())
    }

    /// Pooled buffers, MSM workspaces and resident bases of every prover on this engine.
    pub fn pool(&self) -> &BufferPool {
        &self.pool
    }

    /// Device bytes of a pooled vector of `len` values as [`Engine::upload`] stores it.
    fn vector_bytes(&self, len: usize) -> Result<u64> {
        let log_n = len.max(1).next_power_of_two().trailing_zeros();
        let layout = self.ntt.part_layout(log_n)?;
        Ok((layout.elements() * std::mem::size_of::<Scalar>()) as u64)
    }

    /// Device bytes of one proof with `params`: what it takes from the pool (the H step's a,
    /// b, c and the L, A, B scalar vectors), and what the kernels keep beside the pool's
    /// buffers: the MSM workspaces (G1's, one per MSM size they alternate between; one G2)
    /// and the NTT's power tables of the domain.
    pub fn proof_bytes(&self, params: &ProvingParameters) -> Result<(u64, u64)> {
        let domain = params.h.len() + 1;
        let per_proof = 3 * self.vector_bytes(domain)?
            + self.vector_bytes(params.l.len())?
            + self.vector_bytes(params.a.len())?
            + self.vector_bytes(params.b_g1.len())?;
        let g1_len = [
            params.h.len(),
            params.l.len(),
            params.a.len(),
            params.b_g1.len(),
        ]
        .into_iter()
        .max()
        .unwrap_or(0);
        let workspaces = WORKSPACES_KEPT as u64 * self.g1.workspace_bytes(g1_len)?
            + self.g2.workspace_bytes(params.b_g2.len())?
            + self
                .ntt
                .table_bytes(domain.next_power_of_two().trailing_zeros());
        Ok((per_proof, workspaces))
    }

    /// `params`' bases on the device, if they fit `resident_budget` (when given) and the VRAM
    /// budget beside one proof's buffers; `None` otherwise (each MSM then uploads its bases).
    /// A budget below one proof's buffers is [`Error::VramBudget`].
    pub fn keep_resident(
        &self,
        params: &ProvingParameters,
        resident_budget: Option<u64>,
    ) -> Result<Option<ResidentParams>> {
        let pool = &self.pool;
        let (per_proof, workspaces) = self.proof_bytes(params)?;
        if per_proof + workspaces > pool.budget() {
            return Err(Error::VramBudget {
                what: "one proof's buffers (NTT vectors and power tables, scalars, MSM workspaces)"
                    .into(),
                needed: per_proof + workspaces,
                budget: pool.budget(),
            });
        }
        let bytes = ResidentParams::bytes(params);
        let fits = resident_budget.is_none_or(|budget| bytes <= budget)
            && bytes + per_proof + workspaces <= pool.budget();
        let Some(aside) = fits.then(|| pool.set_aside(bytes)).flatten() else {
            log::info!("bases ({bytes} bytes) over the VRAM budget: uploaded per MSM");
            return Ok(None);
        };
        let upload = || -> Result<ResidentParams> {
            Ok(ResidentParams {
                h: self.g1.upload_bases(&params.h)?,
                l: self.g1.upload_bases(&params.l)?,
                a: self.g1.upload_bases(&params.a)?,
                b_g1: self.g1.upload_bases(&params.b_g1)?,
                b_g2: self.g2.upload_bases(&params.b_g2)?,
                _budget: aside,
            })
        };
        match upload() {
            Ok(resident) => Ok(Some(resident)),
            Err(Error::OutOfMemory { message, .. }) => {
                log::warn!(
                    "bases ({bytes} bytes) do not fit on the device ({message}): uploaded per MSM"
                );
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// `values` zero-padded to the next power of two in a pooled device vector.
    fn upload_padded(&self, values: &[Scalar]) -> Result<DeviceVector<Scalar>> {
        let log_n = values.len().max(1).next_power_of_two().trailing_zeros();
        self.ntt.upload(values, log_n)
    }

    /// A pooled vector of `len` zeros padded to the next power of two, as [`upload_padded`]
    /// would store `len` values.
    fn zeroed(&self, len: usize) -> Result<DeviceVector<Scalar>> {
        let log_n = len.max(1).next_power_of_two().trailing_zeros();
        self.ntt.upload(&[], log_n)
    }

    /// The MSM kernels of curve `C` (G1 and G2 are the only curves).
    fn msm_kernels<C: GpuCurve>(&self) -> &MsmKernels<C> {
        use std::any::Any;
        (&self.g1 as &dyn Any)
            .downcast_ref()
            .or_else(|| (&self.g2 as &dyn Any).downcast_ref())
            .expect("the engine has the MSM kernels of G1 and G2")
    }
}

impl Engine for GpuEngine {
    type Vector<'a> = GpuVector<'a>;
    type Bases<'a, C: GpuCurve> = GpuBases<'a, C>;

    fn describe(&self) -> String {
        self.gpu.describe()
    }

    fn enter(&self, stage: Stage) -> StageGuard<'_> {
        let lock = match stage {
            Stage::Staging => &self.staging,
            Stage::Compute => &self.compute,
        };
        StageGuard {
            // A poisoned lock still serializes: it guards no data.
            _lock: Some(lock.lock().unwrap_or_else(|e| e.into_inner())),
            _mark: waits::enter(stage),
        }
    }

    fn vector<'a>(&'a self, values: &'a [Scalar]) -> GpuVector<'a> {
        GpuVector::Host(values)
    }

    fn upload<'a>(&'a self, values: &'a [Scalar]) -> Result<GpuVector<'a>> {
        Ok(GpuVector::Device(Box::new(self.upload_padded(values)?)))
    }

    fn h_inputs<'a>(
        &'a self,
        a: &'a [Scalar],
        b: &'a [Scalar],
        c: &'a [Scalar],
    ) -> Result<[GpuVector<'a>; 3]> {
        Ok(self
            .ntt
            .upload_h_inputs(a, b, c)?
            .map(|v| GpuVector::Device(Box::new(v))))
    }

    fn products<'a>(
        &'a self,
        system: &RecordedSystem,
        resident: Option<&ResidentMatrices>,
        inputs: &[Scalar],
        aux_values: &[Scalar],
        aux: &GpuVector<'a>,
    ) -> Result<[GpuVector<'a>; 3]> {
        let (Some(resident), GpuVector::Device(aux)) = (resident, aux) else {
            let [a, b, c] = system.products_of(inputs, aux_values);
            return Ok(self
                .ntt
                .upload_h_inputs(&a, &b, &c)?
                .map(|v| GpuVector::Device(Box::new(v))));
        };
        let [a, b, c] = [(); 3].map(|_| self.zeroed(system.rows()));
        let out = [a?, b?, c?];
        // Waited on, so that the products' time is their own step's and not the H step's.
        let submission =
            self.sparse()?
                .products(resident, inputs, aux, [&out[0], &out[1], &out[2]])?;
        self.gpu.wait_for(submission)?;
        Ok(out.map(|v| GpuVector::Device(Box::new(v))))
    }

    fn h_step(&self, inputs: &mut [GpuVector<'_>; 3]) -> Result<()> {
        if let [GpuVector::Host(a), GpuVector::Host(b), GpuVector::Host(c)] = *inputs {
            *inputs = self
                .ntt
                .upload_h_inputs(a, b, c)?
                .map(|v| GpuVector::Device(Box::new(v)));
        }
        let [GpuVector::Device(a), GpuVector::Device(b), GpuVector::Device(c)] = inputs else {
            return Err(Error::Internal(
                "the H step's inputs are partly on the device".into(),
            ));
        };
        self.gpu.wait_for(self.ntt.h_resident(a, b, c)?)
    }

    fn ntt(&self, vector: &mut GpuVector<'_>, op: NttOp) -> Result<()> {
        if let GpuVector::Host(values) = *vector {
            let log_n = crate::ntt::log2_of(values.len())?;
            *vector = GpuVector::Device(Box::new(self.ntt.upload(values, log_n)?));
        }
        if let GpuVector::Device(device) = vector {
            self.ntt.transform_resident(device, op)?;
        }
        Ok(())
    }

    fn read(&self, vector: &GpuVector<'_>, len: usize) -> Result<Vec<Scalar>> {
        let mut values = match vector {
            GpuVector::Host(values) => values.to_vec(),
            GpuVector::Device(device) => device.download(&self.gpu)?,
        };
        if len > values.len() {
            return Err(Error::InvalidInput(format!(
                "{len} values asked of a vector of {}",
                values.len()
            )));
        }
        values.truncate(len);
        Ok(values)
    }

    /// Resident matrices are the ones [`select_ab`](Engine::select_ab) gathers by (from the aux
    /// values [`upload`](Engine::upload) put on the device).
    fn selects_on_device(&self, resident: Option<&ResidentMatrices>) -> bool {
        resident.is_some()
    }

    /// Gathered on the device with resident matrices (waited on, so that the prover can time
    /// it as a step). Otherwise selected on the CPU, then uploaded one after the other:
    /// uploading A and B at once, as each selection finished, queued their copies among the
    /// H step's kernels and made the H step and the H MSM several times slower
    /// (docs/benchmarks/proofs-and-batches.md, commit ab2c598).
    fn select_ab<'a>(
        &'a self,
        assignment: &ProvingAssignment,
        resident: Option<&ResidentMatrices>,
        aux: &GpuVector<'a>,
    ) -> Result<[GpuVector<'a>; 2]> {
        if let (Some(resident), GpuVector::Device(aux)) = (resident, aux) {
            let [a, b] = resident.query_lengths().map(|len| self.zeroed(len));
            let out = [a?, b?];
            let submission = self.sparse()?.queries(
                resident,
                &assignment.input_assignment,
                aux,
                [&out[0], &out[1]],
            )?;
            self.gpu.wait_for(submission)?;
            return Ok(out.map(|v| GpuVector::Device(Box::new(v))));
        }
        let (a, b) = select_ab(assignment);
        Ok([
            GpuVector::Device(Box::new(self.upload_padded(&a)?)),
            GpuVector::Device(Box::new(self.upload_padded(&b)?)),
        ])
    }

    fn bases<'a, C: GpuCurve>(
        &'a self,
        host: &'a [C::Affine],
        resident: Option<&'a ResidentBases<C>>,
    ) -> GpuBases<'a, C> {
        GpuBases { host, resident }
    }

    fn msm<C: GpuCurve>(
        &self,
        bases: &GpuBases<'_, C>,
        scalars: &GpuVector<'_>,
        len: usize,
    ) -> Result<C::Projective> {
        let kernels = self.msm_kernels::<C>();
        let scalars = match scalars {
            GpuVector::Host(values) => Scalars::Host(values.get(..len).ok_or_else(|| {
                Error::InvalidInput(format!("an MSM of {len} scalars over {}", values.len()))
            })?),
            GpuVector::Device(vector) => Scalars::Device(vector, len),
        };
        match bases.resident {
            Some(resident) => kernels.msm_from(resident, scalars),
            None => {
                let host = bases.host.get(..scalars.len()).ok_or_else(|| {
                    Error::InvalidInput(format!(
                        "{} bases for {} scalars",
                        bases.host.len(),
                        scalars.len()
                    ))
                })?;
                kernels.msm_from(&kernels.upload_bases(host)?, scalars)
            }
        }
    }
}
