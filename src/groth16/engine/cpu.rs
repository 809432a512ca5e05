//! The heavy steps with blstrs and bellperson on the CPU: the reference every GPU result is
//! compared with, and the fallback when a GPU fails.

use std::borrow::Cow;

use blstrs::Scalar;

use super::DeviceBases;
use super::{unlocked, Engine, Query, StageGuard};
use crate::curve::GpuCurve;
use crate::gpu::waits::Stage;
use crate::groth16::synthesis::ProvingAssignment;
use crate::msm::msm_cpu;
use crate::ntt::{h_coefficients_cpu, ntt_cpu, NttOp};
use crate::recorded::RecordedSystem;
use crate::sparse::DeviceMatrices;
use crate::{Error, Result};

/// blstrs and bellperson on this machine's cores.
#[derive(Clone, Copy, Debug, Default)]
pub struct CpuEngine;

impl Engine for CpuEngine {
    type Vector<'a> = Cow<'a, [Scalar]>;
    type Bases<'a, C: GpuCurve> = &'a [C::Affine];

    fn describe(&self) -> String {
        "CPU".into()
    }

    fn enter(&self, stage: Stage) -> StageGuard<'_> {
        unlocked(stage)
    }

    fn vector<'a>(&'a self, values: &'a [Scalar]) -> Cow<'a, [Scalar]> {
        Cow::Borrowed(values)
    }

    fn upload<'a>(&'a self, values: &'a [Scalar]) -> Result<Cow<'a, [Scalar]>> {
        Ok(Cow::Borrowed(values))
    }

    fn h_inputs<'a>(
        &'a self,
        a: &'a [Scalar],
        b: &'a [Scalar],
        c: &'a [Scalar],
    ) -> Result<[Cow<'a, [Scalar]>; 3]> {
        Ok([a, b, c].map(Cow::Borrowed))
    }

    fn products<'a>(
        &'a self,
        system: &RecordedSystem,
        _: Option<&DeviceMatrices>,
        inputs: &[Scalar],
        aux_values: &[Scalar],
        _: &Cow<'a, [Scalar]>,
        _in_parts: bool,
    ) -> Result<[Cow<'a, [Scalar]>; 3]> {
        Ok(system.products_of(inputs, aux_values).map(Cow::Owned))
    }

    /// Never called: the CPU keeps no matrices on a device. As `products` then `h_step`.
    fn products_and_h<'a>(
        &'a self,
        system: &RecordedSystem,
        _: &DeviceMatrices,
        inputs: &[Scalar],
        aux_values: &[Scalar],
        _: &mut Cow<'a, [Scalar]>,
        _in_parts: bool,
    ) -> Result<Cow<'a, [Scalar]>> {
        let [a, b, c] = system.products_of(inputs, aux_values);
        Ok(Cow::Owned(h_coefficients_cpu(&a, &b, &c)?))
    }

    fn h_step(&self, inputs: &mut [Cow<'_, [Scalar]>; 3], _in_parts: bool) -> Result<()> {
        let [a, b, c] = inputs;
        *a = Cow::Owned(h_coefficients_cpu(a, b, c)?);
        Ok(())
    }

    fn ntt(&self, vector: &mut Cow<'_, [Scalar]>, op: NttOp) -> Result<()> {
        *vector = Cow::Owned(ntt_cpu(vector, op)?);
        Ok(())
    }

    fn read(&self, vector: &Cow<'_, [Scalar]>, len: usize) -> Result<Vec<Scalar>> {
        let values = vector.get(..len).ok_or_else(|| {
            Error::InvalidInput(format!(
                "{len} values asked of a vector of {}",
                vector.len()
            ))
        })?;
        Ok(values.to_vec())
    }

    fn selects_on_device(&self, _: Option<&DeviceMatrices>) -> bool {
        false
    }

    /// Never called: the CPU selects on the host beside the H step. Both selected, one kept.
    fn gather<'a>(
        &'a self,
        assignment: &ProvingAssignment,
        _: Option<&DeviceMatrices>,
        _: &Cow<'a, [Scalar]>,
        query: Query,
    ) -> Result<Cow<'a, [Scalar]>> {
        let [a, b] = select_on_host(assignment);
        Ok(Cow::Owned(if query == Query::A { a } else { b }))
    }

    fn place_selected<'a>(
        &'a self,
        selected: [Vec<Scalar>; 2],
        _: &Cow<'a, [Scalar]>,
    ) -> Result<[Cow<'a, [Scalar]>; 2]> {
        Ok(selected.map(Cow::Owned))
    }

    fn bases<'a, C: GpuCurve>(
        &'a self,
        host: &'a [C::Affine],
        _device: Option<&'a DeviceBases<C>>,
    ) -> &'a [C::Affine] {
        host
    }

    fn msm<C: GpuCurve>(
        &self,
        bases: &&[C::Affine],
        scalars: &Cow<'_, [Scalar]>,
        len: usize,
    ) -> Result<C::Projective> {
        let scalars = scalars.get(..len).ok_or_else(|| {
            Error::InvalidInput(format!("an MSM of {len} scalars over {}", scalars.len()))
        })?;
        msm_cpu::<C>(bases, scalars)
    }
}

/// The A and B scalars of [`Engine::gather`] selected in host memory, A and B at once.
pub fn select_on_host(assignment: &ProvingAssignment) -> [Vec<Scalar>; 2] {
    let (inputs, aux) = (&assignment.input_assignment, &assignment.aux_assignment);
    let (a, b) = rayon::join(
        || concat(inputs, assignment.a_aux_density.select(aux)),
        || {
            concat(
                &assignment.b_input_density.select(inputs),
                assignment.b_aux_density.select(aux),
            )
        },
    );
    [a, b]
}

/// `head` then `tail`, in one allocation.
fn concat(head: &[Scalar], tail: Vec<Scalar>) -> Vec<Scalar> {
    if head.is_empty() {
        return tail;
    }
    let mut out = Vec::with_capacity(head.len() + tail.len());
    out.extend_from_slice(head);
    out.extend_from_slice(&tail);
    out
}
