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
use cuzk_groth16::{ParameterSet, Progress};
use filecoin_hashers::sha256::Sha256Hasher;
use storage_proofs_core::compound_proof::CompoundProof;
use storage_proofs_core::merkle::MerkleTreeTrait;
use storage_proofs_porep::stacked::{StackedCircuit, StackedCompound, StackedDrg};
use storage_proofs_post::fallback::{FallbackPoSt, FallbackPoStCircuit, FallbackPoStCompound};
use storage_proofs_update::constants::TreeRHasher;
use storage_proofs_update::{EmptySectorUpdate, EmptySectorUpdateCircuit, EmptySectorUpdateCompound, PublicParams as UpdatePublicParams};

use crate::error::FilecoinError;
use crate::ids::{porep_config, post_config, post_public_params};
use crate::registered::{with_shape, CircuitKind, PostProof, SealProof, SectorSize};

fn setup<C: Circuit<Scalar>>(blank: C, tw: &ToxicWaste, mul: &dyn FixedBaseMul, progress: &dyn Progress) -> Result<ParameterSet, FilecoinError> {
    generate_parameters_with(blank, tw, mul, progress).map_err(|e| FilecoinError::Synthesis { partition: 0, message: format!("setup: {e}") })
}

fn post_parameters<Tree: 'static + MerkleTreeTrait>(
    proof: PostProof,
    tw: &ToxicWaste,
    mul: &dyn FixedBaseMul,
    progress: &dyn Progress,
) -> Result<ParameterSet, FilecoinError> {
    let cfg = post_config(proof);
    let params = post_public_params::<Tree>(&cfg)?;
    let blank = <FallbackPoStCompound<Tree> as CompoundProof<FallbackPoSt<'_, Tree>, FallbackPoStCircuit<Tree>>>::blank_circuit(&params);
    setup(blank, tw, mul, progress)
}

fn porep_parameters<Tree: 'static + MerkleTreeTrait>(
    proof: SealProof,
    tw: &ToxicWaste,
    mul: &dyn FixedBaseMul,
    progress: &dyn Progress,
) -> Result<ParameterSet, FilecoinError> {
    let params =
        filecoin_proofs::parameters::public_params::<Tree>(&porep_config(proof)?).map_err(FilecoinError::rejected("PoRep public parameters"))?;
    let blank =
        <StackedCompound<Tree, Sha256Hasher> as CompoundProof<StackedDrg<'_, Tree, Sha256Hasher>, StackedCircuit<Tree, Sha256Hasher>>>::blank_circuit(
            &params,
        );
    setup(blank, tw, mul, progress)
}

fn snap_parameters<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
    size: SectorSize,
    tw: &ToxicWaste,
    mul: &dyn FixedBaseMul,
    progress: &dyn Progress,
) -> Result<ParameterSet, FilecoinError> {
    let params = UpdatePublicParams::from_sector_size(size.bytes());
    let blank = <EmptySectorUpdateCompound<Tree> as CompoundProof<EmptySectorUpdate<Tree>, EmptySectorUpdateCircuit<Tree>>>::blank_circuit(&params);
    setup(blank, tw, mul, progress)
}

/// Generates a parameter set for `circuit` from the secrets `tw`.
pub fn generate(circuit: crate::Circuit, tw: &ToxicWaste, mul: &dyn FixedBaseMul, progress: &dyn Progress) -> Result<ParameterSet, FilecoinError> {
    match circuit.kind {
        CircuitKind::WindowPost | CircuitKind::WinningPost => {
            let proof = PostProof {
                window: circuit.kind == CircuitKind::WindowPost,
                size: circuit.size,
                api_version: storage_proofs_core::api_version::ApiVersion::V1_2_0,
            };
            with_shape!(circuit.size, post_parameters, proof, tw, mul, progress)
        }
        CircuitKind::Porep => {
            // Every seal proof type of a size shares its circuit; V1_1 stands for them.
            let proof = SealProof::from_registered(5 + circuit.size as u64)?;
            with_shape!(circuit.size, porep_parameters, proof, tw, mul, progress)
        }
        CircuitKind::Snap => with_shape!(circuit.size, snap_parameters, circuit.size, tw, mul, progress),
    }
}

/// Writes `params` as `<dir>/<stem>.params` and `<dir>/<stem>.vk`, the names
/// filecoin-proofs reads for `circuit`.
pub fn write_files(params: &ParameterSet, circuit: crate::Circuit, dir: &Path) -> Result<(), FilecoinError> {
    std::fs::create_dir_all(dir).map_err(|e| FilecoinError::invalid(format!("cannot create parameter directory {}: {e}", dir.display())))?;
    let path = circuit.params_path(dir)?;
    cuzk_groth16::format::save(params, &path).map_err(|e| FilecoinError::invalid(format!("writing {}: {e}", path.display())))
}
