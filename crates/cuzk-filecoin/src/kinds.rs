//! The Filecoin kinds, one module each, every one implementing [`Family`]; here is the
//! one match from a [`CircuitKind`] to its module ([`with_family!`]), and what is
//! answered through it: its names and circuit ids, decoding a request, the circuit of a
//! request folder, parameter file names, blank circuits and fixtures. A new kind is a
//! variant of `CircuitKind` (registered.rs), a module here and its arm in
//! `with_family!`, and its wire value.

pub(crate) mod porep;
pub(crate) mod post;
pub(crate) mod snap;

use std::path::{Path, PathBuf};

use cuzk_groth16::matrices::ConstraintMatrices;
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use storage_proofs_core::parameter_cache::VERSION;

use crate::error::{guarded, FilecoinError};
use crate::family::{Family, PublishedCount, WithBlank};
use crate::job::{FilecoinJob, InputChecks};
use crate::registered::{Circuit, CircuitKind, SectorSize};
use crate::request::FilecoinRequest;
use crate::request_files::RequestFiles;

/// `$body` with `$F` the [`Family`] of `$kind`.
macro_rules! with_family {
    ($kind:expr, $F:ident => $body:expr) => {
        match $kind {
            CircuitKind::Porep => {
                type $F = porep::Porep;
                $body
            }
            CircuitKind::Snap => {
                type $F = snap::Snap;
                $body
            }
            CircuitKind::WindowPost => {
                type $F = post::WindowPost;
                $body
            }
            CircuitKind::WinningPost => {
                type $F = post::WinningPost;
                $body
            }
        }
    };
}

impl FilecoinRequest {
    /// Decodes and checks the request with its kind's decoder; errors name what is
    /// wrong with it.
    pub fn decode(&self, checks: InputChecks) -> Result<Box<dyn FilecoinJob>, FilecoinError> {
        with_family!(self.kind, F => F::decode(self, checks))
    }
}

impl RequestFiles {
    /// Decodes the request as the daemon would.
    pub fn decode(&self, checks: InputChecks) -> Result<Box<dyn FilecoinJob>, FilecoinError> {
        self.request.decode(checks)
    }

    /// The circuit the request is proved with.
    pub fn circuit(&self) -> Result<Circuit, FilecoinError> {
        with_family!(self.request.kind, F => F::circuit(self.request.registered_proof))
    }
}

/// A kind's names are its module's ([`Family::NAMES`]).
impl CircuitKind {
    /// The engine's name of the proof kind that proves this circuit (cuzk-engine's
    /// `ProofKind::name`; a test there checks they agree), and of its wire value.
    pub fn proof_kind_name(self) -> &'static str {
        with_family!(self, F => F::NAMES.engine)
    }

    pub fn from_proof_kind_name(name: &str) -> Option<CircuitKind> {
        CircuitKind::ALL.into_iter().find(|k| k.proof_kind_name() == name)
    }

    /// The kind's name on cuzk's command line (`cuzk fixture porep`).
    pub fn cli_name(self) -> &'static str {
        with_family!(self, F => F::NAMES.cli)
    }

    pub fn from_cli_name(name: &str) -> Option<CircuitKind> {
        CircuitKind::ALL.into_iter().find(|k| k.cli_name() == name)
    }

    fn prefix(self) -> &'static str {
        with_family!(self, F => F::NAMES.prefix)
    }
}

impl std::fmt::Display for Circuit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.id())
    }
}

impl Circuit {
    /// "<kind prefix>-<size suffix>" ("porep-32g", "wpost-2k", …).
    pub fn id(self) -> String {
        format!("{}-{}", self.kind.prefix(), self.size.short())
    }

    pub fn from_id(id: &str) -> Option<Circuit> {
        let (prefix, size) = id.split_once('-')?;
        let kind = CircuitKind::ALL.into_iter().find(|k| k.prefix() == prefix)?;
        let size = SectorSize::ALL.into_iter().find(|s| s.short() == size)?;
        Some(Circuit { kind, size })
    }

    /// The published constraint count per partition, where there is one
    /// (rust-fil-proofs' figures; whether they count the input constraints is the
    /// kind's).
    pub fn published_constraints(self) -> Option<PublishedCount> {
        with_family!(self.kind, F => F::published_constraints(self.size))
    }

    /// storage-proofs' cache id, "<prefix>-<sha256 of the public parameters>": the
    /// same for every registered proof of this kind and size (porep ids, API versions
    /// and features do not enter it).
    pub fn cache_id(self) -> Result<String, FilecoinError> {
        with_family!(self.kind, F => F::cache_id(self.size)).map_err(FilecoinError::rejected(format!("cache id of {self}")))
    }

    /// The file name stem in a Filecoin parameter directory: "v28-<cache id>".
    pub fn file_stem(self) -> Result<String, FilecoinError> {
        Ok(format!("v{VERSION}-{}", self.cache_id()?))
    }

    /// `<dir>/<stem>.params`.
    pub fn params_path(self, dir: &Path) -> Result<PathBuf, FilecoinError> {
        Ok(dir.join(format!("{}.params", self.file_stem()?)))
    }

    /// `<dir>/<stem>.vk`.
    pub fn vk_path(self, dir: &Path) -> Result<PathBuf, FilecoinError> {
        Ok(dir.join(format!("{}.vk", self.file_stem()?)))
    }

    /// `matrices` (this circuit's) with what its kind expects of a partition's witness
    /// ([`ConstraintMatrices::significant_aux`]).
    pub fn with_witness_profile(self, mut matrices: ConstraintMatrices) -> ConstraintMatrices {
        matrices.significant_aux = with_family!(self.kind, F => F::significant_aux(&matrices));
        matrices
    }
}

/// Runs `w` on `circuit`'s blank circuit.
pub(crate) fn with_blank<W: WithBlank>(circuit: Circuit, w: W) -> Result<W::Out, FilecoinError> {
    guarded(&format!("the blank circuit of {circuit}"), || with_family!(circuit.kind, F => F::with_blank(circuit.size, w)))
}

impl CircuitKind {
    /// A shape-true request of this kind at `size` (see `crate::shape_true`), its
    /// random values drawn from `seed`.
    pub fn shape_true_request(self, size: SectorSize, seed: u64) -> Result<RequestFiles, FilecoinError> {
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        let mut request = with_family!(self, F => F::shape_true(size, &mut rng))?;
        request.shape_true_seed = Some(seed);
        Ok(request)
    }

    /// A valid request of this kind at `size` (see `crate::valid`), its tickets, seeds,
    /// randomness and fillers drawn from `seed`.
    pub fn valid_request(self, size: SectorSize, seed: u64) -> Result<RequestFiles, FilecoinError> {
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        with_family!(self, F => F::valid(size, &mut rng))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn circuit_ids_round_trip() {
        for kind in CircuitKind::ALL {
            for size in SectorSize::ALL {
                let c = Circuit { kind, size };
                assert_eq!(Circuit::from_id(&c.id()), Some(c));
            }
        }
        assert_eq!(Circuit::from_id("porep-32g").map(|c| (c.kind, c.size)), Some((CircuitKind::Porep, SectorSize::S32GiB)));
        assert_eq!(Circuit::from_id("porep-33g"), None);
        assert_eq!(Circuit::from_id("synthetic-2^10"), None);
    }

    /// Each name picks one kind: the request folders, the wire and the command line
    /// find a kind by its name, and a circuit id splits at its first '-'.
    #[test]
    fn every_kind_has_names_of_its_own() {
        use crate::family::KindNames;
        use std::collections::HashSet;
        let names: Vec<_> = CircuitKind::ALL.into_iter().map(|k| with_family!(k, F => F::NAMES)).collect();
        let picks: [fn(&KindNames) -> &'static str; 3] = [|n| n.engine, |n| n.cli, |n| n.prefix];
        for pick in picks {
            let unique: HashSet<_> = names.iter().map(pick).collect();
            assert_eq!(unique.len(), names.len(), "{names:?}");
        }
        for n in &names {
            assert!(!n.prefix.contains('-') && !n.prefix.is_empty(), "{n:?}");
            assert_eq!(n.engine, n.engine.to_ascii_lowercase(), "{n:?}");
        }
    }

    /// The names of the published parameter files (their hashes as storage-proofs'
    /// parameters.json lists them).
    #[test]
    fn file_names_match_the_published_parameters() {
        let cases = [
            ("porep-2k", "v28-stacked-proof-of-replication-merkletree-poseidon_hasher-8-0-0-sha256_hasher-032d3138d22506ec"),
            ("porep-32g", "v28-stacked-proof-of-replication-merkletree-poseidon_hasher-8-8-0-sha256_hasher-82a357d2f2ca81dc"),
            ("porep-64g", "v28-stacked-proof-of-replication-merkletree-poseidon_hasher-8-8-2-sha256_hasher-96f1b4a04c5c51e4"),
            ("snap-2k", "v28-empty-sector-update-merkletree-poseidon_hasher-8-0-0-fb9e095bebdd7751"),
            ("snap-32g", "v28-empty-sector-update-merkletree-poseidon_hasher-8-8-0-3b7f44a9362e3985"),
            ("wpost-2k", "v28-proof-of-spacetime-fallback-merkletree-poseidon_hasher-8-0-0-0170db1f394b35d9"),
            ("wpost-32g", "v28-proof-of-spacetime-fallback-merkletree-poseidon_hasher-8-8-0-0377ded656c6f524"),
            ("winning-2k", "v28-proof-of-spacetime-fallback-merkletree-poseidon_hasher-8-0-0-3ea05428c9d11689"),
            ("winning-64g", "v28-proof-of-spacetime-fallback-merkletree-poseidon_hasher-8-8-2-b62098629d07946e"),
        ];
        for (id, prefix) in cases {
            let stem = Circuit::from_id(id).unwrap().file_stem().unwrap();
            assert!(stem.starts_with(prefix), "{id}: {stem} does not start with {prefix}");
            assert_eq!(stem.len(), prefix.len() - 16 + 64, "{id}: {stem}");
        }
    }
}
