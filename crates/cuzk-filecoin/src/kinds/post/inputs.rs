//! WindowPoSt's and WinningPoSt's shape-true and valid inputs (`cuzk fixture`; see
//! `crate::shape_true` and `crate::valid` for what each is).

use filecoin_hashers::{Domain, HashFunction, Hasher};
use filecoin_proofs::FallbackPoStSectorProof;
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use storage_proofs_core::merkle::{MerkleProof, MerkleTreeTrait};
use storage_proofs_core::sector::SectorId;
use storage_proofs_post::fallback::{self, SectorProof};

use crate::error::FilecoinError;
use crate::ids::{post_config, prover_id};
use crate::registered::PostProof;
use crate::request_files::RequestFiles;
use crate::shape_true::{fr32_bytes, tree_proof, DomainOf, TreeProof, MINER_ID};
use crate::sparse_tree::{arities_of, SparseTree};

/// WindowPoSt (one full partition: every sector the size's partition holds) or
/// WinningPoSt (one sector), sectors numbered from 1.
pub(crate) fn shape_true<Tree: 'static + MerkleTreeTrait>(proof: PostProof, rng: &mut ChaCha20Rng) -> Result<RequestFiles, FilecoinError> {
    let cfg = post_config(proof);
    let sectors = if proof.window { cfg.sector_count } else { 1 };
    let per_sector = if proof.window { cfg.challenge_count } else { cfg.challenge_count * cfg.sector_count };
    let randomness = fr32_bytes(rng);
    let ids: Vec<SectorId> = (1..=sectors as u64).map(SectorId::from).collect();
    let challenges = filecoin_proofs::generate_fallback_sector_challenges::<Tree>(&cfg, &randomness, &ids, prover_id(MINER_ID))
        .map_err(FilecoinError::rejected("the PoSt challenges"))?;
    let leaves = (proof.size.bytes() / 32) as usize;
    let hash2 = <<Tree::Hasher as Hasher>::Function as HashFunction<_>>::hash2;
    let mut vanilla = Vec::with_capacity(sectors);
    for id in ids {
        let leaf_challenges = challenges.get(&id).ok_or_else(|| FilecoinError::invalid(format!("no challenges for sector {}", u64::from(id))))?;
        if leaf_challenges.len() != per_sector {
            return Err(FilecoinError::invalid(format!("{} challenges for sector {}, expected {per_sector}", leaf_challenges.len(), u64::from(id))));
        }
        let (comm_c, comm_r_last) = (DomainOf::<Tree>::random(rng), DomainOf::<Tree>::random(rng));
        let inclusion_proofs =
            leaf_challenges.iter().map(|&c| tree_proof::<Tree>(leaves, c as usize, comm_r_last, None, rng)).collect::<Result<Vec<_>, _>>()?;
        let sector = FallbackPoStSectorProof::<Tree> {
            sector_id: id,
            comm_r: hash2(&comm_c, &comm_r_last),
            vanilla_proof: fallback::Proof { sectors: vec![SectorProof { inclusion_proofs, comm_c, comm_r_last }] },
        };
        vanilla.push(bincode::serialize(&sector).map_err(|e| FilecoinError::invalid(format!("encoding sector {}: {e}", u64::from(id))))?);
    }
    RequestFiles::post(proof, vanilla, randomness, MINER_ID)
}

/// WindowPoSt (one full partition: every sector the size's partition holds, numbered
/// from 1) or WinningPoSt (sector 1).
pub(crate) fn valid<Tree: 'static + MerkleTreeTrait>(proof: PostProof, rng: &mut ChaCha20Rng) -> Result<RequestFiles, FilecoinError> {
    post_partition::<Tree>(proof, 0, rng)
}

/// A valid WindowPoSt request for partition `partition` of a deadline whose partitions
/// are full (sectors numbered from 1 across them; this one's are the last): under API
/// V1_0 a challenge depends on the sector's index in the whole deadline, so the
/// challenges are drawn for all of them. Partition 0: [`post`].
pub fn window_post_partition(proof: PostProof, partition: usize, seed: u64) -> Result<RequestFiles, FilecoinError> {
    if !proof.window {
        return Err(FilecoinError::invalid("a WinningPoSt has one partition"));
    }
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    crate::registered::with_shape!(proof.size, post_partition, proof, partition, &mut rng)
}

fn post_partition<Tree: 'static + MerkleTreeTrait>(proof: PostProof, partition: usize, rng: &mut ChaCha20Rng) -> Result<RequestFiles, FilecoinError> {
    let cfg = post_config(proof);
    let sectors = if proof.window { cfg.sector_count } else { 1 };
    let randomness = fr32_bytes(rng);
    let all: Vec<SectorId> = (1..=((partition + 1) * sectors) as u64).map(SectorId::from).collect();
    let challenges = filecoin_proofs::generate_fallback_sector_challenges::<Tree>(&cfg, &randomness, &all, prover_id(MINER_ID))
        .map_err(FilecoinError::rejected("the PoSt challenges"))?;
    let ids = all[partition * sectors..].to_vec();
    let leaves = (proof.size.bytes() / 32) as usize;
    let arities = arities_of::<Tree>(leaves)?;
    let mut vanilla = Vec::with_capacity(sectors);
    for id in ids {
        let opened = challenges.get(&id).ok_or_else(|| FilecoinError::invalid(format!("no challenges for sector {}", u64::from(id))))?;
        let tree_leaves = opened.iter().map(|&c| (c as usize, DomainOf::<Tree>::random(rng))).collect();
        let tree_r = SparseTree::<Tree::Hasher>::new(arities.clone(), tree_leaves, |_| DomainOf::<Tree>::random(rng))?;
        let inclusion_proofs = opened
            .iter()
            .map(|&c| Ok(MerkleProof::from_parts(tree_r.leaf(c as usize)?, tree_r.root(), tree_r.path(c as usize)?)))
            .collect::<Result<Vec<TreeProof<Tree>>, FilecoinError>>()?;
        let (comm_c, comm_r_last) = (DomainOf::<Tree>::random(rng), tree_r.root());
        let sector = FallbackPoStSectorProof::<Tree> {
            sector_id: id,
            comm_r: <<Tree::Hasher as Hasher>::Function as HashFunction<_>>::hash2(&comm_c, &comm_r_last),
            vanilla_proof: fallback::Proof { sectors: vec![SectorProof { inclusion_proofs, comm_c, comm_r_last }] },
        };
        vanilla.push(bincode::serialize(&sector).map_err(|e| FilecoinError::invalid(format!("encoding sector {}: {e}", u64::from(id))))?);
    }
    let mut files = RequestFiles::post(proof, vanilla, randomness, MINER_ID)?;
    files.request.partition_index = partition as u32;
    Ok(files)
}
