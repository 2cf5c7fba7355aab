//! WindowPoSt (one partition per request) and WinningPoSt.
//!
//! The payload is one bincode `FallbackPoStSectorProof` per sector, the randomness and
//! the miner id. The circuit is storage-proofs' `FallbackPoStCircuit` built from the
//! partition proof that filecoin-proofs' `single_partition_vanilla_proofs` would build
//! ([`partition_proof`]: it looks each public sector's proof up by sector id, and the
//! public sectors here are listed in payload order, so payload order is its order),
//! checked as it checks it (`FallbackPoSt::verify`) unless checks are off for timing.

mod check;
pub(crate) mod inputs;
pub(crate) mod witness;

use std::collections::BTreeMap;

use blstrs::Scalar;
use cuzk_groth16::matrices::ConstraintMatrices;
use cuzk_groth16::synthesis::EvalBuffers;
use cuzk_groth16::witness::{synthesize_witness_split, AuxBuffer, Witness};
use cuzk_groth16::SynthesizedCircuit;
use filecoin_hashers::Hasher;
use filecoin_proofs::{as_safe_commitment, FallbackPoStSectorProof, PoStConfig, PublicReplicaInfo};
use rand_chacha::ChaCha20Rng;
use storage_proofs_core::api_version::ApiVersion;
use storage_proofs_core::compound_proof::CompoundProof;
use storage_proofs_core::merkle::{MerkleProofTrait, MerkleTreeTrait};
use storage_proofs_core::proof::ProofScheme;
use storage_proofs_core::sector::SectorId;
use storage_proofs_post::fallback::{self, FallbackPoSt, FallbackPoStCircuit, FallbackPoStCompound, PublicSector};

use crate::compound::{self, partition_public_inputs};
use crate::error::{guarded, FilecoinError};
use crate::family::{Family, KindNames, PublishedCount, WithBlank};
use crate::ids::{post_config, post_public_params, prover_id};
use crate::job::{check_partition, timing_only_refusal, verdict, CheckedBy, FilecoinJob, InputChecks};
use crate::kinds::post::witness::PostWitnessCircuit;
use crate::payload::{bincode_decode, domain_bytes, field_bytes};
use crate::reference::{ReferenceSynthesis, ReferenceWitness};
use crate::registered::{check_sector_size, with_shape, Circuit, PostProof, SectorSize};
use crate::request::FilecoinRequest;
use crate::request_files::RequestFiles;
use cuzk_groth16::shape::CircuitShape;
use inputs::shape_true as shape_true_post;
use inputs::valid as valid_post;

type DomainOf<Tree> = <<Tree as MerkleTreeTrait>::Hasher as Hasher>::Domain;

/// The largest WindowPoSt partition index accepted. A deadline of the largest miners
/// holds a few hundred 32 GiB partitions (each 2,349 sectors, ~73 TiB); 1,024 leaves
/// room and bounds the V1_0 verifier's list at 1,024 × 2,349 sectors (~150 MB).
const MAX_PARTITION_INDEX: usize = 1024;

/// The fields of a [`FilecoinRequest`] a PoSt decode reads (decoded only through
/// [`FilecoinRequest::decode`]).
pub(crate) struct PostRequest<'a> {
    pub registered_proof: u64,
    pub sector_size: u64,
    pub vanilla_proofs: &'a [Vec<u8>],
    pub randomness: &'a [u8],
    pub miner_id: u64,
    /// WindowPoSt only: which partition of the deadline these sectors are.
    pub partition_index: u32,
    pub checks: InputChecks,
}

/// Window and Winning PoSt ([`Family`]), one circuit family told apart by `WINDOW`:
/// registered PoSt proofs 0–4 Winning, 5–14 Window. The cache id and blank circuit do
/// not depend on the API version (V1_2 stands for both); WinningPoSt has registered
/// numbers of API V1_0 only.
pub(crate) struct Post<const WINDOW: bool>;
pub(crate) type WindowPost = Post<true>;
pub(crate) type WinningPost = Post<false>;

impl<const WINDOW: bool> Post<WINDOW> {
    fn proof(size: SectorSize, api_version: ApiVersion) -> PostProof {
        PostProof { window: WINDOW, size, api_version }
    }

    /// The API version of the fixtures' requests.
    fn fixture_proof(size: SectorSize) -> PostProof {
        Self::proof(size, if WINDOW { ApiVersion::V1_2_0 } else { ApiVersion::V1_0_0 })
    }
}

impl<const WINDOW: bool> Family for Post<WINDOW> {
    const NAMES: KindNames = if WINDOW {
        KindNames { engine: "window_post_partition", cli: "window-post", prefix: "wpost" }
    } else {
        KindNames { engine: "winning_post", cli: "winning-post", prefix: "winning" }
    };

    /// rust-fil-proofs' WindowPoSt figures are the circuit's own constraints; none is
    /// published for WinningPoSt.
    fn published_constraints(size: SectorSize) -> Option<PublishedCount> {
        let constraints = match (WINDOW, size) {
            (true, SectorSize::S32GiB) => 125_279_217,
            (true, SectorSize::S64GiB) => 129_887_900,
            _ => return None,
        };
        Some(PublishedCount { constraints, with_input_constraints: false })
    }

    /// Any PoSt number's circuit: a number of the other PoSt kind is refused by the
    /// decoder, which names both.
    fn circuit(registered_proof: u64) -> Result<Circuit, FilecoinError> {
        Ok(PostProof::from_registered(registered_proof)?.circuit())
    }

    fn decode(r: &FilecoinRequest, checks: InputChecks) -> Result<Box<dyn FilecoinJob>, FilecoinError> {
        decode(
            WINDOW,
            &PostRequest {
                registered_proof: r.registered_proof,
                sector_size: r.sector_size,
                vanilla_proofs: &r.vanilla_proofs,
                randomness: &r.randomness,
                miner_id: r.miner_id,
                partition_index: r.partition_index,
                checks,
            },
        )
    }

    fn cache_id(size: SectorSize) -> anyhow::Result<String> {
        fn of<Tree: 'static + MerkleTreeTrait>(cfg: &PoStConfig) -> anyhow::Result<String> {
            cfg.get_cache_identifier::<Tree>()
        }
        with_shape!(size, of, &post_config(Self::proof(size, ApiVersion::V1_2_0)))
    }

    fn with_blank<W: WithBlank>(size: SectorSize, w: W) -> Result<W::Out, FilecoinError> {
        fn blank<Tree: 'static + MerkleTreeTrait, W: WithBlank>(proof: PostProof, w: W) -> Result<W::Out, FilecoinError> {
            let params = post_public_params::<Tree>(&post_config(proof))?;
            w.run(<FallbackPoStCompound<Tree> as CompoundProof<FallbackPoSt<'_, Tree>, FallbackPoStCircuit<Tree>>>::blank_circuit(&params))
        }
        with_shape!(size, blank::<W>, Self::proof(size, ApiVersion::V1_2_0), w)
    }

    fn shape_true(size: SectorSize, rng: &mut ChaCha20Rng) -> Result<RequestFiles, FilecoinError> {
        with_shape!(size, shape_true_post, Self::fixture_proof(size), rng)
    }

    fn valid(size: SectorSize, rng: &mut ChaCha20Rng) -> Result<RequestFiles, FilecoinError> {
        with_shape!(size, valid_post, Self::fixture_proof(size), rng)
    }

    /// Poseidon's states are field elements: nearly every aux value is significant
    /// (125.7 M of a 32 GiB WindowPoSt partition's 126.9 M; 99.1 % and 99.3 % at 2 KiB),
    /// and the booleanity constraints bound them closely (99.5 % and 99.6 % at 2 KiB).
    fn significant_aux(matrices: &ConstraintMatrices) -> Option<usize> {
        Some(matrices.significant_aux_bound())
    }
}

pub(crate) fn decode(window: bool, req: &PostRequest<'_>) -> Result<Box<dyn FilecoinJob>, FilecoinError> {
    let proof = PostProof::from_registered(req.registered_proof)?;
    if proof.window != window {
        let (asked, got) = if window { ("WindowPoSt", "WinningPoSt") } else { ("WinningPoSt", "WindowPoSt") };
        return Err(FilecoinError::invalid(format!("registered_proof {} is a {got} type, but the request is for {asked}", req.registered_proof)));
    }
    check_sector_size(req.sector_size, proof.size)?;
    guarded("decoding the PoSt request", || with_shape!(proof.size, decode_shaped, proof, req))
}

fn decode_shaped<Tree: 'static + MerkleTreeTrait>(proof: PostProof, req: &PostRequest<'_>) -> Result<Box<dyn FilecoinJob>, FilecoinError> {
    PostJob::<Tree>::decode(proof, req)
}

struct PostJob<Tree: 'static + MerkleTreeTrait> {
    proof: PostProof,
    config: PoStConfig,
    params: fallback::PublicParams,
    randomness: [u8; 32],
    prover_id: [u8; 32],
    /// The sectors in payload order, as the circuit is built from them.
    circuit_inputs: fallback::PublicInputs<DomainOf<Tree>>,
    /// The sectors as the verifier lists them for the public-input vector, and the
    /// partition index to read them at (see `decode`).
    verify_inputs: fallback::PublicInputs<DomainOf<Tree>>,
    verify_partition: usize,
    vanilla: fallback::Proof<Tree::Proof>,
    replicas: Vec<(SectorId, [u8; 32])>,
    partition_index: usize,
    checks: InputChecks,
}

impl<Tree: 'static + MerkleTreeTrait> PostJob<Tree> {
    /// filecoin-proofs' PoSt verifier with this job's inputs and `randomness`.
    fn verify_as(&self, proof: &[u8], randomness: &[u8; 32]) -> Result<CheckedBy, FilecoinError> {
        if self.timing_only() {
            return Err(timing_only_refusal(self.describe()));
        }
        guarded("filecoin-proofs' PoSt verifier", || {
            let ok = if self.proof.window {
                if self.verify_partition > 0 {
                    // filecoin-proofs verifies a deadline's partitions together; a lone
                    // V1 partition past the first has no entry point there. Its
                    // public inputs above are storage-proofs' own, and the engine
                    // checks the proof against them.
                    return Ok(CheckedBy::PartitionsOnly("filecoin-proofs cannot verify a lone API V1 WindowPoSt partition past the first"));
                }
                let mut replicas = BTreeMap::new();
                for (id, comm_r) in &self.replicas {
                    replicas.insert(*id, PublicReplicaInfo::new(*comm_r).map_err(FilecoinError::rejected("comm_r"))?);
                }
                filecoin_proofs::verify_window_post::<Tree>(&self.config, randomness, &replicas, self.prover_id, proof)
            } else {
                let (id, comm_r) = self.replicas[0];
                let replica = PublicReplicaInfo::new(comm_r).map_err(FilecoinError::rejected("comm_r"))?;
                filecoin_proofs::verify_winning_post::<Tree>(&self.config, randomness, &[(id, replica)], self.prover_id, proof)
            };
            verdict(ok, self.describe())
        })
    }

    fn decode(proof: PostProof, req: &PostRequest<'_>) -> Result<Box<dyn FilecoinJob>, FilecoinError> {
        let config = post_config(proof);
        let randomness = field_bytes(req.randomness, "randomness")?;
        let randomness_fr: DomainOf<Tree> = as_safe_commitment(&randomness, "randomness").map_err(|e| {
            FilecoinError::invalid(format!("randomness is not a canonical field element ({e}); clear the top two bits of its last byte"))
        })?;
        let prover_id = prover_id(req.miner_id);
        let prover_id_fr: DomainOf<Tree> = as_safe_commitment(&prover_id, "prover_id").map_err(FilecoinError::rejected("prover id"))?;

        let name = if proof.window { "WindowPoSt" } else { "WinningPoSt" };
        let expected_sectors = if proof.window { config.sector_count } else { 1 };
        let n = req.vanilla_proofs.len();
        if n == 0 || n > expected_sectors {
            return Err(FilecoinError::invalid(format!(
                "vanilla_proofs has {n} entries; {name} at {} takes {} (one per sector)",
                proof.size,
                if proof.window { format!("1 to {expected_sectors}") } else { "exactly 1".to_string() }
            )));
        }
        // Each sector's vanilla proof: one sector proof with one inclusion proof per
        // challenge (WindowPoSt: 10; WinningPoSt: 66).
        let per_sector = if proof.window { config.challenge_count } else { config.challenge_count * config.sector_count };
        let mut sector_proofs = Vec::with_capacity(n);
        for (i, bytes) in req.vanilla_proofs.iter().enumerate() {
            let p: FallbackPoStSectorProof<Tree> = bincode_decode(bytes, &format!("vanilla_proofs[{i}]"))?;
            check::post_sector(&p, (proof.size.bytes() / 32) as usize, i)?;
            let shape_ok = p.vanilla_proof.sectors.len() == 1 && p.vanilla_proof.sectors[0].inclusion_proofs().len() == per_sector;
            if !shape_ok {
                return Err(FilecoinError::invalid(format!(
                    "vanilla_proofs[{i}] (sector {}) has {} sector proofs with {:?} inclusion proofs; {name} needs one with {per_sector}",
                    u64::from(p.sector_id),
                    p.vanilla_proof.sectors.len(),
                    p.vanilla_proof.sectors.iter().map(|s| s.inclusion_proofs().len()).collect::<Vec<_>>()
                )));
            }
            // storage-proofs' vanilla check reads comm_r_last from the inclusion
            // proofs, the circuit from this field: they must agree, or the proof made
            // from them would fail only after proving.
            let sp = &p.vanilla_proof.sectors[0];
            if sp.inclusion_proofs().iter().any(|ip| ip.root() != sp.comm_r_last) {
                return Err(FilecoinError::invalid(format!(
                    "vanilla_proofs[{i}] (sector {}): comm_r_last differs from the root of its inclusion proofs",
                    u64::from(p.sector_id)
                )));
            }
            sector_proofs.push(p);
        }
        // The chain verifies a partition's sectors in ascending sector-number order, and
        // so does filecoin-proofs; a proof over another order would not verify there.
        for w in sector_proofs.windows(2) {
            if u64::from(w[0].sector_id) >= u64::from(w[1].sector_id) {
                return Err(FilecoinError::invalid(format!(
                    "vanilla_proofs must be in ascending sector-number order without repeats (sector {} comes before {})",
                    u64::from(w[0].sector_id),
                    u64::from(w[1].sector_id)
                )));
            }
        }
        let sectors: Vec<PublicSector<DomainOf<Tree>>> = sector_proofs.iter().map(|p| PublicSector { id: p.sector_id, comm_r: p.comm_r }).collect();
        let replicas = sector_proofs.iter().map(|p| (p.sector_id, domain_bytes(&p.comm_r))).collect();

        let partition_index = if proof.window { req.partition_index as usize } else { 0 };
        if !proof.window && req.partition_index != 0 {
            return Err(FilecoinError::invalid(format!("partition_index is {}; WinningPoSt has one partition", req.partition_index)));
        }
        // Under API V1_0 the verifier's list below holds every sector of the deadline
        // before this partition's: a bound keeps a request from asking for terabytes.
        if partition_index > MAX_PARTITION_INDEX {
            return Err(FilecoinError::invalid(format!(
                "partition_index is {partition_index}; a deadline has far fewer partitions (at most {MAX_PARTITION_INDEX} are accepted)"
            )));
        }
        let params = post_public_params::<Tree>(&config)?;
        let vanilla = partition_proof::<Tree>(proof.window, params.sector_count, &sector_proofs);
        // The vanilla proofs are checked before any proving time is spent on them, as
        // filecoin-proofs checks the partition proof it builds from them.
        if req.checks == InputChecks::Full {
            let k = if proof.window { partition_index } else { 0 };
            // WinningPoSt's partition proof holds its one sector once per challenge:
            // the sector is listed as often, or only the first challenge would be read.
            let checked = if proof.window { sectors.clone() } else { vec![sectors[0].clone(); params.sector_count] };
            let inputs = fallback::PublicInputs { randomness: randomness_fr, prover_id: prover_id_fr, sectors: checked, k: Some(k) };
            let ok =
                FallbackPoSt::<Tree>::verify(&params, &inputs, &vanilla).map_err(FilecoinError::rejected(format!("the {name} vanilla proofs")))?;
            if !ok {
                return Err(FilecoinError::invalid(format!(
                    "the {name} vanilla proofs do not verify against the randomness, the miner and the sectors' comm_r"
                )));
            }
        }
        let (verify_inputs, verify_partition);
        if proof.window {
            // Under API V1_0 a challenge depends on the sector's index in the whole
            // deadline (partition_index · sector_count + i): the verifier's list puts
            // this partition's sectors at that offset.
            if proof.api_version == ApiVersion::V1_0_0 && partition_index > 0 {
                let filler = PublicSector { id: SectorId::from(0), comm_r: sectors[0].comm_r };
                let mut listed = vec![filler; partition_index * config.sector_count];
                listed.extend(sectors.iter().cloned());
                verify_inputs = fallback::PublicInputs { randomness: randomness_fr, prover_id: prover_id_fr, sectors: listed, k: None };
                verify_partition = partition_index;
            } else {
                verify_inputs = fallback::PublicInputs { randomness: randomness_fr, prover_id: prover_id_fr, sectors: sectors.clone(), k: None };
                verify_partition = 0;
            }
        } else {
            // The circuit proves the one sector once per challenge, and the verifier
            // lists it that many times, so challenge i is read at sector index i.
            let listed = vec![sectors[0].clone(); params.sector_count];
            verify_inputs = fallback::PublicInputs { randomness: randomness_fr, prover_id: prover_id_fr, sectors: listed, k: None };
            verify_partition = 0;
        }
        let circuit_inputs = fallback::PublicInputs { randomness: randomness_fr, prover_id: prover_id_fr, sectors, k: None };
        Ok(Box::new(PostJob::<Tree> {
            proof,
            config,
            params,
            randomness,
            prover_id,
            circuit_inputs,
            verify_inputs,
            verify_partition,
            vanilla,
            replicas,
            partition_index,
            checks: req.checks,
        }))
    }
}

/// The partition proof filecoin-proofs builds from the sectors' vanilla proofs (its
/// `single_partition_vanilla_proofs`, without the check): WindowPoSt lists each
/// sector's proof in payload order and repeats the last up to the partition's sector
/// count; WinningPoSt makes one entry per challenge of its one sector.
fn partition_proof<Tree: 'static + MerkleTreeTrait>(
    window: bool,
    sector_count: usize,
    proofs: &[FallbackPoStSectorProof<Tree>],
) -> fallback::Proof<Tree::Proof> {
    let mut sectors: Vec<fallback::SectorProof<Tree::Proof>> = if window {
        proofs.iter().flat_map(|p| p.vanilla_proof.sectors.iter().cloned()).collect()
    } else {
        let s = &proofs[0].vanilla_proof.sectors[0];
        s.inclusion_proofs()
            .iter()
            .map(|ip| fallback::SectorProof { inclusion_proofs: vec![ip.clone()], comm_c: s.comm_c, comm_r_last: s.comm_r_last })
            .collect()
    };
    while let Some(last) = sectors.last().filter(|_| sectors.len() < sector_count) {
        sectors.push(last.clone());
    }
    fallback::Proof { sectors }
}

impl<Tree: 'static + MerkleTreeTrait> PostJob<Tree> {
    fn circuit_of(&self, partition: usize) -> Result<FallbackPoStCircuit<Tree>, FilecoinError> {
        check_partition(partition, 1)?;
        compound::partition_circuit::<FallbackPoSt<'_, Tree>, FallbackPoStCircuit<Tree>, FallbackPoStCompound<Tree>>(
            "PoSt",
            &self.circuit_inputs,
            &self.vanilla,
            &self.params,
            0,
        )
    }
}

impl<Tree: 'static + MerkleTreeTrait> FilecoinJob for PostJob<Tree> {
    fn circuit(&self) -> Circuit {
        self.proof.circuit()
    }

    fn describe(&self) -> String {
        if self.proof.window {
            format!(
                "WindowPoSt {} (API {}), partition {}, {} sectors",
                self.proof.size,
                self.proof.api_version,
                self.partition_index,
                self.replicas.len()
            )
        } else {
            format!("WinningPoSt {}, sector {}", self.proof.size, u64::from(self.replicas[0].0))
        }
    }

    fn partitions(&self) -> usize {
        1
    }

    fn synthesize(&self, partition: usize, buffers: EvalBuffers) -> Result<SynthesizedCircuit, FilecoinError> {
        compound::synthesize("PoSt", partition, self.circuit_of(partition)?, buffers)
    }

    /// The sectors' values with Poseidon hashed natively, shares of the sectors on
    /// every core.
    fn witness(&self, partition: usize, aux: AuxBuffer) -> Result<Witness, FilecoinError> {
        let circuit = self.circuit_of(partition)?;
        if circuit.sectors.len() != self.vanilla.sectors.len() {
            return Err(FilecoinError::invalid(format!("{}: the circuit's sectors and the vanilla proofs differ in number", self.describe())));
        }
        let sectors: Vec<_> = circuit.sectors.iter().zip(&self.vanilla.sectors).collect();
        guarded("synthesizing the PoSt witness", || {
            synthesize_witness_split(&sectors, rayon::current_num_threads(), "sector_0", aux, |share| {
                Ok::<_, compound::WitnessError>(PostWitnessCircuit::<Tree> { sectors: share.to_vec() })
            })
            .map_err(|e| e.into_filecoin(partition))
        })
    }

    /// storage-proofs' `FallbackPoStCircuit` through witness-only synthesis (its sectors
    /// on every core, Poseidon through neptune's gadget).
    fn gadget_witness(&self, partition: usize) -> Option<Result<Witness, FilecoinError>> {
        Some(self.circuit_of(partition).and_then(|c| compound::witness("PoSt", partition, c, None)))
    }

    fn compile(&self, partition: usize) -> Result<ConstraintMatrices, FilecoinError> {
        compound::compile("PoSt", partition, self.circuit_of(partition)?)
    }

    fn shape(&self, partition: usize) -> Result<CircuitShape, FilecoinError> {
        compound::count("PoSt", partition, self.circuit_of(partition)?)
    }

    fn reference_synthesis(&self, partition: usize, how: ReferenceSynthesis) -> Result<ReferenceWitness, FilecoinError> {
        compound::reference("PoSt", partition, self.circuit_of(partition)?, how)
    }

    fn public_inputs(&self, partition: usize) -> Result<Vec<Scalar>, FilecoinError> {
        check_partition(partition, 1)?;
        partition_public_inputs::<FallbackPoSt<'_, Tree>, FallbackPoStCircuit<Tree>, FallbackPoStCompound<Tree>>(
            "PoSt",
            &self.verify_inputs,
            &self.params,
            self.verify_partition,
        )
    }

    fn timing_only(&self) -> bool {
        self.checks == InputChecks::TimingOnly
    }

    fn verify(&self, proof: &[u8]) -> Result<CheckedBy, FilecoinError> {
        self.verify_as(proof, &self.randomness)
    }

    fn verify_one_input_changed(&self, proof: &[u8]) -> (&'static str, Result<CheckedBy, FilecoinError>) {
        let mut randomness = self.randomness;
        // The lowest bit of the least significant byte: still a field element.
        randomness[0] ^= 1;
        ("the randomness", self.verify_as(proof, &randomness))
    }
}
