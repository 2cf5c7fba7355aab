//! Parameter files for Filecoin circuits made by cuzk's own setup (test sizes, and
//! timing runs): storage-proofs' blank circuit of the kind and size, cuzk-groth16's
//! generator, written under the names filecoin-proofs looks for.
//!
//! Such parameters come from one party's randomness, not Filecoin's ceremony: proofs
//! made with them verify against their own `.vk` only, never on chain.

use std::path::Path;

use bellpepper_core::Circuit;
use blstrs::Scalar;
use cuzk_groth16::generator::{generate_parameters_with, FixedBaseMul, ToxicWaste};
use cuzk_groth16::shape::{count_shape, CircuitShape};
use cuzk_groth16::{ParameterSet, Progress};
use filecoin_hashers::sha256::Sha256Hasher;
use storage_proofs_core::api_version::ApiVersion;
use storage_proofs_core::compound_proof::CompoundProof;
use storage_proofs_core::merkle::MerkleTreeTrait;
use storage_proofs_porep::stacked::{StackedCircuit, StackedCompound, StackedDrg};
use storage_proofs_post::fallback::{FallbackPoSt, FallbackPoStCircuit, FallbackPoStCompound};
use storage_proofs_update::constants::TreeRHasher;
use storage_proofs_update::{EmptySectorUpdate, EmptySectorUpdateCircuit, EmptySectorUpdateCompound, PublicParams as UpdatePublicParams};

use crate::error::{guarded, FilecoinError};
use crate::ids::{porep_config, post_config, post_public_params};
use crate::registered::{with_shape, CircuitKind, PostProof, SealProof, SectorSize};

/// Something done with a circuit kind's blank circuit (no witness), whatever its type.
pub(crate) trait WithBlank {
    type Out;
    fn run<C: Circuit<Scalar>>(self, blank: C) -> Result<Self::Out, FilecoinError>;
}

/// A setup from the secrets `tw`.
struct Setup<'a> {
    tw: &'a ToxicWaste,
    mul: &'a dyn FixedBaseMul,
    progress: &'a dyn Progress,
}

impl WithBlank for Setup<'_> {
    type Out = ParameterSet;
    fn run<C: Circuit<Scalar>>(self, blank: C) -> Result<ParameterSet, FilecoinError> {
        generate_parameters_with(blank, self.tw, self.mul, self.progress)
            .map_err(|e| FilecoinError::Synthesis { partition: 0, message: format!("setup: {e}") })
    }
}

/// A count of the blank circuit: the shape of the parameter file.
struct Count;

impl WithBlank for Count {
    type Out = CircuitShape;
    fn run<C: Circuit<Scalar>>(self, blank: C) -> Result<CircuitShape, FilecoinError> {
        count_shape(blank).map_err(|e| FilecoinError::Synthesis { partition: 0, message: format!("counting the blank circuit: {e}") })
    }
}

fn post_blank<Tree: 'static + MerkleTreeTrait, W: WithBlank>(proof: PostProof, w: W) -> Result<W::Out, FilecoinError> {
    let cfg = post_config(proof);
    let params = post_public_params::<Tree>(&cfg)?;
    w.run(<FallbackPoStCompound<Tree> as CompoundProof<FallbackPoSt<'_, Tree>, FallbackPoStCircuit<Tree>>>::blank_circuit(&params))
}

fn porep_blank<Tree: 'static + MerkleTreeTrait, W: WithBlank>(proof: SealProof, w: W) -> Result<W::Out, FilecoinError> {
    let params =
        filecoin_proofs::parameters::public_params::<Tree>(&porep_config(proof)?).map_err(FilecoinError::rejected("PoRep public parameters"))?;
    w.run(
        <StackedCompound<Tree, Sha256Hasher> as CompoundProof<StackedDrg<'_, Tree, Sha256Hasher>, StackedCircuit<Tree, Sha256Hasher>>>::blank_circuit(
            &params,
        ),
    )
}

fn snap_blank<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>, W: WithBlank>(size: SectorSize, w: W) -> Result<W::Out, FilecoinError> {
    let params = UpdatePublicParams::from_sector_size(size.bytes());
    w.run(<EmptySectorUpdateCompound<Tree> as CompoundProof<EmptySectorUpdate<Tree>, EmptySectorUpdateCircuit<Tree>>>::blank_circuit(&params))
}

/// Runs `w` on `circuit`'s blank circuit.
pub(crate) fn with_blank<W: WithBlank>(circuit: crate::Circuit, w: W) -> Result<W::Out, FilecoinError> {
    guarded(&format!("the blank circuit of {circuit}"), || match circuit.kind {
        CircuitKind::WindowPost | CircuitKind::WinningPost => {
            let proof = PostProof { window: circuit.kind == CircuitKind::WindowPost, size: circuit.size, api_version: ApiVersion::V1_2_0 };
            with_shape!(circuit.size, post_blank::<W>, proof, w)
        }
        CircuitKind::Porep => {
            // Every seal proof type of a size shares its circuit; V1_1 stands for them.
            let proof = SealProof::v1_1(circuit.size);
            with_shape!(circuit.size, porep_blank::<W>, proof, w)
        }
        CircuitKind::Snap => with_shape!(circuit.size, snap_blank::<W>, circuit.size, w),
    })
}

/// Generates a parameter set for `circuit` from the secrets `tw`.
pub fn generate(circuit: crate::Circuit, tw: &ToxicWaste, mul: &dyn FixedBaseMul, progress: &dyn Progress) -> Result<ParameterSet, FilecoinError> {
    with_blank(circuit, Setup { tw, mul, progress })
}

/// The shape of `circuit`'s parameter file, from a count of its blank circuit (one
/// core, little memory; about a minute for a 32 GiB PoRep partition).
pub fn blank_shape(circuit: crate::Circuit) -> Result<CircuitShape, FilecoinError> {
    with_blank(circuit, Count)
}

/// Writes `params` as `<dir>/<stem>.params` and `<dir>/<stem>.vk`, the names
/// filecoin-proofs reads for `circuit`.
pub fn write_files(params: &ParameterSet, circuit: crate::Circuit, dir: &Path) -> Result<(), FilecoinError> {
    std::fs::create_dir_all(dir).map_err(|e| FilecoinError::invalid(format!("cannot create parameter directory {}: {e}", dir.display())))?;
    let path = circuit.params_path(dir)?;
    cuzk_groth16::format::save(params, &path).map_err(|e| FilecoinError::invalid(format!("writing {}: {e}", path.display())))
}
