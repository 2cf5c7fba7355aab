//! SnapDeals (empty sector update): the partition proofs of an update from the
//! partitions' vanilla proofs and the three commitments.
//!
//! The payload is one bincode `PartitionProof` per partition, in order, with
//! comm_r_old, comm_r_new and comm_d_new.

mod check;
pub(crate) mod inputs;
pub(crate) mod witness;

use blstrs::Scalar;
use cuzk_groth16::matrices::ConstraintMatrices;
use cuzk_groth16::synthesis::EvalBuffers;
use cuzk_groth16::witness::{synthesize_witness_split, AuxBuffer, Witness};
use cuzk_groth16::SynthesizedCircuit;
use filecoin_hashers::{Domain, Hasher};
use filecoin_proofs::{DefaultPieceDomain, PartitionProof, PoRepConfig, SectorUpdateConfig};
use rand_chacha::ChaCha20Rng;
use storage_proofs_core::compound_proof::CompoundProof;
use storage_proofs_core::merkle::MerkleTreeTrait;
use storage_proofs_core::parameter_cache::CacheableParameters;
use storage_proofs_core::proof::ProofScheme;
use storage_proofs_update::constants::TreeRHasher;
use storage_proofs_update::{EmptySectorUpdate, EmptySectorUpdateCircuit, EmptySectorUpdateCompound, PublicInputs, PublicParams};

use crate::compound::{self, partition_public_inputs};
use crate::error::{guarded, FilecoinError};
use crate::family::{Family, KindNames, PublishedCount, WithBlank};
use crate::ids::porep_config;
use crate::job::{check_partition, timing_only_refusal, verdict, CheckedBy, FilecoinJob, InputChecks};
use crate::kinds::snap::witness::SnapWitnessCircuit;
use crate::payload::{bincode_decode, field_element};
use crate::reference::{ReferenceSynthesis, ReferenceWitness};
use crate::registered::{check_sector_size, with_shape, Circuit, SealProof, SectorSize, UpdateProof};
use crate::request::FilecoinRequest;
use crate::request_files::RequestFiles;
use cuzk_groth16::shape::CircuitShape;
use inputs::shape_true as shape_true_snap;
use inputs::valid as valid_snap;

/// The fields of a [`FilecoinRequest`] a SnapDeals decode reads (decoded only through
/// [`FilecoinRequest::decode`]).
pub(crate) struct SnapRequest<'a> {
    pub registered_proof: u64,
    pub sector_size: u64,
    pub vanilla_proofs: &'a [Vec<u8>],
    pub comm_r_old: &'a [u8],
    pub comm_r_new: &'a [u8],
    pub comm_d_new: &'a [u8],
    pub checks: InputChecks,
}

/// SnapDeals, the empty sector update ([`Family`]): registered update proofs 0–4.
pub(crate) struct Snap;

impl Family for Snap {
    const NAMES: KindNames = KindNames { engine: "snap_deals_update", cli: "snap", prefix: "snap" };

    /// rust-fil-proofs' figure is the circuit's own constraints.
    fn published_constraints(size: SectorSize) -> Option<PublishedCount> {
        (size == SectorSize::S32GiB).then_some(PublishedCount { constraints: 81_049_499, with_input_constraints: false })
    }

    fn circuit(registered_proof: u64) -> Result<Circuit, FilecoinError> {
        Ok(UpdateProof::from_registered(registered_proof)?.circuit())
    }

    fn decode(r: &FilecoinRequest, checks: InputChecks) -> Result<Box<dyn FilecoinJob>, FilecoinError> {
        decode(&SnapRequest {
            registered_proof: r.registered_proof,
            sector_size: r.sector_size,
            vanilla_proofs: &r.vanilla_proofs,
            comm_r_old: &r.comm_r_old,
            comm_r_new: &r.comm_r_new,
            comm_d_new: &r.comm_d_new,
            checks,
        })
    }

    fn cache_id(size: SectorSize) -> anyhow::Result<String> {
        fn of<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(size: SectorSize) -> anyhow::Result<String> {
            let pp = PublicParams::from_sector_size(size.bytes());
            Ok(<EmptySectorUpdateCompound<Tree> as CacheableParameters<EmptySectorUpdateCircuit<Tree>, PublicParams>>::cache_identifier(&pp))
        }
        with_shape!(size, of, size)
    }

    fn with_blank<W: WithBlank>(size: SectorSize, w: W) -> Result<W::Out, FilecoinError> {
        fn blank<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>, W: WithBlank>(size: SectorSize, w: W) -> Result<W::Out, FilecoinError> {
            let params = PublicParams::from_sector_size(size.bytes());
            w.run(<EmptySectorUpdateCompound<Tree> as CompoundProof<EmptySectorUpdate<Tree>, EmptySectorUpdateCircuit<Tree>>>::blank_circuit(&params))
        }
        with_shape!(size, blank::<W>, size, w)
    }

    fn shape_true(size: SectorSize, rng: &mut ChaCha20Rng) -> Result<RequestFiles, FilecoinError> {
        with_shape!(size, shape_true_snap, size, rng)
    }

    fn valid(size: SectorSize, rng: &mut ChaCha20Rng) -> Result<RequestFiles, FilecoinError> {
        with_shape!(size, valid_snap, size, rng)
    }
}

pub(crate) fn decode(req: &SnapRequest<'_>) -> Result<Box<dyn FilecoinJob>, FilecoinError> {
    let proof = UpdateProof::from_registered(req.registered_proof)?;
    check_sector_size(req.sector_size, proof.size)?;
    let comms =
        [field_element(req.comm_r_old, "comm_r_old")?, field_element(req.comm_r_new, "comm_r_new")?, field_element(req.comm_d_new, "comm_d_new")?];
    // The update's config only needs the sector size (any seal proof type of it).
    let cfg = porep_config(SealProof::v1_1(proof.size))?;
    guarded("decoding the SnapDeals request", || with_shape!(proof.size, decode_shaped, proof, cfg, req.vanilla_proofs, comms, req.checks))
}

fn decode_shaped<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
    proof: UpdateProof,
    cfg: PoRepConfig,
    vanilla_proofs: &[Vec<u8>],
    [comm_r_old, comm_r_new, comm_d_new]: [[u8; 32]; 3],
    checks: InputChecks,
) -> Result<Box<dyn FilecoinJob>, FilecoinError> {
    let update = SectorUpdateConfig::from_porep_config(&cfg);
    let partitions = usize::from(update.update_partitions);
    if vanilla_proofs.len() != partitions {
        return Err(FilecoinError::invalid(format!(
            "vanilla_proofs has {} entries; a {} update has {partitions} partitions (one proof each, in order)",
            vanilla_proofs.len(),
            proof.size
        )));
    }
    let vanilla: Vec<PartitionProof<Tree>> =
        vanilla_proofs.iter().enumerate().map(|(i, b)| bincode_decode(b, &format!("vanilla_proofs[{i}]"))).collect::<Result<_, _>>()?;
    let params = PublicParams::from_sector_size(proof.size.bytes());
    for (i, p) in vanilla.iter().enumerate() {
        check::snap_partition(p, &params, i)?;
    }
    let domain = |bytes: &[u8; 32], name: &str| {
        <TreeRHasher as Hasher>::Domain::try_from_bytes(bytes)
            .map_err(|e| FilecoinError::invalid(format!("{name} is not a canonical field element: {e}")))
    };
    let inputs = PublicInputs {
        k: partitions,
        comm_r_old: domain(&comm_r_old, "comm_r_old")?,
        comm_d_new: DefaultPieceDomain::try_from_bytes(&comm_d_new)
            .map_err(|e| FilecoinError::invalid(format!("comm_d_new is not a canonical field element: {e}")))?,
        comm_r_new: domain(&comm_r_new, "comm_r_new")?,
        h: update.h,
    };
    // The vanilla proofs are checked before any proving time is spent on them.
    if checks == InputChecks::Full {
        let ok = EmptySectorUpdate::<Tree>::verify_all_partitions(&params, &inputs, &vanilla)
            .map_err(FilecoinError::rejected("the update's vanilla proofs"))?;
        if !ok {
            return Err(FilecoinError::invalid("the vanilla proofs do not verify against comm_r_old, comm_r_new and comm_d_new"));
        }
        for (k, p) in vanilla.iter().enumerate() {
            check::snap_apex(p, &params, k)?;
        }
    }
    Ok(Box::new(SnapJob::<Tree> { proof, cfg, params, inputs, vanilla, comms: [comm_r_old, comm_r_new, comm_d_new], checks }))
}

struct SnapJob<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>> {
    proof: UpdateProof,
    cfg: PoRepConfig,
    params: PublicParams,
    inputs: PublicInputs,
    vanilla: Vec<PartitionProof<Tree>>,
    comms: [[u8; 32]; 3],
    checks: InputChecks,
}

type Compound<Tree> = EmptySectorUpdateCompound<Tree>;

impl<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>> SnapJob<Tree> {
    /// filecoin-proofs' `verify_empty_sector_update_proof` with commitments `comms`
    /// (comm_r_old, comm_r_new, comm_d_new).
    fn verify_as(&self, proof: &[u8], comms: [[u8; 32]; 3]) -> Result<CheckedBy, FilecoinError> {
        if self.timing_only() {
            return Err(timing_only_refusal(self.describe()));
        }
        let [old, new, d] = comms;
        guarded("filecoin-proofs' verify_empty_sector_update_proof", || {
            verdict(filecoin_proofs::verify_empty_sector_update_proof::<Tree>(&self.cfg, proof, old, new, d), self.describe())
        })
    }

    fn circuit_of(&self, partition: usize) -> Result<EmptySectorUpdateCircuit<Tree>, FilecoinError> {
        check_partition(partition, self.vanilla.len())?;
        compound::partition_circuit::<EmptySectorUpdate<Tree>, EmptySectorUpdateCircuit<Tree>, Compound<Tree>>(
            "SnapDeals",
            &self.inputs,
            &self.vanilla[partition],
            &self.params,
            partition,
        )
    }
}

impl<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>> FilecoinJob for SnapJob<Tree> {
    fn circuit(&self) -> Circuit {
        self.proof.circuit()
    }

    fn describe(&self) -> String {
        format!("SnapDeals {}, {} partitions", self.proof.size, self.vanilla.len())
    }

    fn partitions(&self) -> usize {
        self.vanilla.len()
    }

    fn synthesize(&self, partition: usize, buffers: EvalBuffers) -> Result<SynthesizedCircuit, FilecoinError> {
        compound::synthesize("SnapDeals", partition, self.circuit_of(partition)?, buffers)
    }

    /// A partition's challenges read only the prelude and their own proofs: each
    /// thread synthesizes the prelude and its share of the challenges
    /// ([`crate::kinds::snap::witness`]) into its range of the witness (laid out from `aux_len`;
    /// joined afterwards where that is unknown).
    fn witness(&self, partition: usize, aux: AuxBuffer) -> Result<Witness, FilecoinError> {
        let circuit = self.circuit_of(partition)?;
        let challenges: Vec<usize> = (0..circuit.priv_inputs.challenge_proofs.len()).collect();
        guarded("synthesizing the SnapDeals witness", || {
            synthesize_witness_split(&challenges, rayon::current_num_threads(), "challenge_0", aux, |share| {
                Ok::<_, compound::WitnessError>(SnapWitnessCircuit { circuit: &circuit, share: share.to_vec() })
            })
            .map_err(|e| e.into_filecoin(partition))
        })
    }

    /// storage-proofs' `EmptySectorUpdateCircuit` through witness-only synthesis on one thread.
    fn gadget_witness(&self, partition: usize) -> Option<Result<Witness, FilecoinError>> {
        Some(self.circuit_of(partition).and_then(|circuit| compound::witness("SnapDeals", partition, circuit, None)))
    }

    fn compile(&self, partition: usize) -> Result<ConstraintMatrices, FilecoinError> {
        compound::compile("SnapDeals", partition, self.circuit_of(partition)?)
    }

    fn shape(&self, partition: usize) -> Result<CircuitShape, FilecoinError> {
        compound::count("SnapDeals", partition, self.circuit_of(partition)?)
    }

    fn reference_synthesis(&self, partition: usize, how: ReferenceSynthesis) -> Result<ReferenceWitness, FilecoinError> {
        compound::reference("SnapDeals", partition, self.circuit_of(partition)?, how)
    }

    fn public_inputs(&self, partition: usize) -> Result<Vec<Scalar>, FilecoinError> {
        check_partition(partition, self.vanilla.len())?;
        partition_public_inputs::<EmptySectorUpdate<Tree>, EmptySectorUpdateCircuit<Tree>, Compound<Tree>>(
            "SnapDeals",
            &self.inputs,
            &self.params,
            partition,
        )
    }

    fn timing_only(&self) -> bool {
        self.checks == InputChecks::TimingOnly
    }

    fn verify(&self, proof: &[u8]) -> Result<CheckedBy, FilecoinError> {
        self.verify_as(proof, self.comms)
    }

    fn verify_one_input_changed(&self, proof: &[u8]) -> (&'static str, Result<CheckedBy, FilecoinError>) {
        let [old, new, mut d] = self.comms;
        // The lowest bit of the least significant byte: still a field element.
        d[0] ^= 1;
        ("comm_d_new", self.verify_as(proof, [old, new, d]))
    }
}
