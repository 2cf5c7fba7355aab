//! SnapDeals' shape-true and valid inputs (`cuzk fixture`; see `crate::shape_true` and
//! `crate::valid` for what each is).

use blstrs::Scalar as Fr;
use filecoin_hashers::{Domain, HashFunction, Hasher};
use filecoin_proofs::{PartitionProof, SectorUpdateConfig};
use rand_chacha::ChaCha20Rng;
use storage_proofs_core::merkle::{MerkleProof, MerkleTreeTrait};
use storage_proofs_update::constants::{TreeDArity, TreeDDomain, TreeDHasher, TreeRHasher};
use storage_proofs_update::{phi, rho, ChallengeProof, Challenges, PublicParams as UpdatePublicParams};

use crate::error::FilecoinError;
use crate::ids::porep_config;
use crate::payload::domain_bytes;
use crate::registered::{SealProof, SectorSize, UpdateProof};
use crate::request_files::RequestFiles;
use crate::shape_true::{fr32_bytes, random_domains, random_inclusion_proof, tree_proof, DomainOf};
use crate::sparse_tree::{arities, arities_of, BlockTree};

/// SnapDeals: one partition proof per partition of the size's update, with comm_r_old
/// and comm_r_new made from the same comm_c as a real update's are, and each new
/// replica leaf the encoding of its old leaf and data leaf, and the tree D paths of a
/// partition's challenges sharing the levels above the partition's subtree (the
/// circuit asserts both while it synthesizes).
pub(crate) fn shape_true<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
    size: SectorSize,
    rng: &mut ChaCha20Rng,
) -> Result<RequestFiles, FilecoinError> {
    let proof = UpdateProof::from_registered(size as u64)?;
    let cfg = porep_config(SealProof::v1_1(size))?;
    let update = SectorUpdateConfig::from_porep_config(&cfg);
    let pp = UpdatePublicParams::from_sector_size(size.bytes());
    let hash2 = <<TreeRHasher as Hasher>::Function as HashFunction<_>>::hash2;
    let (comm_c, root_r_old, root_r_new) = (DomainOf::<Tree>::random(rng), DomainOf::<Tree>::random(rng), DomainOf::<Tree>::random(rng));
    let (comm_r_old, comm_r_new) = (hash2(&comm_c, &root_r_old), hash2(&comm_c, &root_r_new));
    let comm_d_new = TreeDDomain::random(rng);
    let phi = phi(&comm_d_new, &comm_r_old);
    let high_bits_shift = pp.challenge_bit_len - update.h;
    let mut vanilla = Vec::with_capacity(usize::from(update.update_partitions));
    for k in 0..usize::from(update.update_partitions) {
        let partition_path: Vec<Vec<TreeDDomain>> = (0..pp.partition_bit_len).map(|_| vec![TreeDDomain::random(rng)]).collect();
        let mut challenge_proofs = Vec::with_capacity(pp.challenge_count);
        for c in Challenges::new(pp.sector_nodes, comm_r_new, k).take(pp.challenge_count) {
            let (leaf_r_old, leaf_d_new) = (DomainOf::<Tree>::random(rng), TreeDDomain::random(rng));
            let (old, data): (Fr, Fr) = (leaf_r_old.into(), leaf_d_new.into());
            let leaf_r_new = (old + data * rho(&phi, c >> high_bits_shift)).into();
            let c = c as usize;
            challenge_proofs.push(ChallengeProof::<Tree> {
                proof_r_old: tree_proof::<Tree>(pp.sector_nodes, c, root_r_old, Some(leaf_r_old), rng)?,
                proof_d_new: random_inclusion_proof::<TreeDHasher, TreeDArity, _, _>(
                    pp.sector_nodes,
                    c,
                    comm_d_new,
                    leaf_d_new,
                    &partition_path,
                    rng,
                )?,
                proof_r_new: tree_proof::<Tree>(pp.sector_nodes, c, root_r_new, Some(leaf_r_new), rng)?,
            });
        }
        let p = PartitionProof::<Tree> { comm_c, apex_leafs: random_domains(pp.apex_leaf_count, rng), challenge_proofs };
        vanilla.push(bincode::serialize(&p).map_err(|e| FilecoinError::invalid(format!("encoding partition proof {k}: {e}")))?);
    }
    Ok(RequestFiles::snap(proof, vanilla, [domain_bytes(&comm_r_old), domain_bytes(&comm_r_new), domain_bytes(&comm_d_new)]))
}

/// A SnapDeals update of a sector whose data nodes are all d and old replica nodes all
/// o (see the module's notes): trees D, R old and R new built whole as block trees, one
/// partition proof per partition of the size's update.
pub(crate) fn valid<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
    size: SectorSize,
    rng: &mut ChaCha20Rng,
) -> Result<RequestFiles, FilecoinError> {
    let proof = UpdateProof::from_registered(size as u64)?;
    let update = SectorUpdateConfig::from_porep_config(&porep_config(SealProof::v1_1(size))?);
    let pp = UpdatePublicParams::from_sector_size(size.bytes());
    let nodes = pp.sector_nodes;
    let hash2 = <<TreeRHasher as Hasher>::Function as HashFunction<_>>::hash2;
    // One data value per block of 2^shift nodes (fr32: the top two bits clear, as
    // padded data is), one old replica value everywhere: new node i is then
    // o + d_b·rho(b) for its block b = i >> shift, so every tree has 2^h blocks.
    let shift = pp.challenge_bit_len - update.h;
    let data = (0..nodes >> shift)
        .map(|_| TreeDDomain::try_from_bytes(&fr32_bytes(rng)).map_err(FilecoinError::rejected("a data value")))
        .collect::<Result<Vec<_>, _>>()?;
    let (o, comm_c) = (DomainOf::<Tree>::random(rng), DomainOf::<Tree>::random(rng));
    let tree_d = BlockTree::<TreeDHasher>::new(arities(nodes, 2, 0, 0)?, 1 << shift, data.clone())?;
    let tree_r_old = BlockTree::<TreeRHasher>::new(arities_of::<Tree>(nodes)?, nodes, vec![o])?;
    let (comm_d_new, comm_r_old) = (tree_d.root(), hash2(&comm_c, &tree_r_old.root()));
    let phi = phi(&comm_d_new, &comm_r_old);
    let o_fr: Fr = o.into();
    let encoded = data.iter().enumerate().map(|(high, &d)| (o_fr + Fr::from(d) * rho(&phi, high as u32)).into()).collect();
    let tree_r_new = BlockTree::<TreeRHasher>::new(arities_of::<Tree>(nodes)?, 1 << shift, encoded)?;
    let comm_r_new = hash2(&comm_c, &tree_r_new.root());

    // A partition's apex leaves: tree D's nodes, at the apex height, under its subtree.
    let apex_height = pp.challenge_bit_len - pp.partition_bit_len - pp.apex_leaf_bit_len;
    let mut vanilla = Vec::with_capacity(usize::from(update.update_partitions));
    for k in 0..usize::from(update.update_partitions) {
        let apex_leafs = (k * pp.apex_leaf_count..(k + 1) * pp.apex_leaf_count).map(|j| tree_d.node(apex_height, j)).collect();
        let challenge_proofs = Challenges::new(nodes, comm_r_new, k)
            .take(pp.challenge_count)
            .map(|c| {
                let c = c as usize;
                ChallengeProof::<Tree> {
                    proof_r_old: MerkleProof::from_parts(tree_r_old.node(0, c), tree_r_old.root(), tree_r_old.path(c)),
                    proof_d_new: MerkleProof::<TreeDHasher, TreeDArity>::from_parts(tree_d.node(0, c), comm_d_new, tree_d.path(c)),
                    proof_r_new: MerkleProof::from_parts(tree_r_new.node(0, c), tree_r_new.root(), tree_r_new.path(c)),
                }
            })
            .collect();
        let p = PartitionProof::<Tree> { comm_c, apex_leafs, challenge_proofs };
        vanilla.push(bincode::serialize(&p).map_err(|e| FilecoinError::invalid(format!("encoding partition proof {k}: {e}")))?);
    }
    Ok(RequestFiles::snap(proof, vanilla, [domain_bytes(&comm_r_old), domain_bytes(&comm_r_new), domain_bytes(&comm_d_new)]))
}
