//! Registered proof types (the Go ABI numbers Curio sends) and the circuits they need.

use std::fmt;

use storage_proofs_core::api_version::{ApiFeature, ApiVersion};

use crate::error::FilecoinError;

/// The sector sizes Filecoin publishes, in Go ABI order: a registered proof number
/// modulo 5 picks the size.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SectorSize {
    S2KiB,
    S8MiB,
    S512MiB,
    S32GiB,
    S64GiB,
}

impl SectorSize {
    pub const ALL: [SectorSize; 5] = [SectorSize::S2KiB, SectorSize::S8MiB, SectorSize::S512MiB, SectorSize::S32GiB, SectorSize::S64GiB];

    pub fn bytes(self) -> u64 {
        match self {
            SectorSize::S2KiB => 2 << 10,
            SectorSize::S8MiB => 8 << 20,
            SectorSize::S512MiB => 512 << 20,
            SectorSize::S32GiB => 32 << 30,
            SectorSize::S64GiB => 64 << 30,
        }
    }

    pub fn from_bytes(bytes: u64) -> Option<SectorSize> {
        SectorSize::ALL.into_iter().find(|s| s.bytes() == bytes)
    }

    /// "32GiB", "32g" (a circuit id's suffix) or the size in bytes.
    pub fn parse(s: &str) -> Option<SectorSize> {
        let s = s.trim();
        SectorSize::ALL.into_iter().find(|z| z.api_name().eq_ignore_ascii_case(s) || z.short().eq_ignore_ascii_case(s) || s.parse() == Ok(z.bytes()))
    }

    fn from_registered(n: u64) -> SectorSize {
        SectorSize::ALL[(n % 5) as usize]
    }

    /// The suffix of circuit ids: "2k", "8m", "512m", "32g", "64g".
    pub fn short(self) -> &'static str {
        match self {
            SectorSize::S2KiB => "2k",
            SectorSize::S8MiB => "8m",
            SectorSize::S512MiB => "512m",
            SectorSize::S32GiB => "32g",
            SectorSize::S64GiB => "64g",
        }
    }

    /// The name filecoin-proofs-api gives the size in C1's `vanilla_proofs` tag and in
    /// registered proof names ("2KiB", …).
    pub fn api_name(self) -> &'static str {
        match self {
            SectorSize::S2KiB => "2KiB",
            SectorSize::S8MiB => "8MiB",
            SectorSize::S512MiB => "512MiB",
            SectorSize::S32GiB => "32GiB",
            SectorSize::S64GiB => "64GiB",
        }
    }
}

impl fmt::Display for SectorSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.api_name())
    }
}

/// Checks the request's `sector_size` field against the size its registered proof
/// implies; 0 means the client left it out.
pub(crate) fn check_sector_size(field: u64, implied: SectorSize) -> Result<(), FilecoinError> {
    if field != 0 && field != implied.bytes() {
        return Err(FilecoinError::invalid(format!(
            "sector_size is {field} bytes but the registered proof is for {implied} sectors ({} bytes)",
            implied.bytes()
        )));
    }
    Ok(())
}

/// A registered PoSt proof: 0–4 WinningPoSt, 5–9 WindowPoSt V1, 10–14 WindowPoSt
/// V1_1 (which filecoin-proofs-api maps to its V1_2 config).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PostProof {
    pub window: bool,
    pub size: SectorSize,
    pub api_version: ApiVersion,
}

impl PostProof {
    pub fn from_registered(n: u64) -> Result<PostProof, FilecoinError> {
        let (window, api_version) = match n {
            0..=4 => (false, ApiVersion::V1_0_0),
            5..=9 => (true, ApiVersion::V1_0_0),
            10..=14 => (true, ApiVersion::V1_2_0),
            _ => return Err(FilecoinError::invalid(format!("registered_proof {n} is not a PoSt proof type (0-4 Winning, 5-14 Window)"))),
        };
        Ok(PostProof { window, size: SectorSize::from_registered(n), api_version })
    }

    pub fn circuit(self) -> Circuit {
        Circuit { kind: if self.window { CircuitKind::WindowPost } else { CircuitKind::WinningPost }, size: self.size }
    }

    /// The Go ABI number, the inverse of [`PostProof::from_registered`].
    pub fn registered(self) -> Result<u64, FilecoinError> {
        let base = match (self.window, self.api_version) {
            (false, ApiVersion::V1_0_0) => 0,
            (true, ApiVersion::V1_0_0) => 5,
            (true, ApiVersion::V1_2_0) => 10,
            _ => return Err(FilecoinError::invalid(format!("no registered PoSt proof is {self:?}"))),
        };
        Ok(base + self.size as u64)
    }
}

/// A registered seal proof: 0–4 V1, 5–9 V1_1, 10–14 V1_1 with synthetic PoRep,
/// 15–19 V1_2 non-interactive PoRep.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SealProof {
    pub id: u64,
    pub size: SectorSize,
    pub api_version: ApiVersion,
    pub feature: Option<ApiFeature>,
}

impl SealProof {
    pub fn from_registered(n: u64) -> Result<SealProof, FilecoinError> {
        let (api_version, feature) = match n {
            0..=4 => (ApiVersion::V1_0_0, None),
            5..=9 => (ApiVersion::V1_1_0, None),
            10..=14 => (ApiVersion::V1_2_0, Some(ApiFeature::SyntheticPoRep)),
            15..=19 => (ApiVersion::V1_2_0, Some(ApiFeature::NonInteractivePoRep)),
            _ => return Err(FilecoinError::invalid(format!("registered_proof {n} is not a seal proof type (0-19)"))),
        };
        Ok(SealProof { id: n, size: SectorSize::from_registered(n), api_version, feature })
    }

    /// The name filecoin-proofs-api serializes (C1's `registered_proof` field).
    pub fn api_name(self) -> String {
        let suffix = match self.id / 5 {
            0 => "V1",
            1 => "V1_1",
            2 => "V1_1_Feat_SyntheticPoRep",
            _ => "V1_2_Feat_NonInteractivePoRep",
        };
        format!("StackedDrg{}{}", self.size.api_name(), suffix)
    }

    pub fn from_api_name(name: &str) -> Option<SealProof> {
        (0..20).filter_map(|n| SealProof::from_registered(n).ok()).find(|p| p.api_name() == name)
    }

    /// The 32-byte porep id: the registered proof number as u64 little-endian, then a
    /// zero nonce.
    pub fn porep_id(self) -> [u8; 32] {
        let mut id = [0u8; 32];
        id[..8].copy_from_slice(&self.id.to_le_bytes());
        id
    }

    pub fn circuit(self) -> Circuit {
        Circuit { kind: CircuitKind::Porep, size: self.size }
    }

    /// The V1_1 seal proof of `size` (registered 5–9), what Curio seals with. Every seal
    /// proof type of a size shares its circuit, parameters and update config, so this
    /// one stands for them where only the size matters.
    pub fn v1_1(size: SectorSize) -> SealProof {
        SealProof { id: 5 + size as u64, size, api_version: ApiVersion::V1_1_0, feature: None }
    }
}

/// A registered SnapDeals (empty sector update) proof: 0–4 by size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UpdateProof {
    pub size: SectorSize,
}

impl UpdateProof {
    pub fn from_registered(n: u64) -> Result<UpdateProof, FilecoinError> {
        if n > 4 {
            return Err(FilecoinError::invalid(format!("registered_proof {n} is not a sector update proof type (0-4)")));
        }
        Ok(UpdateProof { size: SectorSize::from_registered(n) })
    }

    pub fn circuit(self) -> Circuit {
        Circuit { kind: CircuitKind::Snap, size: self.size }
    }
}

/// Declares [`CircuitKind`] and its `ALL` from one list, so that no variant can be left
/// out of `ALL` (what iterates kinds — the daemon's engine kinds, the server's wire
/// mapping, the parameter checks — reads `ALL`). A kind's names and everything else it
/// is live in its module of `crate::kinds`.
macro_rules! circuit_kinds {
    ($($(#[$doc:meta])* $v:ident),+ $(,)?) => {
        /// The families of Filecoin circuits; each size has its own parameter file. Each
        /// is one module of `crate::kinds`.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum CircuitKind {
            $($(#[$doc])* $v),+
        }

        impl CircuitKind {
            pub const ALL: [CircuitKind; [$(CircuitKind::$v),+].len()] = [$(CircuitKind::$v),+];
        }
    };
}

circuit_kinds!(
    /// PoRep C2 (seal commit).
    Porep,
    /// SnapDeals (empty sector update).
    Snap,
    /// One WindowPoSt partition.
    WindowPost,
    /// WinningPoSt.
    WinningPost,
);

/// One Filecoin circuit: a kind at a sector size. Its id ("porep-32g", "wpost-2k", …)
/// names its parameter set in the engine's cache and in the status API.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Circuit {
    pub kind: CircuitKind,
    pub size: SectorSize,
}

/// Calls `$f::<Tree>($args)` with the merkle tree shape filecoin-proofs uses for
/// `$size`: 2 KiB, 8 MiB and 512 MiB share one shape, 32 GiB and 64 GiB have their own.
/// The one place the sector size becomes a type.
macro_rules! with_shape {
    ($size:expr, $f:ident $(::<$($g:ty),*>)?, $($args:expr),* $(,)?) => {
        match $size {
            $crate::registered::SectorSize::S2KiB
            | $crate::registered::SectorSize::S8MiB
            | $crate::registered::SectorSize::S512MiB => $f::<filecoin_proofs::SectorShapeBase $($(, $g)*)?>($($args),*),
            $crate::registered::SectorSize::S32GiB => $f::<filecoin_proofs::SectorShapeSub8 $($(, $g)*)?>($($args),*),
            $crate::registered::SectorSize::S64GiB => $f::<filecoin_proofs::SectorShapeTop2 $($(, $g)*)?>($($args),*),
        }
    };
}
pub(crate) use with_shape;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registered_numbers_follow_the_go_abi() {
        let p = PostProof::from_registered(3).unwrap();
        assert_eq!((p.window, p.size, p.api_version), (false, SectorSize::S32GiB, ApiVersion::V1_0_0));
        let p = PostProof::from_registered(13).unwrap();
        assert_eq!((p.window, p.size, p.api_version), (true, SectorSize::S32GiB, ApiVersion::V1_2_0));
        assert!(PostProof::from_registered(15).is_err());
        let s = SealProof::from_registered(8).unwrap();
        assert_eq!((s.size, s.api_version, s.feature), (SectorSize::S32GiB, ApiVersion::V1_1_0, None));
        assert_eq!(s.api_name(), "StackedDrg32GiBV1_1");
        assert_eq!(SealProof::from_api_name("StackedDrg2KiBV1_1"), SealProof::from_registered(5).ok());
        assert_eq!(SealProof::from_api_name("StackedDrg64GiBV1_2_Feat_NonInteractivePoRep").map(|p| p.id), Some(19));
        assert_eq!(&s.porep_id()[..9], &[8, 0, 0, 0, 0, 0, 0, 0, 0]);
        assert!(UpdateProof::from_registered(5).is_err());
        for n in 0..15 {
            assert_eq!(PostProof::from_registered(n).unwrap().registered().unwrap(), n, "registered PoSt proof {n}");
        }
        for size in SectorSize::ALL {
            assert_eq!(SealProof::from_registered(5 + size as u64).unwrap(), SealProof::v1_1(size));
        }
    }

    #[test]
    fn sector_sizes_parse_by_name_suffix_and_bytes() {
        assert_eq!(SectorSize::parse("32GiB"), Some(SectorSize::S32GiB));
        assert_eq!(SectorSize::parse("8m"), Some(SectorSize::S8MiB));
        assert_eq!(SectorSize::parse("2048"), Some(SectorSize::S2KiB));
        assert_eq!(SectorSize::parse("64gib"), Some(SectorSize::S64GiB));
        assert_eq!(SectorSize::parse("16GiB"), None);
        assert_eq!(SectorSize::parse("4096"), None);
    }

    #[test]
    fn a_sector_size_field_must_agree() {
        assert!(check_sector_size(0, SectorSize::S2KiB).is_ok());
        assert!(check_sector_size(2048, SectorSize::S2KiB).is_ok());
        let e = check_sector_size(8 << 20, SectorSize::S2KiB).unwrap_err().to_string();
        assert!(e.contains("sector_size") && e.contains("2KiB"), "{e}");
    }
}
