//! Sparse Merkle trees: the nodes on the paths of a few leaves of a sector-sized tree,
//! every other node a filler, so that inclusion proofs of those leaves verify against
//! the root without the sector's other leaves ever existing.
//!
//! A tree is a list of arities from the leaves up, as storage-proofs lays its trees out:
//! the base tree's levels, then a sub-tree level and a top-tree level where the shape
//! has them. Where the filler is the hash of the level below's filler (a tree of equal
//! leaves, such as the zero data of a committed-capacity sector), the root is the real
//! tree's; otherwise the fillers stand for nodes no one can open.

use std::collections::BTreeMap;

use filecoin_hashers::Hasher;
use merkletree::hash::Algorithm;
use storage_proofs_core::merkle::MerkleTreeTrait;

use crate::error::FilecoinError;

/// A leaf's path: per level from the leaves, its siblings in order and its position
/// among them (`MerkleProof::from_parts`'s layout).
pub(crate) type Path<D> = Vec<(Vec<D>, usize)>;

/// The known nodes of each level; the last level holds the root alone.
pub(crate) struct SparseTree<H: Hasher> {
    arities: Vec<usize>,
    levels: Vec<BTreeMap<usize, H::Domain>>,
}

/// The arities of a `Tree`-shaped tree of `leaves` leaves, from the leaves up: base
/// levels of the tree's arity, then its sub-tree and top-tree levels where they exist.
pub(crate) fn arities_of<Tree: MerkleTreeTrait>(leaves: usize) -> Result<Vec<usize>, FilecoinError> {
    use typenum::Unsigned;
    arities(leaves, Tree::Arity::to_usize(), Tree::SubTreeArity::to_usize(), Tree::TopTreeArity::to_usize())
}

/// The arities of a tree of `leaves` leaves with base arity `a`, sub-tree arity `b` and
/// top-tree arity `c` (0 where there is no such level).
pub(crate) fn arities(leaves: usize, a: usize, b: usize, c: usize) -> Result<Vec<usize>, FilecoinError> {
    let base_leaves = leaves / b.max(1) / c.max(1);
    let levels = base_leaves.checked_ilog(a).unwrap_or(0);
    if a < 2 || a.checked_pow(levels) != Some(base_leaves) || base_leaves * b.max(1) * c.max(1) != leaves {
        return Err(FilecoinError::invalid(format!("no tree of arities ({a}, {b}, {c}) has {leaves} leaves")));
    }
    Ok(std::iter::repeat(a).take(levels as usize).chain([b, c].into_iter().filter(|&n| n > 0)).collect())
}

impl<H: Hasher> SparseTree<H> {
    /// The tree over `leaves` (index → value; every other leaf is a filler): level by
    /// level, each parent of a known node is hashed from its children, the unknown ones
    /// drawn from `fill(level)`. The fillers are drawn in ascending order of level and
    /// index, so a seeded `fill` makes the same tree every time.
    pub(crate) fn new(
        arities: Vec<usize>,
        leaves: BTreeMap<usize, H::Domain>,
        mut fill: impl FnMut(usize) -> H::Domain,
    ) -> Result<Self, FilecoinError> {
        let width: usize = arities.iter().product();
        if let Some((&last, _)) = leaves.last_key_value() {
            if last >= width {
                return Err(FilecoinError::invalid(format!("leaf {last} of a tree of {width} leaves")));
            }
        }
        if leaves.is_empty() {
            return Err(FilecoinError::invalid("a sparse tree needs a leaf"));
        }
        let mut levels = vec![leaves];
        let mut hasher = H::Function::default();
        for (level, &arity) in arities.iter().enumerate() {
            let mut parents = BTreeMap::new();
            let below = &mut levels[level];
            let indices: Vec<usize> = below.keys().map(|&i| i / arity).collect();
            for p in indices {
                if parents.contains_key(&p) {
                    continue;
                }
                let children: Vec<H::Domain> = (p * arity..(p + 1) * arity).map(|i| *below.entry(i).or_insert_with(|| fill(level))).collect();
                hasher.reset();
                // Both of storage-proofs' hashers ignore the height; a proof passes the
                // height within its base, sub or top part.
                parents.insert(p, hasher.multi_node(&children, level));
            }
            levels.push(parents);
        }
        Ok(SparseTree { arities, levels })
    }

    pub(crate) fn root(&self) -> H::Domain {
        // new() made one node per level above a non-empty one: the last level is {0: root}.
        self.levels.last().and_then(|l| l.get(&0)).copied().unwrap_or_default()
    }

    /// Leaf `index`'s value.
    pub(crate) fn leaf(&self, index: usize) -> Result<H::Domain, FilecoinError> {
        self.levels[0].get(&index).copied().ok_or_else(|| FilecoinError::invalid(format!("leaf {index} is not in the sparse tree")))
    }

    /// Leaf `index`'s path: per level from the leaves, its siblings in order and its
    /// position among them (`MerkleProof::from_parts`'s layout).
    pub(crate) fn path(&self, index: usize) -> Result<Path<H::Domain>, FilecoinError> {
        self.leaf(index)?;
        let mut i = index;
        let mut path = Vec::with_capacity(self.arities.len());
        for (level, &arity) in self.arities.iter().enumerate() {
            let p = i / arity;
            let siblings = (p * arity..(p + 1) * arity)
                .filter(|&j| j != i)
                .map(|j| self.levels[level].get(&j).copied().ok_or_else(|| FilecoinError::invalid(format!("node {j} of level {level} is missing"))))
                .collect::<Result<Vec<_>, _>>()?;
            path.push((siblings, i % arity));
            i = p;
        }
        Ok(path)
    }
}

/// A whole tree whose leaves are equal within aligned blocks of `block` leaves (a power
/// of two): a node over one block depends only on that block's value, so each level
/// keeps a value per block until its nodes span more than a block, then a value per
/// node. Built in (leaves / block) · levels hashes, whatever the tree's width.
pub(crate) struct BlockTree<H: Hasher> {
    arities: Vec<usize>,
    block: usize,
    /// Leaves under one node of each level.
    spans: Vec<usize>,
    levels: Vec<Vec<H::Domain>>,
}

impl<H: Hasher> BlockTree<H> {
    /// The tree of `arities` whose leaves of block b are all `values[b]`.
    pub(crate) fn new(arities: Vec<usize>, block: usize, values: Vec<H::Domain>) -> Result<Self, FilecoinError> {
        let width: usize = arities.iter().product();
        if !block.is_power_of_two() || !arities.iter().all(|a| a.is_power_of_two()) || block * values.len() != width {
            return Err(FilecoinError::invalid(format!(
                "{} blocks of {block} leaves do not make a tree of {width} leaves (powers of two needed)",
                values.len()
            )));
        }
        let mut hasher = H::Function::default();
        let mut hash = |children: &[H::Domain], level: usize| {
            hasher.reset();
            hasher.multi_node(children, level)
        };
        let mut tree = BlockTree { arities, block, spans: vec![1], levels: vec![values] };
        for level in 0..tree.arities.len() {
            let (arity, span) = (tree.arities[level], tree.spans[level] * tree.arities[level]);
            let next = if span <= block {
                tree.levels[level].iter().map(|&v| hash(&vec![v; arity], level)).collect()
            } else {
                (0..width / span).map(|j| hash(&(j * arity..(j + 1) * arity).map(|i| tree.node(level, i)).collect::<Vec<_>>(), level)).collect()
            };
            tree.spans.push(span);
            tree.levels.push(next);
        }
        Ok(tree)
    }

    /// Node `index` of `level` (level 0: the leaves).
    pub(crate) fn node(&self, level: usize, index: usize) -> H::Domain {
        let span = self.spans[level];
        if span <= self.block {
            self.levels[level][index * span / self.block]
        } else {
            self.levels[level][index]
        }
    }

    pub(crate) fn root(&self) -> H::Domain {
        self.node(self.arities.len(), 0)
    }

    /// Leaf `index`'s path, as [`SparseTree::path`] gives it.
    pub(crate) fn path(&self, index: usize) -> Path<H::Domain> {
        let mut i = index;
        let mut path = Vec::with_capacity(self.arities.len());
        for (level, &arity) in self.arities.iter().enumerate() {
            let p = i / arity;
            path.push(((p * arity..(p + 1) * arity).filter(|&j| j != i).map(|j| self.node(level, j)).collect(), i % arity));
            i = p;
        }
        path
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use filecoin_hashers::poseidon::PoseidonHasher;
    use filecoin_hashers::sha256::Sha256Hasher;
    use filecoin_hashers::{Domain, HashFunction};
    use storage_proofs_core::merkle::{MerkleProof, MerkleProofTrait};
    use typenum::{U0, U2, U8};

    #[test]
    fn a_zero_filled_binary_tree_has_the_zero_trees_root() {
        let z = <Sha256Hasher as Hasher>::Domain::default();
        // zeros[l]: a node of level l of a tree of zero leaves.
        let mut zeros = vec![z];
        for l in 0..10 {
            zeros.push(<Sha256Hasher as Hasher>::Function::hash2(&zeros[l], &zeros[l]));
        }
        let leaves = [3usize, 700, 1023].into_iter().map(|i| (i, z)).collect();
        let t = SparseTree::<Sha256Hasher>::new(arities(1024, 2, 0, 0).unwrap(), leaves, |l| zeros[l]).unwrap();
        assert_eq!(t.root(), zeros[10]);
        let p = MerkleProof::<Sha256Hasher, U2>::from_parts(z, t.root(), t.path(700).unwrap());
        assert!(p.validate(700) && p.validate_data(z));
        assert!(!p.validate(701));
    }

    #[test]
    fn proofs_of_a_sub_tree_shape_verify_and_a_changed_sibling_does_not() {
        type D = <PoseidonHasher as Hasher>::Domain;
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(5);
        use rand::SeedableRng;
        // 8 sub-trees of 8^2 leaves: the 32 GiB shape, smaller.
        let arities = arities(512, 8, 8, 0).unwrap();
        assert_eq!(arities, vec![8, 8, 8]);
        let leaves: BTreeMap<usize, D> = [0usize, 9, 63, 64, 511].into_iter().map(|i| (i, D::random(&mut rng))).collect();
        let t = SparseTree::<PoseidonHasher>::new(arities, leaves.clone(), |_| D::random(&mut rng)).unwrap();
        for (&i, &leaf) in &leaves {
            let p = MerkleProof::<PoseidonHasher, U8, U8, U0>::from_parts(leaf, t.root(), t.path(i).unwrap());
            assert!(p.validate(i) && p.validate_data(leaf), "leaf {i}");
        }
        let mut path = t.path(9).unwrap();
        path[1].0[3] = D::random(&mut rng);
        assert!(!MerkleProof::<PoseidonHasher, U8, U8, U0>::from_parts(leaves[&9], t.root(), path).validate(9));
        assert!(t.path(100).is_err() && SparseTree::<PoseidonHasher>::new(vec![8], [(8, D::default())].into(), |_| D::default()).is_err());
    }

    #[test]
    fn a_block_tree_is_the_tree_of_its_leaves() {
        type D = <PoseidonHasher as Hasher>::Domain;
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(6);
        use rand::SeedableRng;
        // Blocks of 16 leaves in a 8-8-2 tree of 1024 leaves: the nodes of the second
        // level span 64 and are hashed from 4 blocks' values.
        let arities = arities(1024, 8, 8, 2).unwrap();
        let values: Vec<D> = (0..64).map(|_| D::random(&mut rng)).collect();
        let t = BlockTree::<PoseidonHasher>::new(arities.clone(), 16, values.clone()).unwrap();
        let leaves: BTreeMap<usize, D> = (0..1024).map(|i| (i, values[i / 16])).collect();
        let whole = SparseTree::<PoseidonHasher>::new(arities, leaves, |_| unreachable!("every leaf is given")).unwrap();
        assert_eq!(t.root(), whole.root());
        for i in [0, 15, 16, 500, 1023] {
            assert_eq!(t.path(i), whole.path(i).unwrap(), "leaf {i}");
            let p = MerkleProof::<PoseidonHasher, U8, U8, U2>::from_parts(values[i / 16], t.root(), t.path(i));
            assert!(p.validate(i) && p.validate_data(values[i / 16]));
        }
        assert!(BlockTree::<PoseidonHasher>::new(vec![8, 8], 16, values[..3].to_vec()).is_err());
    }
}
