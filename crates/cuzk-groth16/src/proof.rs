//! Groth16 proofs and their 192-byte encoding: A (compressed G1, 48 bytes) ‖
//! B (compressed G2, 96 bytes) ‖ C (compressed G1, 48 bytes), as filecoin-proofs writes
//! them. Multi-partition proofs are these concatenated in partition order.

use blstrs::{G1Affine, G2Affine};

/// Bytes of one encoded proof.
pub const PROOF_BYTES: usize = 192;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Proof {
    pub a: G1Affine,
    pub b: G2Affine,
    pub c: G1Affine,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ProofDecodeError {
    #[error("proof bytes have length {0}, expected a multiple of {PROOF_BYTES}")]
    Length(usize),
    #[error("proof {index}: {part} is not a valid compressed point in its subgroup")]
    Point { index: usize, part: &'static str },
}

impl Proof {
    pub fn to_bytes(&self) -> [u8; PROOF_BYTES] {
        let mut out = [0u8; PROOF_BYTES];
        out[..48].copy_from_slice(&self.a.to_compressed());
        out[48..144].copy_from_slice(&self.b.to_compressed());
        out[144..].copy_from_slice(&self.c.to_compressed());
        out
    }

    /// Decodes one proof, checking that each point is on its curve and in the subgroup.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, ProofDecodeError> {
        Self::decode(bytes, 0)
    }

    fn decode(bytes: &[u8], index: usize) -> Result<Self, ProofDecodeError> {
        let bytes: &[u8; PROOF_BYTES] = bytes.try_into().map_err(|_| ProofDecodeError::Length(bytes.len()))?;
        let err = |part| ProofDecodeError::Point { index, part };
        let a = Option::from(G1Affine::from_compressed(bytes[..48].try_into().expect("48 bytes"))).ok_or(err("A"))?;
        let b = Option::from(G2Affine::from_compressed(bytes[48..144].try_into().expect("96 bytes"))).ok_or(err("B"))?;
        let c = Option::from(G1Affine::from_compressed(bytes[144..].try_into().expect("48 bytes"))).ok_or(err("C"))?;
        Ok(Proof { a, b, c })
    }

    /// Concatenated encoding of several proofs.
    pub fn encode_many(proofs: &[Proof]) -> Vec<u8> {
        proofs.iter().flat_map(|p| p.to_bytes()).collect()
    }

    /// Decodes concatenated proofs.
    pub fn decode_many(bytes: &[u8]) -> Result<Vec<Proof>, ProofDecodeError> {
        if bytes.len() % PROOF_BYTES != 0 {
            return Err(ProofDecodeError::Length(bytes.len()));
        }
        bytes.chunks_exact(PROOF_BYTES).enumerate().map(|(i, b)| Self::decode(b, i)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use group::{Curve, Group};
    use rand::SeedableRng;

    #[test]
    fn roundtrip_and_errors() {
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(1);
        let p = Proof {
            a: blstrs::G1Projective::random(&mut rng).to_affine(),
            b: blstrs::G2Projective::random(&mut rng).to_affine(),
            c: blstrs::G1Projective::random(&mut rng).to_affine(),
        };
        let bytes = Proof::encode_many(&[p, p]);
        assert_eq!(bytes.len(), 384);
        assert_eq!(Proof::decode_many(&bytes).unwrap(), vec![p, p]);
        assert_eq!(Proof::from_bytes(&bytes[..191]), Err(ProofDecodeError::Length(191)));
        let mut bad = bytes.clone();
        bad[192 + 50] ^= 0x01;
        assert!(matches!(Proof::decode_many(&bad), Err(ProofDecodeError::Point { index: 1, .. })));
    }
}
