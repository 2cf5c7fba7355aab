//! Checks of a parameter directory: is every file a circuit needs there, whole, real
//! (not timing points) and, for the full check, the file filecoin-proofs publishes?
//!
//! Providers fetch the published files (`curio fetch-params`, `lotus fetch-params`)
//! into `FIL_PROOFS_PARAMETER_CACHE`; a download cut short or a damaged disk shows up
//! here, by file name, before a proof fails on it. Two depths:
//! - [`header_check`]: presence, and the length the file's own header implies (its
//!   counts; the exact length, since the layout has no padding), and the timing marker
//!   (`cuzk setup --timing-params` writes random points under the real names, with an
//!   α no setup can produce). Reads a few pages: the daemon runs it at start and on
//!   PreloadSRS.
//! - [`full_check`]: that, then the content digest against the one published in
//!   storage-proofs' parameters.json (the same table filecoin-proofs ships): BLAKE2b-512
//!   of the whole file, its hex cut to 32 characters, as storage-proofs'
//!   `verify_production_entry` computes it. Reads every byte (47 GB for PoRep 32 GiB).

use std::collections::BTreeMap;
use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};

use cuzk_groth16::format::{decode_vk, map_file, FormatError, ParamsLayout, PointCheck};
use cuzk_groth16::Progress;

use crate::error::FilecoinError;
use crate::Circuit;

/// Which of a circuit's two files.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FileRole {
    /// `<stem>.params`: the proving key (tens of GB at 32 GiB).
    Params,
    /// `<stem>.vk`: the verifying key (filecoin-proofs' verifiers read it).
    Vk,
}

/// What a check found of one file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Its content digest is the published one.
    Verified,
    /// Present, as long as its header says, real points by its marker; the content was
    /// not read (the header check).
    Complete,
    /// Complete, but storage-proofs' table has no digest under its name: the content
    /// cannot be checked.
    Unpublished,
    Missing,
    /// Shorter than its header says (a download cut short).
    Truncated {
        detail: String,
    },
    /// Malformed, longer than its header says, or a digest that is not the published one.
    Corrupt {
        detail: String,
    },
    /// Random timing points (`cuzk setup --timing-params`): never for real proofs.
    TimingPoints,
    /// A setup of cuzk's own (`cuzk setup --circuit`), recorded in the directory's
    /// [`OWN_SETUPS_FILE`] when it was made: real parameters, but not Filecoin's
    /// ceremony's, so proofs verify against its own .vk only, never on chain. `hashed`:
    /// the content's digest is the one recorded.
    OwnSetup {
        hashed: bool,
    },
    /// Present but could not be read (permissions, I/O error).
    Unreadable {
        detail: String,
    },
}

impl Verdict {
    /// Whether a daemon can prove with this file; timing points only when it is a
    /// timing-only daemon.
    pub fn usable(&self, timing_points_allowed: bool) -> bool {
        match self {
            Verdict::Verified | Verdict::Complete | Verdict::Unpublished | Verdict::OwnSetup { .. } => true,
            Verdict::TimingPoints => timing_points_allowed,
            _ => false,
        }
    }

    /// One word for tables: ok, complete, unpublished, missing, truncated, corrupt,
    /// timing, unreadable.
    pub fn word(&self) -> &'static str {
        match self {
            Verdict::Verified => "ok",
            Verdict::Complete => "complete",
            Verdict::Unpublished => "unpublished",
            Verdict::Missing => "missing",
            Verdict::Truncated { .. } => "truncated",
            Verdict::Corrupt { .. } => "corrupt",
            Verdict::TimingPoints => "timing",
            Verdict::OwnSetup { .. } => "own",
            Verdict::Unreadable { .. } => "unreadable",
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Verdict::Verified => f.write_str("ok: the published digest"),
            Verdict::Complete => f.write_str("complete (size checked, content not hashed)"),
            Verdict::Unpublished => f.write_str("complete, but no published digest under this name: content not checked"),
            Verdict::Missing => f.write_str("missing"),
            Verdict::Truncated { detail } => write!(f, "truncated: {detail}"),
            Verdict::Corrupt { detail } => write!(f, "corrupt: {detail}"),
            Verdict::TimingPoints => {
                f.write_str("timing parameters (random points from `cuzk setup --timing-params`): proofs made with them never verify")
            }
            Verdict::OwnSetup { hashed } => write!(
                f,
                "a setup of our own (`cuzk setup`, recorded in {OWN_SETUPS_FILE}{}): proofs verify against its .vk only, never on chain",
                if *hashed { "; content digest as recorded" } else { "; content not hashed" }
            ),
            Verdict::Unreadable { detail } => write!(f, "unreadable: {detail}"),
        }
    }
}

/// One file of one circuit and what was found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileCheck {
    pub circuit: Circuit,
    pub role: FileRole,
    pub path: PathBuf,
    pub verdict: Verdict,
}

impl FileCheck {
    /// The file's name in the parameter directory (the key of the digest table).
    pub fn file_name(&self) -> String {
        self.path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
    }
}

impl fmt::Display for FileCheck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.verdict)
    }
}

/// The circuit's two files in `dir`.
pub fn circuit_files(circuit: Circuit, dir: &Path) -> Result<[(FileRole, PathBuf); 2], FilecoinError> {
    Ok([(FileRole::Params, circuit.params_path(dir)?), (FileRole::Vk, circuit.vk_path(dir)?)])
}

/// The header check of one file: presence, the length its header implies, the
/// timing marker. [`Verdict::Complete`] when all pass.
pub fn header_check(path: &Path, role: FileRole) -> Verdict {
    let len = match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => return Verdict::Unreadable { detail: "it is a directory, not a file".into() },
        Ok(m) => m.len(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Verdict::Missing,
        Err(e) => return Verdict::Unreadable { detail: e.to_string() },
    };
    if len == 0 {
        return Verdict::Truncated { detail: "the file is empty".into() };
    }
    let vk = match role {
        FileRole::Params => map_file(path).and_then(|data| ParamsLayout::parse(&data, PointCheck::OnCurve)).map(|(vk, _)| vk),
        FileRole::Vk => std::fs::read(path)
            .map_err(|source| FormatError::Io { path: path.to_owned(), source })
            .and_then(|data| decode_vk(&data, PointCheck::OnCurve)),
    };
    match vk {
        Ok(vk) if vk.is_timing_only() => Verdict::TimingPoints,
        Ok(_) => Verdict::Complete,
        Err(FormatError::Truncated { section, offset, needed, .. }) => Verdict::Truncated {
            detail: format!("{len} bytes, but section {section} needs {needed} bytes from offset {offset} (at least {} in all)", offset + needed),
        },
        Err(FormatError::Io { source, .. }) => Verdict::Unreadable { detail: source.to_string() },
        Err(e) => Verdict::Corrupt { detail: e.to_string() },
    }
}

/// The header check of every file `circuit` needs in `dir`, naming the ones cuzk's
/// own setup made.
pub fn header_check_circuit(circuit: Circuit, dir: &Path) -> Result<Vec<FileCheck>, FilecoinError> {
    let own = DigestTable::own(dir)?;
    Ok(circuit_files(circuit, dir)?
        .into_iter()
        .map(|(role, path)| {
            let verdict = header_check_own(&path, role, &own);
            FileCheck { circuit, role, path, verdict }
        })
        .collect())
}

/// [`header_check`], a complete file that `own` lists named as a setup of our own.
pub fn header_check_own(path: &Path, role: FileRole, own: &DigestTable) -> Verdict {
    match header_check(path, role) {
        Verdict::Complete if own.get(&file_name_of(path)).is_some() => Verdict::OwnSetup { hashed: false },
        other => other,
    }
}

fn file_name_of(path: &Path) -> String {
    path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
}

/// The file in a parameter directory where `cuzk setup --circuit` records the files it
/// made, in parameters.json's layout: they carry Filecoin's names but not its
/// ceremony's points, and every check names them as our own.
pub const OWN_SETUPS_FILE: &str = "cuzk-own-setups.json";

/// The files of `checks` a daemon cannot prove with, as one message naming each and
/// what to do; None when every one is usable.
pub fn problems(checks: &[FileCheck], timing_points_allowed: bool) -> Option<String> {
    let bad: Vec<&FileCheck> = checks.iter().filter(|c| !c.verdict.usable(timing_points_allowed)).collect();
    if bad.is_empty() {
        return None;
    }
    let mut circuits: Vec<String> = bad.iter().map(|c| c.circuit.id()).collect();
    circuits.dedup();
    let files: Vec<String> = bad.iter().map(|c| c.to_string()).collect();
    let timing = bad.iter().any(|c| c.verdict == Verdict::TimingPoints);
    let what = if timing && bad.iter().all(|c| c.verdict == Verdict::TimingPoints) {
        "put the published files there instead (a timing-only daemon, daemon.timing_only, proves with timing parameters)"
    } else {
        "fetch the published files into that directory (`curio fetch-params <sector size>` or `lotus fetch-params <sector size>`)"
    };
    Some(format!(
        "parameter files of {} are not usable: {}; {what}, then `cuzk params check --circuit {}` verifies them",
        circuits.join(", "),
        files.join("; "),
        circuits.join(",")
    ))
}

/// Published content digests by file name.
#[derive(Clone, Debug, Default)]
pub struct DigestTable {
    by_name: BTreeMap<String, String>,
}

/// An entry of a parameters.json file (its other fields are not needed here).
#[derive(serde::Deserialize)]
struct Entry {
    digest: String,
}

impl DigestTable {
    /// The table storage-proofs ships (its parameters.json, the same as
    /// filecoin-proofs'): the digests of the published files, by name.
    pub fn published() -> Self {
        let by_name = storage_proofs_core::parameter_cache::PARAMETERS.iter().map(|(name, d)| (name.clone(), d.digest.clone())).collect();
        DigestTable { by_name }
    }

    /// Adds (or replaces) the entries of a JSON document in parameters.json's layout
    /// (`{"<file name>": {"digest": "<32 hex>", …}, …}`).
    pub fn add_json(&mut self, text: &str) -> Result<(), FilecoinError> {
        let entries: BTreeMap<String, Entry> =
            serde_json::from_str(text).map_err(|e| FilecoinError::Parameters(format!("not a parameters.json document: {e}")))?;
        for (name, e) in entries {
            if e.digest.len() != 32 || !e.digest.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(FilecoinError::Parameters(format!("{name}: digest {:?} is not 32 hex digits", e.digest)));
            }
            self.by_name.insert(name, e.digest.to_ascii_lowercase());
        }
        Ok(())
    }

    /// The files cuzk's own setup made in `dir` ([`OWN_SETUPS_FILE`]; empty when it has
    /// none).
    pub fn own(dir: &Path) -> Result<Self, FilecoinError> {
        let path = dir.join(OWN_SETUPS_FILE);
        let mut table = DigestTable::default();
        match std::fs::read_to_string(&path) {
            // It says which files are setups of our own: without it they would be judged
            // against the published digests and called corrupt, so it is never skipped.
            Ok(text) => table.add_json(&text).map_err(|e| {
                FilecoinError::Parameters(format!(
                    "{} is damaged ({e}): it records which parameter files are setups of our own; restore it or remove it (a setup of our own made again records itself)",
                    path.display()
                ))
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(FilecoinError::Parameters(format!("reading {}: {e}", path.display()))),
        }
        Ok(table)
    }

    /// Records `files` (each hashed now) in `dir`'s [`OWN_SETUPS_FILE`] as made by
    /// cuzk's own setup, beside the entries already there.
    pub fn record_own(dir: &Path, files: &[&Path], progress: &dyn Progress) -> Result<(), FilecoinError> {
        let path = dir.join(OWN_SETUPS_FILE);
        let mut entries: BTreeMap<String, serde_json::Value> = match std::fs::read_to_string(&path) {
            Ok(text) => serde_json::from_str(&text).map_err(|e| FilecoinError::Parameters(format!("{}: {e}", path.display())))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
            Err(e) => return Err(FilecoinError::Parameters(format!("reading {}: {e}", path.display()))),
        };
        for f in files {
            let digest = file_digest(f, progress).map_err(|e| FilecoinError::Parameters(format!("hashing {}: {e}", f.display())))?;
            entries.insert(
                file_name_of(f),
                serde_json::json!({ "digest": digest, "made_by": "cuzk setup (a setup of our own, not Filecoin's ceremony)" }),
            );
        }
        let text = serde_json::to_string_pretty(&entries).map_err(|e| FilecoinError::Parameters(format!("{}: {e}", path.display())))?;
        let tmp = path.with_extension("json.tmp");
        std::fs::write(&tmp, text + "\n")
            .and_then(|()| std::fs::rename(&tmp, &path))
            .map_err(|e| FilecoinError::Parameters(format!("writing {}: {e}", path.display())))
    }

    pub fn get(&self, file_name: &str) -> Option<&str> {
        self.by_name.get(file_name).map(String::as_str)
    }

    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }
}

/// The published digest of a file: BLAKE2b-512 of its bytes, the first 32 hex digits.
/// `progress` gets a stage of the file's length and advances as bytes are read.
pub fn file_digest(path: &Path, progress: &dyn Progress) -> Result<String, std::io::Error> {
    let mut file = std::fs::File::open(path)?;
    let len = file.metadata()?.len();
    progress.stage(&path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(), len);
    let mut state = blake2b_simd::State::new();
    let mut buf = vec![0u8; 8 << 20];
    loop {
        let n = match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        state.update(&buf[..n]);
        progress.advance(n as u64);
    }
    Ok(state.finalize().to_hex()[..32].to_string())
}

/// The full check of one file: the header check, then (when it passes) the content
/// digest against the one our own setup recorded (`own`), else against `table`.
pub fn full_check(path: &Path, role: FileRole, table: &DigestTable, own: &DigestTable, progress: &dyn Progress) -> Verdict {
    match header_check(path, role) {
        Verdict::Complete => {}
        other => return other,
    }
    let name = file_name_of(path);
    if let Some(recorded) = own.get(&name) {
        return match file_digest(path, progress) {
            Ok(d) if d == recorded => Verdict::OwnSetup { hashed: true },
            Ok(d) => Verdict::Corrupt { detail: format!("content digest {d}, recorded by our own setup {recorded}") },
            Err(e) => Verdict::Unreadable { detail: e.to_string() },
        };
    }
    let Some(published) = table.get(&name) else {
        return Verdict::Unpublished;
    };
    match file_digest(path, progress) {
        Ok(d) if d == published => Verdict::Verified,
        Ok(d) => Verdict::Corrupt { detail: format!("content digest {d}, published {published}") },
        Err(e) => Verdict::Unreadable { detail: e.to_string() },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cuzk_groth16::generator::{generate_parameters, timing_parameters};
    use cuzk_groth16::synthetic::SyntheticShape;
    use cuzk_groth16::NoProgress;
    use rand::SeedableRng;

    /// A digest computed by an independent BLAKE2b (Python's hashlib):
    /// `hashlib.blake2b(b"cuzk").hexdigest()[:32]`.
    #[test]
    fn digests_are_truncated_blake2b_512() {
        let dir = tempfile_dir();
        let p = dir.join("x");
        std::fs::write(&p, b"cuzk").unwrap();
        assert_eq!(file_digest(&p, &NoProgress).unwrap(), "4cbfb73ab389aa84e65962bcd926d6e8");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Every Filecoin circuit's two files have a published digest under the names
    /// cuzk derives, so the full check of real files is never "unpublished".
    #[test]
    fn the_published_table_names_every_circuits_files() {
        let table = DigestTable::published();
        assert!(table.len() >= 40, "{} entries", table.len());
        for kind in crate::CircuitKind::ALL {
            for size in crate::SectorSize::ALL {
                let c = Circuit { kind, size };
                for (_, path) in circuit_files(c, Path::new("/p")).unwrap() {
                    let name = path.file_name().unwrap().to_string_lossy().into_owned();
                    let d = table.get(&name).unwrap_or_else(|| panic!("{c}: {name} is not in the published table"));
                    assert_eq!(d.len(), 32);
                }
            }
        }
    }

    /// Files our own setup recorded are named so by both checks; a changed byte is
    /// corrupt against the recorded digest, and a file it did not record is checked
    /// against the published table as before.
    #[test]
    fn own_setups_are_named_and_checked_against_their_record() {
        let dir = tempfile_dir();
        let p = generate_parameters(SyntheticShape::for_domain(5).circuit(0), &mut rand_chacha::ChaCha20Rng::seed_from_u64(4), &NoProgress).unwrap();
        let path = dir.join("v28-own.params");
        cuzk_groth16::format::save(&p, &path).unwrap();
        let vk = path.with_extension("vk");
        DigestTable::record_own(&dir, &[&path, &vk], &NoProgress).unwrap();
        let own = DigestTable::own(&dir).unwrap();
        let published = DigestTable::published();
        assert_eq!(header_check_own(&path, FileRole::Params, &own), Verdict::OwnSetup { hashed: false });
        assert_eq!(full_check(&path, FileRole::Params, &published, &own, &NoProgress), Verdict::OwnSetup { hashed: true });
        assert_eq!(full_check(&vk, FileRole::Vk, &published, &own, &NoProgress), Verdict::OwnSetup { hashed: true });
        assert!(Verdict::OwnSetup { hashed: true }.to_string().contains("never on chain"));
        let mut bytes = std::fs::read(&path).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        let v = full_check(&path, FileRole::Params, &published, &own, &NoProgress);
        assert!(matches!(&v, Verdict::Corrupt { detail } if detail.contains("recorded by our own setup")), "{v:?}");
        assert_eq!(header_check_own(&path, FileRole::Params, &DigestTable::default()), Verdict::Complete);
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn tempfile_dir() -> PathBuf {
        use std::sync::atomic::{AtomicU32, Ordering};
        static N: AtomicU32 = AtomicU32::new(0);
        let d = std::env::temp_dir().join(format!("cuzk-param-check-{}-{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed)));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn verdicts_of_whole_cut_grown_damaged_and_timing_files() {
        let dir = tempfile_dir();
        let shape = SyntheticShape::for_domain(6);
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(5);
        let params = generate_parameters(shape.circuit(0), &mut rng, &NoProgress).unwrap();
        let good = dir.join("good.params");
        cuzk_groth16::format::save(&params, &good).unwrap();
        let bytes = std::fs::read(&good).unwrap();
        assert_eq!(header_check(&good, FileRole::Params), Verdict::Complete);
        assert_eq!(header_check(&good.with_extension("vk"), FileRole::Vk), Verdict::Complete);
        assert_eq!(header_check(&dir.join("none.params"), FileRole::Params), Verdict::Missing);

        let cut = dir.join("cut.params");
        std::fs::write(&cut, &bytes[..bytes.len() - 1]).unwrap();
        let v = header_check(&cut, FileRole::Params);
        assert!(
            matches!(&v, Verdict::Truncated { detail } if detail.contains("section b_g2") && detail.contains(&format!("at least {}", bytes.len()))),
            "{v}"
        );
        std::fs::write(&cut, &bytes[..100]).unwrap();
        assert!(matches!(header_check(&cut, FileRole::Params), Verdict::Truncated { .. }));
        std::fs::write(&cut, b"").unwrap();
        assert!(matches!(header_check(&cut, FileRole::Params), Verdict::Truncated { .. }));

        let grown = dir.join("grown.params");
        std::fs::write(&grown, [&bytes[..], &[0u8; 7]].concat()).unwrap();
        assert!(matches!(header_check(&grown, FileRole::Params), Verdict::Corrupt { detail } if detail.contains("7 unexpected bytes")));

        // A byte changed inside a query: the header check passes, the digest does not.
        let damaged = dir.join("damaged.params");
        let mut d = bytes.clone();
        let mid = d.len() - 50;
        d[mid] ^= 0x01;
        std::fs::write(&damaged, &d).unwrap();
        assert_eq!(header_check(&damaged, FileRole::Params), Verdict::Complete);
        let digest = file_digest(&good, &NoProgress).unwrap();
        let mut table = DigestTable::default();
        let json =
            format!(r#"{{"good.params": {{"cid": "x", "digest": "{digest}", "sector_size": 2048}}, "damaged.params": {{"digest": "{digest}"}}}}"#);
        table.add_json(&json).unwrap();
        assert_eq!(full_check(&good, FileRole::Params, &table, &DigestTable::default(), &NoProgress), Verdict::Verified);
        assert!(
            matches!(full_check(&damaged, FileRole::Params, &table, &DigestTable::default(), &NoProgress), Verdict::Corrupt { detail } if detail.contains("published"))
        );
        assert_eq!(full_check(&grown, FileRole::Params, &table, &DigestTable::default(), &NoProgress).word(), "corrupt");
        assert_eq!(full_check(&good.with_extension("vk"), FileRole::Vk, &table, &DigestTable::default(), &NoProgress), Verdict::Unpublished);
        assert!(table.add_json(r#"{"a.params": {"digest": "xyz"}}"#).is_err());

        let timing = dir.join("timing.params");
        let c = cuzk_groth16::synthesize(shape.circuit(0)).unwrap();
        cuzk_groth16::format::save(&timing_parameters(&c, &mut rng, &NoProgress), &timing).unwrap();
        assert_eq!(header_check(&timing, FileRole::Params), Verdict::TimingPoints);
        assert_eq!(header_check(&timing.with_extension("vk"), FileRole::Vk), Verdict::TimingPoints);
        assert_eq!(full_check(&timing, FileRole::Params, &table, &DigestTable::default(), &NoProgress), Verdict::TimingPoints);
        assert!(!Verdict::TimingPoints.usable(false) && Verdict::TimingPoints.usable(true));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
