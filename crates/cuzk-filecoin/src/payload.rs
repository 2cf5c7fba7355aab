//! Decoding the payload fields: bincode-encoded vanilla proofs, 32-byte field values.

use bincode::Options;
use serde::de::DeserializeOwned;

use crate::error::FilecoinError;

/// The largest vanilla proof accepted (a request is at most 256 MiB in all).
const MAX_VANILLA_BYTES: u64 = 256 << 20;

/// Decodes `bytes` as bincode 1 with the legacy layout filecoin-proofs writes
/// (`bincode::serialize`: fixed-width little-endian integers), refusing trailing bytes.
pub(crate) fn bincode_decode<T: DeserializeOwned>(bytes: &[u8], field: &str) -> Result<T, FilecoinError> {
    bincode::DefaultOptions::new().with_fixint_encoding().reject_trailing_bytes().with_limit(MAX_VANILLA_BYTES).deserialize(bytes).map_err(|e| {
        FilecoinError::invalid(format!("{field} ({} bytes) is not a bincode-encoded vanilla proof of this proof type: {e}", bytes.len()))
    })
}

/// A hasher domain's 32 bytes.
pub(crate) fn domain_bytes<D: filecoin_hashers::Domain>(d: &D) -> [u8; 32] {
    let mut out = [0u8; 32];
    out.copy_from_slice(AsRef::<[u8]>::as_ref(d));
    out
}

/// A 32-byte field of the request.
pub(crate) fn field_bytes(bytes: &[u8], field: &str) -> Result<[u8; 32], FilecoinError> {
    bytes.try_into().map_err(|_| FilecoinError::invalid(format!("{field} must be 32 bytes, got {}", bytes.len())))
}

/// A 32-byte field of the request that must be a canonical field element (below the
/// scalar field's modulus, little-endian), as Filecoin's commitments are.
pub(crate) fn field_element(bytes: &[u8], field: &str) -> Result<[u8; 32], FilecoinError> {
    let b = field_bytes(bytes, field)?;
    if bool::from(blstrs::Scalar::from_bytes_le(&b).is_none()) {
        return Err(FilecoinError::invalid(format!("{field} is not a canonical field element (it is not below the modulus)")));
    }
    Ok(b)
}
