//! PoRep's shape-true and valid inputs (`cuzk fixture`; see `crate::shape_true` and
//! `crate::valid` for what each is).

use std::collections::{BTreeMap, BTreeSet};

use filecoin_hashers::{Domain, HashFunction, Hasher};
use filecoin_proofs::VanillaSealProof;
use rand_chacha::ChaCha20Rng;
use sha2::{Digest, Sha256};
use storage_proofs_core::drgraph::Graph;
use storage_proofs_core::merkle::{MerkleProof, MerkleProofTrait, MerkleTreeTrait};
use storage_proofs_porep::stacked::{
    self, generate_replica_id, Column, ColumnProof, EncodingProof, LabelingProof, ReplicaColumnProof, TOTAL_PARENTS,
};
use storage_proofs_update::constants::{TreeDArity, TreeDDomain, TreeDHasher};

use crate::error::FilecoinError;
use crate::ids::{porep_config, prover_id};
use crate::payload::domain_bytes;
use crate::registered::{SealProof, SectorSize};
use crate::request_files::RequestFiles;
use crate::shape_true::{fr32_bytes, random_domains, random_inclusion_proof, tree_proof, DomainOf, TreeProof, MINER_ID};
use crate::sparse_tree::{arities, arities_of, SparseTree};

/// PoRep C1 output: the seal proof type V1_1 of the size (what Curio seals), sector 1.
pub(crate) fn shape_true<Tree: 'static + MerkleTreeTrait>(size: SectorSize, rng: &mut ChaCha20Rng) -> Result<RequestFiles, FilecoinError> {
    let proof = SealProof::v1_1(size);
    let cfg = porep_config(proof)?;
    let params = filecoin_proofs::parameters::public_params::<Tree>(&cfg).map_err(FilecoinError::rejected("PoRep public parameters"))?;
    let graph = &params.graph;
    let nodes = graph.size();
    let sector_number = 1;
    let prover = prover_id(MINER_ID);
    let (ticket, seed) = (fr32_bytes(rng), fr32_bytes(rng));
    let comm_d = domain_bytes(&TreeDDomain::random(rng));
    let (comm_c, comm_r_last) = (DomainOf::<Tree>::random(rng), DomainOf::<Tree>::random(rng));
    let comm_r = <<Tree::Hasher as Hasher>::Function as HashFunction<_>>::hash2(&comm_c, &comm_r_last);
    let replica_id: DomainOf<Tree> = generate_replica_id::<Tree::Hasher, _>(&prover, sector_number, &ticket, comm_d, &cfg.porep_id);
    let comm_d_domain = TreeDDomain::try_from_bytes(&comm_d).map_err(FilecoinError::rejected("comm_d"))?;
    let inputs = stacked::PublicInputs::<DomainOf<Tree>, TreeDDomain> {
        replica_id,
        tau: Some(stacked::Tau { comm_d: comm_d_domain, comm_r }),
        k: None,
        seed: Some(seed),
    };
    let base_degree = graph.base_graph().degree();
    let mut parents = vec![0u32; graph.degree()];
    let mut partitions = Vec::with_capacity(usize::from(cfg.partitions));
    for k in 0..usize::from(cfg.partitions) {
        let mut proofs: Vec<VanillaSealProof<Tree>> = Vec::new();
        for challenge in inputs.challenges(&params.challenges, nodes, Some(k)) {
            graph.parents(challenge, &mut parents).map_err(FilecoinError::rejected("the graph's parents"))?;
            let column = |node: u32, rng: &mut ChaCha20Rng| -> Result<ColumnProof<TreeProof<Tree>>, FilecoinError> {
                let rows = random_domains(params.num_layers, rng);
                let proof = tree_proof::<Tree>(nodes, node as usize, comm_c, None, rng)?;
                let col = Column::new(node, rows).map_err(FilecoinError::rejected("a column"))?;
                ColumnProof::from_column(col, proof).map_err(FilecoinError::rejected("a column proof"))
            };
            let c_x = column(challenge as u32, rng)?;
            let drg_parents = parents[..base_degree].iter().map(|&p| column(p, rng)).collect::<Result<Vec<_>, _>>()?;
            let exp_parents = parents[base_degree..].iter().map(|&p| column(p, rng)).collect::<Result<Vec<_>, _>>()?;
            let (labeling_proofs, key_parents) = labeling_proofs(challenge as u64, params.num_layers, &drg_parents, &exp_parents)?;
            let encoding_proof = EncodingProof::new(params.num_layers as u32, challenge as u64, key_parents);
            let comm_d_leaf = TreeDDomain::random(rng);
            proofs.push(stacked::Proof {
                comm_d_proofs: random_inclusion_proof::<TreeDHasher, TreeDArity, _, _>(nodes, challenge, comm_d_domain, comm_d_leaf, &[], rng)?,
                comm_r_last_proof: tree_proof::<Tree>(nodes, challenge, comm_r_last, None, rng)?,
                replica_column_proofs: ReplicaColumnProof { c_x, drg_parents, exp_parents },
                labeling_proofs,
                encoding_proof,
            });
        }
        partitions.push(proofs);
    }
    porep_request(proof, sector_number, &partitions, C1Values { comm_r: domain_bytes(&comm_r), comm_d, replica_id, seed, ticket })
}

/// The public values of a C1 output beside its vanilla proofs.
pub(crate) struct C1Values<D> {
    pub comm_r: [u8; 32],
    pub comm_d: [u8; 32],
    pub replica_id: D,
    pub seed: [u8; 32],
    pub ticket: [u8; 32],
}

/// A PoRep C2 request of miner [`MINER_ID`]: the C1 output (filecoin-proofs-api's JSON)
/// of `partitions`' vanilla proofs, in Curio's envelope.
pub(crate) fn porep_request<Tree: 'static + MerkleTreeTrait>(
    proof: SealProof,
    sector_number: u64,
    partitions: &[Vec<VanillaSealProof<Tree>>],
    v: C1Values<DomainOf<Tree>>,
) -> Result<RequestFiles, FilecoinError> {
    let c1 = serde_json::json!({
        "registered_proof": proof.api_name(),
        "vanilla_proofs": { format!("StackedDrg{}V1", proof.size.api_name()): partitions },
        "comm_r": v.comm_r,
        "comm_d": v.comm_d,
        "replica_id": v.replica_id,
        "seed": v.seed,
        "ticket": v.ticket,
    });
    let c1 = serde_json::to_vec(&c1).map_err(|e| FilecoinError::invalid(format!("encoding the C1 output: {e}")))?;
    RequestFiles::porep(proof, sector_number, MINER_ID, c1)
}

/// The labeling proof of each layer, with the parents storage-proofs' prover lists:
/// the DRG parents' labels in this layer, then (past the first layer) the expander
/// parents' labels in the layer before, repeated up to `TOTAL_PARENTS`. Also the last
/// layer's parents, which the encoding proof repeats.
#[allow(clippy::type_complexity)]
pub(crate) fn labeling_proofs<P: MerkleProofTrait>(
    node: u64,
    layers: usize,
    drg: &[ColumnProof<P>],
    exp: &[ColumnProof<P>],
) -> Result<(Vec<LabelingProof<P::Hasher>>, Vec<DomainOfProof<P>>), FilecoinError> {
    let row = |c: &ColumnProof<P>, layer: usize| c.get_node_at_layer(layer).copied().map_err(FilecoinError::rejected("a column row"));
    let mut proofs = Vec::with_capacity(layers);
    let mut parents = Vec::new();
    for layer in 1..=layers {
        let mut labels = drg.iter().map(|c| row(c, layer)).collect::<Result<Vec<_>, _>>()?;
        if layer > 1 {
            for c in exp {
                labels.push(row(c, layer - 1)?);
            }
        }
        parents = labels.iter().copied().cycle().take(TOTAL_PARENTS).collect();
        proofs.push(LabelingProof::new(layer as u32, node, parents.clone()));
    }
    Ok((proofs, parents))
}

pub(crate) type DomainOfProof<P> = <<P as MerkleProofTrait>::Hasher as Hasher>::Domain;

/// storage-proofs' label of `node` in `layer`: SHA-256 of the replica id, the layer (u32)
/// and node (u64) big-endian, zeros to 64 bytes, then the parents' labels; the top two
/// bits cleared so that it is a field element.
fn label<D: Domain>(replica_id: &D, layer: usize, node: u64, parents: &[D]) -> Result<D, FilecoinError> {
    let mut head = [0u8; 64];
    head[..32].copy_from_slice(replica_id.as_ref());
    head[32..36].copy_from_slice(&(layer as u32).to_be_bytes());
    head[36..44].copy_from_slice(&node.to_be_bytes());
    let mut h = Sha256::new();
    h.update(head);
    for p in parents {
        h.update(p.as_ref());
    }
    let mut bytes: [u8; 32] = h.finalize().into();
    bytes[31] &= 0x3f;
    D::try_from_bytes(&bytes).map_err(FilecoinError::rejected("a label"))
}

/// The zero tree D of `nodes` leaves (a committed-capacity sector's data), sparse over
/// `opened`: every node of a level is the hash of two of the level below.
fn zero_tree_d(nodes: usize, opened: &BTreeSet<usize>) -> Result<SparseTree<TreeDHasher>, FilecoinError> {
    let zeros: Vec<TreeDDomain> = std::iter::successors(Some(TreeDDomain::default()), |z| Some(<TreeDHasher as Hasher>::Function::hash2(z, z)))
        .take(nodes.ilog2() as usize + 1)
        .collect();
    let leaves = opened.iter().map(|&i| (i, zeros[0])).collect();
    SparseTree::new(arities(nodes, 2, 0, 0)?, leaves, |level| zeros[level])
}

/// PoRep C1 output for sector 1 of a committed-capacity (zero data) sector, V1_1.
pub(crate) fn valid<Tree: 'static + MerkleTreeTrait>(size: SectorSize, rng: &mut ChaCha20Rng) -> Result<RequestFiles, FilecoinError> {
    let proof = SealProof::v1_1(size);
    let cfg = porep_config(proof)?;
    let params = filecoin_proofs::parameters::public_params::<Tree>(&cfg).map_err(FilecoinError::rejected("PoRep public parameters"))?;
    let (graph, layers) = (&params.graph, params.num_layers);
    let nodes = graph.size();
    let sector_number = 1;
    let (ticket, seed) = (fr32_bytes(rng), fr32_bytes(rng));

    // The challenges, from comm_d (zero data), the replica id and the seed.
    let comm_d = zero_tree_d(nodes, &BTreeSet::from([0]))?.root();
    let replica_id: DomainOf<Tree> = generate_replica_id::<Tree::Hasher, _>(&prover_id(MINER_ID), sector_number, &ticket, comm_d, &cfg.porep_id);
    let inputs = stacked::PublicInputs::<DomainOf<Tree>, TreeDDomain> { replica_id, tau: None, k: None, seed: Some(seed) };
    let challenges: Vec<Vec<usize>> = (0..usize::from(cfg.partitions)).map(|k| inputs.challenges(&params.challenges, nodes, Some(k))).collect();
    let challenged: BTreeSet<usize> = challenges.iter().flatten().copied().collect();

    // Every opened column: the challenged nodes' labels computed, their parents' drawn.
    let base_degree = graph.base_graph().degree();
    let mut parents: BTreeMap<usize, Vec<u32>> = BTreeMap::new();
    for &c in &challenged {
        let mut p = vec![0u32; graph.degree()];
        graph.parents(c, &mut p).map_err(FilecoinError::rejected("the graph's parents"))?;
        parents.insert(c, p);
    }
    let mut columns: BTreeMap<usize, Vec<DomainOf<Tree>>> = challenged.iter().map(|&c| (c, Vec::with_capacity(layers))).collect();
    for p in parents.values().flatten().map(|&p| p as usize) {
        if !challenged.contains(&p) {
            columns.entry(p).or_insert_with(|| (0..layers).map(|_| DomainOf::<Tree>::random(rng)).collect());
        }
    }
    for layer in 1..=layers {
        for (&c, ps) in &parents {
            // A label's parents: the DRG parents in this layer (all before c, so a
            // challenged one is labelled already), then past the first layer the
            // expander parents in the layer before, repeated to TOTAL_PARENTS.
            let row = |p: u32, l: usize| {
                columns.get(&(p as usize)).and_then(|col| col.get(l - 1)).copied().ok_or_else(|| {
                    FilecoinError::invalid(format!("node {c}'s parent {p} has no label in layer {l} yet (a DRG parent after its child?)"))
                })
            };
            let mut ls = ps[..base_degree].iter().map(|&p| row(p, layer)).collect::<Result<Vec<_>, _>>()?;
            if layer > 1 {
                for &p in &ps[base_degree..] {
                    ls.push(row(p, layer - 1)?);
                }
            }
            let all: Vec<_> = ls.iter().copied().cycle().take(TOTAL_PARENTS).collect();
            let l = label(&replica_id, layer, c as u64, &all)?;
            columns.get_mut(&c).ok_or_else(|| FilecoinError::invalid("a challenged column is missing"))?.push(l);
        }
    }

    // Tree C over the columns' hashes, tree R over the replica leaves (label + zero data).
    let arities_c = arities_of::<Tree>(nodes)?;
    let column_of = |n: usize| -> Result<Column<Tree::Hasher>, FilecoinError> {
        Column::new(n as u32, columns[&n].clone()).map_err(FilecoinError::rejected("a column"))
    };
    let leaves_c = columns.keys().map(|&n| Ok((n, column_of(n)?.hash().into()))).collect::<Result<_, FilecoinError>>()?;
    let tree_c = SparseTree::<Tree::Hasher>::new(arities_c.clone(), leaves_c, |_| DomainOf::<Tree>::random(rng))?;
    let leaves_r = challenged.iter().map(|&c| (c, columns[&c][layers - 1])).collect();
    let tree_r = SparseTree::<Tree::Hasher>::new(arities_c, leaves_r, |_| DomainOf::<Tree>::random(rng))?;
    let tree_d = zero_tree_d(nodes, &challenged)?;
    let (comm_c, comm_r_last) = (tree_c.root(), tree_r.root());
    let comm_r = <<Tree::Hasher as Hasher>::Function as HashFunction<_>>::hash2(&comm_c, &comm_r_last);

    let tree_proof = |t: &SparseTree<Tree::Hasher>, n: usize| -> Result<TreeProof<Tree>, FilecoinError> {
        Ok(MerkleProof::from_parts(t.leaf(n)?, t.root(), t.path(n)?))
    };
    let column_proof = |n: u32| -> Result<ColumnProof<TreeProof<Tree>>, FilecoinError> {
        ColumnProof::from_column(column_of(n as usize)?, tree_proof(&tree_c, n as usize)?).map_err(FilecoinError::rejected("a column proof"))
    };
    let mut partitions = Vec::with_capacity(challenges.len());
    for ks in &challenges {
        let mut proofs: Vec<VanillaSealProof<Tree>> = Vec::with_capacity(ks.len());
        for &c in ks {
            let ps = &parents[&c];
            let drg_parents = ps[..base_degree].iter().map(|&p| column_proof(p)).collect::<Result<Vec<_>, _>>()?;
            let exp_parents = ps[base_degree..].iter().map(|&p| column_proof(p)).collect::<Result<Vec<_>, _>>()?;
            let (labeling_proofs, key_parents) = labeling_proofs(c as u64, layers, &drg_parents, &exp_parents)?;
            proofs.push(stacked::Proof {
                comm_d_proofs: MerkleProof::<TreeDHasher, TreeDArity>::from_parts(tree_d.leaf(c)?, comm_d, tree_d.path(c)?),
                comm_r_last_proof: tree_proof(&tree_r, c)?,
                replica_column_proofs: ReplicaColumnProof { c_x: column_proof(c as u32)?, drg_parents, exp_parents },
                labeling_proofs,
                encoding_proof: EncodingProof::new(layers as u32, c as u64, key_parents),
            });
        }
        partitions.push(proofs);
    }
    let values = C1Values { comm_r: domain_bytes(&comm_r), comm_d: domain_bytes(&comm_d), replica_id, seed, ticket };
    porep_request(proof, sector_number, &partitions, values)
}
