//! Witness runs: a circuit's `alloc` closures alone, checked against a recording, whole or
//! in parts on several threads.

use bellperson::{Circuit, ConstraintSystem, Index, LinearCombination, SynthesisError, Variable};
use blstrs::Scalar;
use ff::Field;
use std::mem::MaybeUninit;
use std::sync::{mpsc, Mutex};

use super::trace::{ALLOC, ENFORCE, INPUT};
use super::{RecordedSystem, Trace};
use crate::error::{Error, Result};

impl RecordedSystem {
    /// Runs only `circuit`'s witness computation: its `alloc` closures, no linear
    /// combination. Refused unless it allocates and constrains as the recorded circuit did.
    pub fn witness<C: Circuit<Scalar>>(&self, circuit: C) -> Result<WitnessValues> {
        // Sized once: growing a 2 GiB vector by doubling copies it and faults in its pages
        // again at each step.
        let aux = AuxValues::Own(Vec::with_capacity(self.aux));
        let run = Witness::run(circuit, (0, 0), 0, self.inputs, aux)?;
        let aux = run.aux.into_own();
        self.checked(run.inputs, aux, run.constraints, run.trace)
    }

    /// [`witness`](Self::witness) of a circuit in parts, each part a task of `pool` that runs
    /// to its end. This thread waits for them without taking other work of the pool, and
    /// appends each part's values to the whole as soon as it and the parts before it are
    /// done, or, where the last witness in parts of this system tells each part's size
    /// (remembered beside the recorded system), each part writes its values into its place in
    /// the whole. A witness waited for from inside the pool took up other work of the pool while
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
        let prefix = Witness::run(prefix, (0, 0), 0, 0, AuxValues::Own(Vec::new()))?;
        let shared = (prefix.input_count, prefix.aux_count);
        let (prefix_steps, prefix_constraints) = (prefix.steps(), prefix.constraints);
        let prefix_state = Some((prefix.trace, shared));
        // The prefix's values, then the parts' where they have no place in `whole`.
        let mut copied = prefix.aux.into_own();
        let mut inputs = prefix.inputs;
        inputs.reserve_exact(self.inputs.saturating_sub(inputs.len()));
        let prefix_trace = prefix.trace;
        let (mut trace, mut constraints) = (prefix_trace, prefix_constraints);
        let count = parts.len();
        // Where the last run's part sizes add up to this system's, each part writes into its
        // place in `whole`; otherwise each keeps its own vector and they are copied into the
        // prefix's, in order, as they come.
        let mut whole: Vec<Scalar> = Vec::new();
        let mut places = self.part_sizes.places(&mut whole, &copied, self.aux, count);
        if places.is_none() {
            copied.reserve_exact(self.aux.saturating_sub(copied.len()));
        }
        let mut sizes = Vec::with_capacity(count);
        let mut placed = Vec::new();
        let mut first_error = None;
        pool.in_place_scope(|scope| {
            let (done, arrivals) = mpsc::channel();
            for (k, part) in parts.into_iter().enumerate() {
                let done = done.clone();
                let aux = match places.as_mut() {
                    Some(places) => AuxValues::Place {
                        slots: std::mem::take(&mut places[k]),
                        filled: 0,
                        beyond: Vec::new(),
                    },
                    None => AuxValues::Own(Vec::new()),
                };
                scope.spawn(move |_| {
                    // The receiver outlives the scope.
                    let _ = done.send((k, Witness::run(part, shared, prefix_steps, 0, aux)));
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
                    sizes.push(run.aux_count - run.shared_aux);
                    inputs.extend(run.inputs);
                    match run.aux {
                        AuxValues::Own(values) => copied.extend_from_slice(&values),
                        place => placed.push(place),
                    }
                    next += 1;
                }
            }
        });
        if let Some(e) = first_error {
            return Err(e);
        }
        let aux = match places {
            None => copied,
            Some(_) => {
                let whole_filled = placed.iter().all(AuxValues::filled_its_place);
                if whole_filled && placed.len() == count {
                    drop(placed);
                    // SAFETY: `whole` has capacity for `self.aux` values; `places` wrote the
                    // prefix's into its first slots and split the rest into one place a part,
                    // and every part filled its place (`filled_its_place`).
                    unsafe { whole.set_len(self.aux) };
                    whole
                } else {
                    // A part kept another count than last time: copied in order after all.
                    for place in &placed {
                        place.append_to(&mut copied);
                    }
                    copied
                }
            }
        };
        self.part_sizes.remember(sizes);
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

/// The aux values each part of this system's last witness in parts kept, in order. The next
/// witness in parts with as many parts writes each part's values straight into its place in
/// the whole, where otherwise each part's vector is copied into the whole: at 32 GiB a
/// partition's 4.2 GB copied, on one thread, into pages the kernel first clears. Only a
/// hint: where a part keeps another count, the parts' values are copied after all.
#[derive(Default)]
pub(super) struct PartSizes(Mutex<Option<Vec<usize>>>);

impl PartSizes {
    fn get(&self) -> Option<Vec<usize>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn remember(&self, sizes: Vec<usize>) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(sizes);
    }

    /// Where the remembered sizes of `parts` parts add up to `total` with the prefix's
    /// values: `whole` sized for `total`, the prefix's values written into its first slots,
    /// and the rest cut into one place a part.
    fn places<'w>(
        &self,
        whole: &'w mut Vec<Scalar>,
        prefix: &[Scalar],
        total: usize,
        parts: usize,
    ) -> Option<Vec<&'w mut [MaybeUninit<Scalar>]>> {
        let sizes = self.get().filter(|sizes| sizes.len() == parts)?;
        let own: usize = sizes.iter().sum();
        if prefix.len().checked_add(own) != Some(total) {
            return None;
        }
        *whole = Vec::with_capacity(total);
        let (head, mut rest) = whole.spare_capacity_mut()[..total].split_at_mut(prefix.len());
        for (slot, &value) in head.iter_mut().zip(prefix) {
            slot.write(value);
        }
        let mut places = Vec::with_capacity(parts);
        for size in sizes {
            let (place, after) = std::mem::take(&mut rest).split_at_mut(size);
            places.push(place);
            rest = after;
        }
        Some(places)
    }
}

impl Clone for PartSizes {
    fn clone(&self) -> Self {
        PartSizes(Mutex::new(self.get()))
    }
}

/// A hint, not part of what the system is.
impl PartialEq for PartSizes {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for PartSizes {}

impl std::fmt::Debug for PartSizes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("PartSizes").field(&self.get()).finish()
    }
}

/// Where a witness run keeps the aux values it does not share with its prefix.
enum AuxValues<'w> {
    /// A vector of its own.
    Own(Vec<Scalar>),
    /// Its place in the whole ([`PartSizes`]), and a vector for any values beyond it.
    Place {
        slots: &'w mut [MaybeUninit<Scalar>],
        filled: usize,
        beyond: Vec<Scalar>,
    },
}

impl AuxValues<'_> {
    fn push(&mut self, value: Scalar) {
        match self {
            AuxValues::Own(values) => values.push(value),
            AuxValues::Place {
                slots,
                filled,
                beyond,
            } => match slots.get_mut(*filled) {
                Some(slot) => {
                    slot.write(value);
                    *filled += 1;
                }
                None => beyond.push(value),
            },
        }
    }

    /// Whether the run filled its place exactly.
    fn filled_its_place(&self) -> bool {
        match self {
            AuxValues::Own(_) => false,
            AuxValues::Place {
                slots,
                filled,
                beyond,
            } => *filled == slots.len() && beyond.is_empty(),
        }
    }

    /// Appends the run's values, in order, to `values`.
    fn append_to(&self, values: &mut Vec<Scalar>) {
        match self {
            AuxValues::Own(own) => values.extend_from_slice(own),
            AuxValues::Place {
                slots,
                filled,
                beyond,
            } => {
                // SAFETY: `push` wrote the first `filled` slots.
                values.extend(
                    slots[..*filled]
                        .iter()
                        .map(|slot| unsafe { slot.assume_init() }),
                );
                values.extend_from_slice(beyond);
            }
        }
    }

    fn into_own(self) -> Vec<Scalar> {
        match self {
            AuxValues::Own(values) => values,
            place => {
                let mut values = Vec::new();
                place.append_to(&mut values);
                values
            }
        }
    }
}

/// The constraint system of a witness run: values allocated, constraints only counted.
struct Witness<'w> {
    inputs: Vec<Scalar>,
    aux: AuxValues<'w>,
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

impl<'w> Witness<'w> {
    /// Runs `circuit` after the ONE input, keeping the values of all but the first
    /// `shared` (inputs, aux) allocations in `aux` and a vector of `input_capacity`, noting
    /// where it stood after `prefix_steps` steps.
    fn run<C: Circuit<Scalar>>(
        circuit: C,
        shared: (usize, usize),
        prefix_steps: u64,
        input_capacity: usize,
        aux: AuxValues<'w>,
    ) -> Result<Self> {
        let mut witness = Witness {
            inputs: Vec::with_capacity(input_capacity),
            aux,
            shared_inputs: shared.0,
            shared_aux: shared.1,
            prefix_steps,
            at_prefix: None,
            input_count: 0,
            aux_count: 0,
            constraints: 0,
            trace: Trace::default(),
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

/// Every variable a witness run hands out is one and the same (`ONE` for inputs, the first
/// aux variable for aux values): its constraints are only counted, and gadgets that build
/// linear combinations outside `enforce` then build them of one term. bellperson's
/// `UInt32::addmany` does so for every SHA-256 addition, and kept sorted, its combinations
/// of a hundred terms and more took 66% of a real PoRep partition's witness (2 KiB, `perf`);
/// with one variable the witness took 40% less. Values, and which allocations and
/// constraints a gadget makes, never depend on a variable's index (the run's trace is
/// checked against the recorded system's).
impl<'w> ConstraintSystem<Scalar> for Witness<'w> {
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
        Ok(Variable(Index::Aux(0)))
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
        Ok(Variable(Index::Input(0)))
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::ops::Range;

    /// Allocates 0..prefix, then `own`, each value its index, each checked by a constraint.
    struct Counting {
        prefix: u64,
        own: Range<u64>,
    }

    impl Circuit<Scalar> for Counting {
        fn synthesize<CS: ConstraintSystem<Scalar>>(
            self,
            cs: &mut CS,
        ) -> std::result::Result<(), SynthesisError> {
            for i in (0..self.prefix).chain(self.own) {
                let v = cs.alloc(|| "v", || Ok(Scalar::from(i)))?;
                cs.enforce(|| "v", |lc| lc + v, |lc| lc + CS::one(), |lc| lc + v);
            }
            Ok(())
        }
    }

    fn split(cuts: &[u64]) -> CircuitParts<Counting> {
        CircuitParts {
            prefix: Counting {
                prefix: 2,
                own: 0..0,
            },
            parts: cuts
                .windows(2)
                .map(|w| Counting {
                    prefix: 2,
                    own: w[0]..w[1],
                })
                .collect(),
        }
    }

    /// The parts write into their places once their sizes are known, and a part that keeps
    /// more or fewer values than its place holds still gives the whole witness, in order.
    #[test]
    fn parts_in_their_places_give_the_whole_witness_whatever_their_sizes() {
        let matrices = RecordedSystem::record(Counting {
            prefix: 2,
            own: 2..10,
        })
        .unwrap();
        let whole = matrices
            .witness(Counting {
                prefix: 2,
                own: 2..10,
            })
            .unwrap()
            .aux;
        assert_eq!(whole, (0..10).map(Scalar::from).collect::<Vec<_>>());
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        // First copied; then in the places [3, 5] (exact); then [5, 3] into those places (the
        // first part beyond its place, the second short of it); then in [5, 3] again.
        for (cuts, places) in [
            (&[2, 5, 10], None),
            (&[2, 5, 10], Some(vec![3, 5])),
            (&[2, 7, 10], Some(vec![3, 5])),
            (&[2, 7, 10], Some(vec![5, 3])),
        ] {
            assert_eq!(matrices.part_sizes.get(), places, "{cuts:?}");
            let values = matrices.witness_in_parts(split(cuts), &pool).unwrap();
            assert_eq!(values.aux, whole, "{cuts:?} after {places:?}");
        }
        // Sizes that do not add up to the system's are not used.
        matrices.part_sizes.remember(vec![3, 6]);
        assert!(matrices
            .part_sizes
            .places(&mut Vec::new(), &whole[..2], 10, 2)
            .is_none());
        let values = matrices
            .witness_in_parts(split(&[2, 5, 10]), &pool)
            .unwrap();
        assert_eq!(values.aux, whole);
    }
}
