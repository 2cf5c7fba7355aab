//! The engine's two kinds of thread, each a loop over a queue: synthesis workers take
//! partitions from the priority queue, gather their memory, synthesize them and hand
//! them on; prover workers (N per backend) prove, verify and record them.

mod panic_guard;
mod prover;
mod synthesis;

pub(crate) use prover::prover_loop;
pub(crate) use synthesis::synthesis_loop;
