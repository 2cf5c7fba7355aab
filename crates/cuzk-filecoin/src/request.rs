//! A Filecoin proof request: the one owner of its fields. The daemon's gRPC mapping,
//! request folders on disk (`request_files`) and the engine's Filecoin kinds all hold
//! this type; its kind picks the decoder ([`FilecoinRequest::decode`]), and its digest
//! covers every field (a field added here is a compile error in
//! [`FilecoinRequest::digest_fields`] until it is hashed).

use serde::{Deserialize, Serialize};

use crate::registered::CircuitKind;

/// What a client sends for one Filecoin proof (the wire's SubmitProofRequest without
/// the request id and priority). Each kind reads the fields it needs; the others are
/// left empty. Serialized (a request folder's `request.json`) without the vanilla
/// proofs, which lie in files beside it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FilecoinRequest {
    #[serde(rename = "proof_kind", with = "kind_name")]
    pub kind: CircuitKind,
    /// The registered proof type (filecoin-proofs-api's numbering for the kind).
    pub registered_proof: u64,
    pub sector_size: u64,
    /// PoRep: Curio's envelope (or the C1 JSON alone).
    #[serde(skip)]
    pub vanilla_proof: Vec<u8>,
    /// SnapDeals: one per partition; PoSt: one per sector (bincode).
    #[serde(skip)]
    pub vanilla_proofs: Vec<Vec<u8>>,
    #[serde(default)]
    pub sector_number: u64,
    #[serde(default)]
    pub miner_id: u64,
    /// PoSt: the challenge randomness (32 bytes).
    #[serde(default, with = "hex_field")]
    pub randomness: Vec<u8>,
    /// WindowPoSt: the partition of the deadline.
    #[serde(default)]
    pub partition_index: u32,
    /// SnapDeals: the commitments (32 bytes each).
    #[serde(default, with = "hex_field")]
    pub comm_r_old: Vec<u8>,
    #[serde(default, with = "hex_field")]
    pub comm_r_new: Vec<u8>,
    #[serde(default, with = "hex_field")]
    pub comm_d_new: Vec<u8>,
}

impl FilecoinRequest {
    /// An empty request of `kind` (every field zero or empty).
    pub fn new(kind: CircuitKind) -> Self {
        FilecoinRequest {
            kind,
            registered_proof: 0,
            sector_size: 0,
            vanilla_proof: Vec::new(),
            vanilla_proofs: Vec::new(),
            sector_number: 0,
            miner_id: 0,
            randomness: Vec::new(),
            partition_index: 0,
            comm_r_old: Vec::new(),
            comm_r_new: Vec::new(),
            comm_d_new: Vec::new(),
        }
    }

    /// Feeds every field to `bytes` (the kind excepted: the caller hashes it with the
    /// priority), each a separate call, in a fixed order. The destructuring names every
    /// field, so none can be left out of a request's digest. The order and encoding are
    /// those of the digests stored beside completed proofs: they must not change.
    pub fn digest_fields(&self, bytes: &mut dyn FnMut(&[u8])) {
        let FilecoinRequest {
            kind: _,
            registered_proof,
            sector_size,
            vanilla_proof,
            vanilla_proofs,
            sector_number,
            miner_id,
            randomness,
            partition_index,
            comm_r_old,
            comm_r_new,
            comm_d_new,
        } = self;
        for n in [*sector_size, *registered_proof, *sector_number, *miner_id, *partition_index as u64] {
            bytes(&n.to_le_bytes());
        }
        for b in [vanilla_proof, randomness, comm_r_old, comm_r_new, comm_d_new] {
            bytes(b);
        }
        bytes(&(vanilla_proofs.len() as u64).to_le_bytes());
        for b in vanilla_proofs {
            bytes(b);
        }
    }

    /// Bytes of its variable-length fields: about what the decoded request holds while
    /// its job is unfinished. The destructuring names every field, so a new one does
    /// not compile until it is counted here or said to be fixed-size.
    pub fn bytes(&self) -> u64 {
        let FilecoinRequest {
            kind: _,
            registered_proof: _,
            sector_size: _,
            vanilla_proof,
            vanilla_proofs,
            sector_number: _,
            miner_id: _,
            randomness,
            partition_index: _,
            comm_r_old,
            comm_r_new,
            comm_d_new,
        } = self;
        let lists = vanilla_proofs.iter().map(Vec::len).sum::<usize>();
        (vanilla_proof.len() + lists + randomness.len() + comm_r_old.len() + comm_r_new.len() + comm_d_new.len()) as u64
    }
}

/// Lower-case hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The kind by the engine's name of its proof kind ("porep_seal_commit", …).
mod kind_name {
    use serde::{Deserialize, Deserializer, Serializer};

    use crate::registered::CircuitKind;

    pub fn serialize<S: Serializer>(k: &CircuitKind, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(k.proof_kind_name())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<CircuitKind, D::Error> {
        let s = String::deserialize(d)?;
        CircuitKind::from_proof_kind_name(&s).ok_or_else(|| serde::de::Error::custom(format!("proof_kind {s:?} is not a Filecoin proof kind")))
    }
}

/// Bytes as a hex string in JSON.
mod hex_field {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&crate::request::hex(v))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let s = String::deserialize(d)?;
        // The text quoted at most 64 characters long: an error never grows with its input.
        let shown = || if s.chars().count() > 64 { format!("{:?}…", s.chars().take(64).collect::<String>()) } else { format!("{s:?}") };
        if let Some((at, c)) = s.chars().enumerate().find(|(_, c)| !c.is_ascii_hexdigit()) {
            return Err(serde::de::Error::custom(format!("{} is not hex: {c:?} at character {at}", shown())));
        }
        if s.len() % 2 != 0 {
            return Err(serde::de::Error::custom(format!("{} has an odd number of hex digits ({}): two per byte", shown(), s.len())));
        }
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).map_err(serde::de::Error::custom)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(r: &FilecoinRequest) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        r.digest_fields(&mut |b| out.push(b.to_vec()));
        out
    }

    #[test]
    fn every_field_but_the_kind_reaches_the_digest() {
        let base = fields(&FilecoinRequest::new(CircuitKind::Porep));
        let changed: Vec<fn(&mut FilecoinRequest)> = vec![
            |r| r.registered_proof = 1,
            |r| r.sector_size = 1,
            |r| r.vanilla_proof = vec![0],
            |r| r.vanilla_proofs = vec![vec![]],
            |r| r.sector_number = 1,
            |r| r.miner_id = 1,
            |r| r.randomness = vec![0],
            |r| r.partition_index = 1,
            |r| r.comm_r_old = vec![0],
            |r| r.comm_r_new = vec![0],
            |r| r.comm_d_new = vec![0],
        ];
        let mut seen = vec![base];
        for change in &changed {
            let mut r = FilecoinRequest::new(CircuitKind::Porep);
            change(&mut r);
            let f = fields(&r);
            assert!(!seen.contains(&f), "{r:?} feeds the digest what another request does");
            seen.push(f);
        }
    }
}
