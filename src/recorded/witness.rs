//! Witness runs: a circuit's `alloc` closures alone, checked against a recording, whole or
//! in parts on several threads.

use bellperson::{Circuit, ConstraintSystem, Index, LinearCombination, SynthesisError, Variable};
use blstrs::Scalar;
use ff::Field;
use std::sync::mpsc;

use super::trace::{ALLOC, ENFORCE, INPUT};
use super::{RecordedSystem, Trace};
use crate::error::{Error, Result};

impl RecordedSystem {
    /// Runs only `circuit`'s witness computation: its `alloc` closures, no linear
    /// combination. Refused unless it allocates and constrains as the recorded circuit did.
    pub fn witness<C: Circuit<Scalar>>(&self, circuit: C) -> Result<WitnessValues> {
        // Sized once: growing a 2 GiB vector by doubling copies it and faults in its pages
        // again at each step.
        let run = Witness::run(circuit, (0, 0), 0, (self.inputs, self.aux))?;
        self.checked(run.inputs, run.aux, run.constraints, run.trace)
    }

    /// [`witness`](Self::witness) of a circuit in parts, each part a task of `pool` that runs
    /// to its end. This thread waits for them without taking other work of the pool, and
    /// appends each part's values to the whole as soon as it and the parts before it are
    /// done: a witness waited for from inside the pool took up other work of the pool while
    /// it waited, another circuit's whole witness among it, and was held up by it (a 32 GiB
    /// partition took 23-29 s where the others took 4.2-6.5 s). Refused when this thread is
    /// one of `pool`'s, and unless the parts together allocate and constrain as the recorded
    /// circuit did.
    pub fn witness_in_parts<C: Circuit<Scalar> + Send>(
        &self,
        circuit: CircuitParts<C>,
        pool: &rayon::ThreadPool,
    ) -> Result<WitnessValues> {
        if pool.current_thread_index().is_some() {
            // It would block a thread the parts may need: with one, forever.
            return Err(Error::InvalidInput(
                "a witness in parts waits for its parts: run it from outside the pool they \
                 run on"
                    .into(),
            ));
        }
        let CircuitParts { prefix, parts } = circuit;
        let prefix = Witness::run(prefix, (0, 0), 0, (0, 0))?;
        let shared = (prefix.input_count, prefix.aux_count);
        let (prefix_steps, prefix_constraints) = (prefix.steps(), prefix.constraints);
        let prefix_state = Some((prefix.trace, shared));
        let (mut inputs, mut aux) = (prefix.inputs, prefix.aux);
        inputs.reserve_exact(self.inputs.saturating_sub(inputs.len()));
        aux.reserve_exact(self.aux.saturating_sub(aux.len()));
        let prefix_trace = prefix.trace;
        let (mut trace, mut constraints) = (prefix_trace, prefix_constraints);
        let count = parts.len();
        let mut first_error = None;
        pool.in_place_scope(|scope| {
            let (done, arrivals) = mpsc::channel();
            for (k, part) in parts.into_iter().enumerate() {
                let done = done.clone();
                scope.spawn(move |_| {
                    // The receiver outlives the scope.
                    let _ = done.send((k, Witness::run(part, shared, prefix_steps, (0, 0))));
                });
            }
            // A part that panics sends nothing: the loop below then ends, and the scope
            // passes its panic on.
            drop(done);
            // Parts done out of order wait here for the ones before them.
            let mut waiting: Vec<Option<Witness>> = (0..count).map(|_| None).collect();
            let mut next = 0;
            for (k, run) in arrivals.iter().take(count) {
                match run {
                    Ok(run) if first_error.is_none() => waiting[k] = Some(run),
                    Ok(_) => {}
                    Err(e) => {
                        first_error.get_or_insert(e);
                    }
                }
                while let Some(run) = waiting.get_mut(next).and_then(Option::take) {
                    if run.at_prefix != prefix_state {
                        first_error.get_or_insert(Error::CircuitStructure(
                            "a part of the circuit does not begin with its prefix's \
                             allocations and constraints"
                                .into(),
                        ));
                        break;
                    }
                    let steps = run.steps() - prefix_steps;
                    trace = trace.then(run.trace.after(prefix_trace, steps), steps);
                    constraints += run.constraints - prefix_constraints;
                    inputs.extend(run.inputs);
                    aux.extend_from_slice(&run.aux);
                    next += 1;
                }
            }
        });
        if let Some(e) = first_error {
            return Err(e);
        }
        self.checked(inputs, aux, constraints, trace)
    }

    /// The witness values, if they and the run's constraints and trace are the recorded
    /// circuit's.
    fn checked(
        &self,
        inputs: Vec<Scalar>,
        aux: Vec<Scalar>,
        constraints: usize,
        mut trace: Trace,
    ) -> Result<WitnessValues> {
        // The `input * 0 = 0` constraints of every input, as recorded.
        for _ in 0..inputs.len() {
            trace.step(ENFORCE);
        }
        let found = (inputs.len(), aux.len(), constraints);
        let recorded = (self.inputs, self.aux, self.constraints);
        if found != recorded || trace != self.trace {
            return Err(Error::CircuitStructure(format!(
                "recorded {} inputs, {} aux, {} constraints; this circuit has {}, {}, {}{}",
                recorded.0,
                recorded.1,
                recorded.2,
                found.0,
                found.1,
                found.2,
                if found == recorded {
                    " in another order"
                } else {
                    ""
                }
            )));
        }
        Ok(WitnessValues { inputs, aux })
    }
}

/// A witness checked against a recorded system ([`RecordedSystem::witness`]).
pub struct WitnessValues {
    pub(crate) inputs: Vec<Scalar>,
    pub(crate) aux: Vec<Scalar>,
}

/// A circuit whose witness is computed in parts on several threads. Each part is a circuit
/// that makes the allocations of `prefix` (a circuit of those alone) first, then its own;
/// the whole circuit's are the prefix's, then each part's own, in order. Filecoin's
/// circuits have this shape: public values first, then challenges that only read them.
pub struct CircuitParts<C> {
    pub prefix: C,
    pub parts: Vec<C>,
}

/// How recorded matrices get a circuit's witness: a [`Circuit`] runs whole, a
/// [`CircuitParts`] in parts.
pub trait WitnessRun: Send {
    /// The witness, checked against `matrices`, its work on `pool`'s threads.
    fn witness_of(
        self,
        matrices: &RecordedSystem,
        pool: &rayon::ThreadPool,
    ) -> Result<WitnessValues>;

    /// Threads the run keeps busy: a batch synthesizes fewer circuits at once when each
    /// fills several, so that the next proof's circuit is ready first instead of all at once.
    fn parallelism(&self) -> usize {
        1
    }
}

impl<C: Circuit<Scalar> + Send> WitnessRun for C {
    fn witness_of(
        self,
        matrices: &RecordedSystem,
        pool: &rayon::ThreadPool,
    ) -> Result<WitnessValues> {
        pool.install(|| matrices.witness(self))
    }
}

impl<C: Circuit<Scalar> + Send> WitnessRun for CircuitParts<C> {
    fn witness_of(
        self,
        matrices: &RecordedSystem,
        pool: &rayon::ThreadPool,
    ) -> Result<WitnessValues> {
        matrices.witness_in_parts(self, pool)
    }

    fn parallelism(&self) -> usize {
        self.parts.len().max(1)
    }
}

/// The constraint system of a witness run: values allocated, constraints only counted.
#[derive(Default)]
struct Witness {
    inputs: Vec<Scalar>,
    aux: Vec<Scalar>,
    /// The first allocations, which a part shares with its prefix: counted and traced, their
    /// values not kept (the prefix's run keeps them).
    shared_inputs: usize,
    shared_aux: usize,
    /// Steps of the prefix, and the trace and (inputs, aux) counts seen when this run had
    /// taken as many: a part must have followed the prefix exactly.
    prefix_steps: u64,
    at_prefix: Option<(Trace, (usize, usize))>,
    input_count: usize,
    aux_count: usize,
    constraints: usize,
    trace: Trace,
}

impl Witness {
    /// Runs `circuit` after the ONE input, keeping the values of all but the first
    /// `shared` (inputs, aux) allocations, noting where it stood after `prefix_steps` steps,
    /// its vectors sized for `capacity`.
    fn run<C: Circuit<Scalar>>(
        circuit: C,
        shared: (usize, usize),
        prefix_steps: u64,
        capacity: (usize, usize),
    ) -> Result<Self> {
        let mut witness = Witness {
            inputs: Vec::with_capacity(capacity.0),
            aux: Vec::with_capacity(capacity.1),
            shared_inputs: shared.0,
            shared_aux: shared.1,
            prefix_steps,
            ..Default::default()
        };
        witness.alloc_input(|| "one", || Ok(Scalar::ONE))?;
        circuit.synthesize(&mut witness)?;
        Ok(witness)
    }

    /// Allocations and constraints seen.
    fn steps(&self) -> u64 {
        (self.input_count + self.aux_count + self.constraints) as u64
    }

    fn step(&mut self, event: u8) {
        self.trace.step(event);
        if self.steps() == self.prefix_steps {
            self.at_prefix = Some((self.trace, (self.input_count, self.aux_count)));
        }
    }
}

impl ConstraintSystem<Scalar> for Witness {
    type Root = Self;

    fn alloc<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        let value = f()?;
        if self.aux_count >= self.shared_aux {
            self.aux.push(value);
        }
        self.aux_count += 1;
        self.step(ALLOC);
        Ok(Variable(Index::Aux(self.aux_count - 1)))
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        let value = f()?;
        if self.input_count >= self.shared_inputs {
            self.inputs.push(value);
        }
        self.input_count += 1;
        self.step(INPUT);
        Ok(Variable(Index::Input(self.input_count - 1)))
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, _: A, _: LA, _: LB, _: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
    {
        self.constraints += 1;
        self.step(ENFORCE);
    }

    fn push_namespace<NR, N>(&mut self, _: N)
    where
        NR: Into<String>,
        N: FnOnce() -> NR,
    {
    }

    fn pop_namespace(&mut self) {}

    fn get_root(&mut self) -> &mut Self::Root {
        self
    }
}
