//! Valid synthetic inputs: requests whose vanilla proofs filecoin-proofs accepts, made
//! in seconds at any sector size without sealing a sector, so that real proofs can be
//! made and verified at 32 and 64 GiB.
//!
//! A proof only opens a few hundred nodes of a sector. What its verifier derives the
//! challenges from is fixed first; every value a challenge opens is then computed from
//! it, and every value nothing opens is a seeded random filler:
//!
//! - **PoRep** (interactive, V1_1): the data is all zeros, as in a committed-capacity
//!   sector, so comm_d is the zero tree's root. The replica id comes from comm_d, the
//!   prover, sector and ticket; the challenges from the replica id and the seed. Each
//!   challenged node's label in each layer is computed from its parents' labels
//!   (layer by layer, nodes in ascending order, so a challenged parent's labels are the
//!   computed ones); a parent nothing challenges gets random labels. Trees C and R are
//!   sparse over the opened columns and replica leaves (the last layer's label: the
//!   data is zero), comm_r = H(comm_c, comm_r_last).
//! - **Window and Winning PoSt**: the challenges come from the randomness, the prover and
//!   the sector ids; each sector's tree R is sparse over its challenged leaves, its comm_c
//!   random, its comm_r = H(comm_c, comm_r_last).
//!
//! - **SnapDeals**: its challenges come from comm_r_new, the root of the whole new tree
//!   R, so that tree cannot be sparse; it is built whole, cheaply, from leaves that are
//!   equal where the encoding lets them be: the data nodes of each of the 2^h blocks
//!   rho is constant over share one random value d_b, every old replica node is one
//!   value o; the encoding makes new node i o + d_b·rho(b) for its block b. Trees D, R
//!   old and R new are then block trees (`sparse_tree::BlockTree`): 2^h · levels hashes
//!   at any size. What this leaves untested: sectors whose data or old replica vary
//!   within a block (the circuit's constraints do not depend on it), and at 32 and 64
//!   GiB apex leaves equal in pairs (a block spans two of their subtrees there).
//!
//! Memory is bounded by the opened nodes (a few MB at 64 GiB); no sector-sized array
//! exists.
//!
//! Each kind's builders are in `kinds/<kind>/inputs.rs` (the helpers they share with
//! the shape-true ones in `crate::shape_true`).

pub use crate::kinds::post::inputs::window_post_partition;
