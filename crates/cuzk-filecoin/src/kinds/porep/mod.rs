//! PoRep C2: the partition proofs of a sealed sector from its C1 output.
//!
//! The payload is Curio's JSON envelope `{"SectorNum", "Phase1Out" (base64 of the C1
//! JSON), "SectorSize"}`, or the C1 JSON itself. C1 is filecoin-proofs-api's
//! `SealCommitPhase1Output`: the registered proof by name, the vanilla proofs under a
//! tag naming the sector size, the commitments, replica id, seed and ticket.

mod check;
pub(crate) mod inputs;
pub(crate) mod witness;

use std::collections::BTreeMap;

use base64::Engine as _;
use blstrs::Scalar;
use cuzk_groth16::matrices::ConstraintMatrices;
use cuzk_groth16::synthesis::EvalBuffers;
use cuzk_groth16::witness::{synthesize_witness_split, AuxBuffer, Witness};
use cuzk_groth16::SynthesizedCircuit;
use filecoin_hashers::sha256::Sha256Hasher;
use filecoin_hashers::{Domain, Hasher};
use filecoin_proofs::{as_safe_commitment, PoRepConfig, VanillaSealProof};
use rand_chacha::ChaCha20Rng;
use serde::Deserialize;
use storage_proofs_core::api_version::ApiFeature;
use storage_proofs_core::compound_proof::CompoundProof;
use storage_proofs_core::merkle::MerkleTreeTrait;
use storage_proofs_core::proof::ProofScheme;
use storage_proofs_core::sector::SectorId;
use storage_proofs_porep::stacked::{self, generate_replica_id, StackedCircuit, StackedCompound, StackedDrg};

use crate::compound::{self, partition_public_inputs};
use crate::error::{guarded, FilecoinError};
use crate::family::{Family, KindNames, PublishedCount, WithBlank};
use crate::ids::{porep_config, prover_id};
use crate::job::{check_partition, timing_only_refusal, verdict, CheckedBy, FilecoinJob, InputChecks};
use crate::kinds::porep::witness::{challenge_proofs, PorepWitnessCircuit};
use crate::payload::field_element;
use crate::reference::{ReferenceSynthesis, ReferenceWitness};
use crate::registered::{check_sector_size, with_shape, Circuit, SealProof, SectorSize};
use crate::request::FilecoinRequest;
use crate::request_files::RequestFiles;
use cuzk_groth16::shape::CircuitShape;
use inputs::shape_true as shape_true_porep;
use inputs::valid as valid_porep;

type DomainOf<Tree> = <<Tree as MerkleTreeTrait>::Hasher as Hasher>::Domain;
type Inputs<Tree> = stacked::PublicInputs<DomainOf<Tree>, <Sha256Hasher as Hasher>::Domain>;

/// The fields of a [`FilecoinRequest`] a PoRep C2 decode reads (decoded only through
/// [`FilecoinRequest::decode`]).
pub(crate) struct PorepRequest<'a> {
    /// The envelope or the C1 JSON.
    pub vanilla_proof: &'a [u8],
    /// 0, or the seal proof type, which must then be C1's.
    pub registered_proof: u64,
    /// 0, or the sector size, which must then be C1's.
    pub sector_size: u64,
    pub sector_number: u64,
    pub miner_id: u64,
    pub checks: InputChecks,
}

#[derive(Deserialize)]
struct Envelope {
    #[serde(rename = "SectorNum")]
    sector_num: i64,
    #[serde(rename = "Phase1Out")]
    phase1_out: String,
    #[serde(rename = "SectorSize")]
    sector_size: u64,
}

#[derive(Deserialize)]
struct C1Head {
    registered_proof: String,
}

#[derive(Deserialize)]
#[serde(bound = "")]
struct C1<Tree: MerkleTreeTrait> {
    #[serde(bound(deserialize = "VanillaSealProof<Tree>: Deserialize<'de>"))]
    vanilla_proofs: BTreeMap<String, Vec<Vec<VanillaSealProof<Tree>>>>,
    comm_r: [u8; 32],
    comm_d: [u8; 32],
    replica_id: DomainOf<Tree>,
    seed: [u8; 32],
    ticket: [u8; 32],
}

/// PoRep C2 ([`Family`]): registered seal proofs 0–19; every seal proof type of a size
/// shares its circuit, parameters and cache id, so V1_1 stands for them where only the
/// size matters.
pub(crate) struct Porep;

impl Family for Porep {
    const NAMES: KindNames = KindNames { engine: "porep_seal_commit", cli: "porep", prefix: "porep" };

    /// rust-fil-proofs' figures count the input constraints.
    fn published_constraints(size: SectorSize) -> Option<PublishedCount> {
        let constraints = match size {
            SectorSize::S32GiB => 130_278_869,
            SectorSize::S64GiB => 131_186_177,
            _ => return None,
        };
        Some(PublishedCount { constraints, with_input_constraints: true })
    }

    fn circuit(registered_proof: u64) -> Result<Circuit, FilecoinError> {
        Ok(SealProof::from_registered(registered_proof)?.circuit())
    }

    fn decode(r: &FilecoinRequest, checks: InputChecks) -> Result<Box<dyn FilecoinJob>, FilecoinError> {
        decode(&PorepRequest {
            vanilla_proof: &r.vanilla_proof,
            registered_proof: r.registered_proof,
            sector_size: r.sector_size,
            sector_number: r.sector_number,
            miner_id: r.miner_id,
            checks,
        })
    }

    fn cache_id(size: SectorSize) -> anyhow::Result<String> {
        fn of<Tree: 'static + MerkleTreeTrait>(cfg: &PoRepConfig) -> anyhow::Result<String> {
            cfg.get_cache_identifier::<Tree>()
        }
        with_shape!(size, of, &porep_config(SealProof::v1_1(size))?)
    }

    fn with_blank<W: WithBlank>(size: SectorSize, w: W) -> Result<W::Out, FilecoinError> {
        fn blank<Tree: 'static + MerkleTreeTrait, W: WithBlank>(proof: SealProof, w: W) -> Result<W::Out, FilecoinError> {
            let params = filecoin_proofs::parameters::public_params::<Tree>(&porep_config(proof)?)
                .map_err(FilecoinError::rejected("PoRep public parameters"))?;
            w.run(<StackedCompound<Tree, Sha256Hasher> as CompoundProof<StackedDrg<'_, Tree, Sha256Hasher>, StackedCircuit<Tree, Sha256Hasher>>>::blank_circuit(&params))
        }
        with_shape!(size, blank::<W>, SealProof::v1_1(size), w)
    }

    fn shape_true(size: SectorSize, rng: &mut ChaCha20Rng) -> Result<RequestFiles, FilecoinError> {
        with_shape!(size, shape_true_porep, size, rng)
    }

    fn valid(size: SectorSize, rng: &mut ChaCha20Rng) -> Result<RequestFiles, FilecoinError> {
        with_shape!(size, valid_porep, size, rng)
    }
}

pub(crate) fn decode(req: &PorepRequest<'_>) -> Result<Box<dyn FilecoinJob>, FilecoinError> {
    let head: serde_json::Value = crate::strict_json::from_slice(req.vanilla_proof)
        .map_err(|e| FilecoinError::invalid(format!("vanilla_proof is not JSON (the C1 envelope or C1 output): {e}")))?;
    let (c1_bytes, sector_number) = if head.get("Phase1Out").is_some() {
        let env: Envelope = serde_json::from_value(head)
            .map_err(|e| FilecoinError::invalid(format!("vanilla_proof: the envelope needs SectorNum, Phase1Out and SectorSize: {e}")))?;
        let c1 = base64::engine::general_purpose::STANDARD
            .decode(env.phase1_out.as_bytes())
            .map_err(|e| FilecoinError::invalid(format!("vanilla_proof: Phase1Out is not base64: {e}")))?;
        let n =
            u64::try_from(env.sector_num).map_err(|_| FilecoinError::invalid(format!("vanilla_proof: SectorNum {} is negative", env.sector_num)))?;
        if req.sector_number != 0 && req.sector_number != n {
            return Err(FilecoinError::invalid(format!("sector_number is {} but the envelope's SectorNum is {n}", req.sector_number)));
        }
        if req.sector_size != 0 && env.sector_size != req.sector_size {
            return Err(FilecoinError::invalid(format!("sector_size is {} but the envelope's SectorSize is {}", req.sector_size, env.sector_size)));
        }
        (c1, n)
    } else {
        (req.vanilla_proof.to_vec(), req.sector_number)
    };
    // Keys checked unique over the whole C1 output once, here (its typed parse below
    // would take the last of a repeated map key).
    let head: C1Head = crate::strict_json::from_slice(&c1_bytes).map_err(|e| {
        use serde_json::error::Category;
        FilecoinError::invalid(match e.classify() {
            Category::Syntax | Category::Eof | Category::Io => format!("C1 output is not JSON: {e}"),
            Category::Data if e.to_string().contains("missing field `registered_proof`") => format!("C1 output: no registered_proof ({e})"),
            Category::Data => format!("C1 output: {e}"),
        })
    })?;
    let proof = SealProof::from_api_name(&head.registered_proof)
        .ok_or_else(|| FilecoinError::invalid(format!("C1 output: registered_proof {:?} is not a seal proof type", head.registered_proof)))?;
    // Every value is a seal proof type, 0 (StackedDrg2KiBV1) included: never "unset".
    if req.registered_proof != proof.id {
        return Err(FilecoinError::invalid(format!(
            "registered_proof is {} but the C1 output is for {} ({})",
            req.registered_proof,
            proof.api_name(),
            proof.id
        )));
    }
    check_sector_size(req.sector_size, proof.size)?;
    if proof.feature == Some(ApiFeature::NonInteractivePoRep) {
        return Err(FilecoinError::Unsupported(format!("{}: non-interactive PoRep (aggregated proofs) is not supported", proof.api_name())));
    }
    let cfg = porep_config(proof)?;
    guarded("decoding the C1 output", || with_shape!(proof.size, decode_shaped, proof, cfg, &c1_bytes, sector_number, req.miner_id, req.checks))
}

fn decode_shaped<Tree: 'static + MerkleTreeTrait>(
    proof: SealProof,
    cfg: PoRepConfig,
    c1_bytes: &[u8],
    sector_number: u64,
    miner_id: u64,
    checks: InputChecks,
) -> Result<Box<dyn FilecoinJob>, FilecoinError> {
    let c1: C1<Tree> = serde_json::from_slice(c1_bytes).map_err(|e| FilecoinError::invalid(format!("C1 output for {}: {e}", proof.api_name())))?;
    let tag = format!("StackedDrg{}V1", proof.size.api_name());
    let mut tags: Vec<String> = c1.vanilla_proofs.keys().cloned().collect();
    let mut c1_proofs = c1.vanilla_proofs;
    let vanilla = match (tags.len(), c1_proofs.remove(&tag)) {
        (1, Some(v)) => v,
        _ => {
            tags.sort();
            return Err(FilecoinError::invalid(format!("C1 output: vanilla_proofs must hold one entry {tag:?}, it has {tags:?}")));
        }
    };
    let partitions = usize::from(cfg.partitions);
    if vanilla.len() != partitions || vanilla.iter().any(|p| p.is_empty()) {
        return Err(FilecoinError::invalid(format!(
            "C1 output: {} partitions of vanilla proofs ({:?} challenges each); {} has {partitions}",
            vanilla.len(),
            vanilla.iter().map(|p| p.len()).collect::<Vec<_>>(),
            proof.api_name()
        )));
    }
    for (name, v) in [("comm_r", &c1.comm_r), ("comm_d", &c1.comm_d), ("seed", &c1.seed)] {
        if v.iter().all(|&b| b == 0) {
            return Err(FilecoinError::invalid(format!("C1 output: {name} is all zero")));
        }
    }
    for (name, v) in [("comm_r", &c1.comm_r), ("comm_d", &c1.comm_d)] {
        field_element(v, &format!("C1 output: {name}"))?;
    }
    // The replica id binds the proof to the miner, the sector, the ticket and the
    // data; if C1's differs, the proofs would verify against C1 but not on chain.
    let prover = prover_id(miner_id);
    let expected: DomainOf<Tree> = generate_replica_id::<Tree::Hasher, _>(&prover, sector_number, &c1.ticket, c1.comm_d, &cfg.porep_id);
    if expected != c1.replica_id {
        return Err(FilecoinError::invalid(format!(
            "C1 output's replica_id is not that of miner {miner_id}, sector {sector_number}, its ticket and comm_d (another miner or sector?)"
        )));
    }
    let comm_r: DomainOf<Tree> = as_safe_commitment(&c1.comm_r, "comm_r").map_err(|e| FilecoinError::invalid(format!("C1 output: {e}")))?;
    let comm_d =
        <Sha256Hasher as Hasher>::Domain::try_from_bytes(&c1.comm_d).map_err(|e| FilecoinError::invalid(format!("C1 output: comm_d: {e}")))?;
    let inputs: Inputs<Tree> =
        stacked::PublicInputs { replica_id: c1.replica_id, tau: Some(stacked::Tau { comm_d, comm_r }), k: None, seed: Some(c1.seed) };
    let params = filecoin_proofs::parameters::public_params::<Tree>(&cfg).map_err(FilecoinError::rejected("PoRep public parameters"))?;
    check::porep(&params, &inputs, &vanilla)?;
    // The vanilla proofs are checked before any proving time is spent on them.
    if checks == InputChecks::Full {
        let ok = StackedDrg::<Tree, Sha256Hasher>::verify_all_partitions(&params, &inputs, &vanilla)
            .map_err(FilecoinError::rejected("C1 output: the vanilla proofs"))?;
        if !ok {
            return Err(FilecoinError::invalid("C1 output: the vanilla proofs do not verify against its commitments, replica id and seed"));
        }
        check::porep_paths(&vanilla)?;
    }
    Ok(Box::new(PorepJob::<Tree> {
        proof,
        cfg,
        params,
        inputs,
        vanilla,
        prover,
        sector_number,
        comm_r: c1.comm_r,
        comm_d: c1.comm_d,
        seed: c1.seed,
        ticket: c1.ticket,
        checks,
    }))
}

struct PorepJob<Tree: 'static + MerkleTreeTrait> {
    proof: SealProof,
    cfg: PoRepConfig,
    params: stacked::PublicParams<Tree>,
    inputs: Inputs<Tree>,
    vanilla: Vec<Vec<VanillaSealProof<Tree>>>,
    prover: [u8; 32],
    sector_number: u64,
    comm_r: [u8; 32],
    comm_d: [u8; 32],
    seed: [u8; 32],
    ticket: [u8; 32],
    checks: InputChecks,
}

type Compound<Tree> = StackedCompound<Tree, Sha256Hasher>;

impl<Tree: 'static + MerkleTreeTrait> PorepJob<Tree> {
    /// filecoin-proofs' `verify_seal` with this job's inputs, for sector `sector_number`.
    fn verify_as(&self, proof: &[u8], sector_number: u64) -> Result<CheckedBy, FilecoinError> {
        if self.timing_only() {
            return Err(timing_only_refusal(self.describe()));
        }
        guarded("filecoin-proofs' verify_seal", || {
            let r = filecoin_proofs::verify_seal::<Tree>(
                &self.cfg,
                self.comm_r,
                self.comm_d,
                self.prover,
                SectorId::from(sector_number),
                self.ticket,
                self.seed,
                proof,
            );
            verdict(r, self.describe())
        })
    }

    fn circuit_of(&self, partition: usize) -> Result<StackedCircuit<Tree, Sha256Hasher>, FilecoinError> {
        check_partition(partition, self.vanilla.len())?;
        compound::partition_circuit::<StackedDrg<'_, Tree, Sha256Hasher>, StackedCircuit<Tree, Sha256Hasher>, Compound<Tree>>(
            "PoRep",
            &self.inputs,
            &self.vanilla[partition],
            &self.params,
            partition,
        )
    }
}

impl<Tree: 'static + MerkleTreeTrait> FilecoinJob for PorepJob<Tree> {
    fn circuit(&self) -> Circuit {
        self.proof.circuit()
    }

    fn describe(&self) -> String {
        format!("PoRep C2 {}, sector {}, {} partitions", self.proof.api_name(), self.sector_number, self.vanilla.len())
    }

    fn partitions(&self) -> usize {
        self.vanilla.len()
    }

    fn synthesize(&self, partition: usize, buffers: EvalBuffers) -> Result<SynthesizedCircuit, FilecoinError> {
        compound::synthesize("PoRep", partition, self.circuit_of(partition)?, buffers)
    }

    /// The challenges' sub-circuits are independent once the commitments are
    /// allocated: each thread synthesizes the commitments and its share of the
    /// challenges (top-level namespaces `challenge_0`, …) into its range of the witness
    /// (laid out from `aux_len`; joined afterwards where that is unknown).
    /// The labels' SHA-256 is computed natively ([`crate::kinds::porep::witness`]).
    fn witness(&self, partition: usize, aux: AuxBuffer) -> Result<Witness, FilecoinError> {
        check_partition(partition, self.vanilla.len())?;
        let vanilla = &self.vanilla[partition];
        let challenges = guarded("reading the PoRep vanilla proofs", || {
            challenge_proofs::<Tree, _>(vanilla)
                .map_err(|e| FilecoinError::Synthesis { partition, message: format!("reading the vanilla proofs: {e}") })
        })?;
        let tau = self.inputs.tau.as_ref().ok_or_else(|| FilecoinError::invalid("PoRep public inputs without comm_d and comm_r"))?;
        let (first, threads) = (&vanilla[0], rayon::current_num_threads());
        guarded("synthesizing the PoRep witness", || {
            synthesize_witness_split(&challenges, threads, "challenge_0", aux, |share| {
                Ok::<_, compound::WitnessError>(PorepWitnessCircuit::<Tree> {
                    replica_id: self.inputs.replica_id.into(),
                    comm_d: tau.comm_d.into(),
                    comm_r: tau.comm_r.into(),
                    comm_r_last: first.comm_r_last().into(),
                    comm_c: first.comm_c().into(),
                    challenges: share.to_vec(),
                })
            })
            .map_err(|e| e.into_filecoin(partition))
        })
    }

    /// storage-proofs' `StackedCircuit` through witness-only synthesis, split the same way.
    fn gadget_witness(&self, partition: usize) -> Option<Result<Witness, FilecoinError>> {
        if let Err(e) = check_partition(partition, self.vanilla.len()) {
            return Some(Err(e));
        }
        let threads = rayon::current_num_threads();
        Some(guarded("synthesizing the PoRep witness with the circuit's gadgets", || {
            synthesize_witness_split(&self.vanilla[partition], threads, "challenge_0", AuxBuffer::new(None), |share| {
                compound::partition_circuit::<StackedDrg<'_, Tree, Sha256Hasher>, StackedCircuit<Tree, Sha256Hasher>, Compound<Tree>>(
                    "PoRep",
                    &self.inputs,
                    &share.to_vec(),
                    &self.params,
                    partition,
                )
                .map_err(compound::WitnessError::Circuit)
            })
            .map_err(|e| e.into_filecoin(partition))
        }))
    }

    fn compile(&self, partition: usize) -> Result<ConstraintMatrices, FilecoinError> {
        compound::compile("PoRep", partition, self.circuit_of(partition)?)
    }

    fn shape(&self, partition: usize) -> Result<CircuitShape, FilecoinError> {
        compound::count("PoRep", partition, self.circuit_of(partition)?)
    }

    fn reference_synthesis(&self, partition: usize, how: ReferenceSynthesis) -> Result<ReferenceWitness, FilecoinError> {
        compound::reference("PoRep", partition, self.circuit_of(partition)?, how)
    }

    fn public_inputs(&self, partition: usize) -> Result<Vec<Scalar>, FilecoinError> {
        check_partition(partition, self.vanilla.len())?;
        partition_public_inputs::<StackedDrg<'_, Tree, Sha256Hasher>, StackedCircuit<Tree, Sha256Hasher>, Compound<Tree>>(
            "PoRep",
            &self.inputs,
            &self.params,
            partition,
        )
    }

    fn timing_only(&self) -> bool {
        self.checks == InputChecks::TimingOnly
    }

    fn verify(&self, proof: &[u8]) -> Result<CheckedBy, FilecoinError> {
        self.verify_as(proof, self.sector_number)
    }

    fn verify_one_input_changed(&self, proof: &[u8]) -> (&'static str, Result<CheckedBy, FilecoinError>) {
        ("the sector number", self.verify_as(proof, self.sector_number ^ 1))
    }
}
