//! Completed proofs kept on disk under the daemon's state directory, so a restart does
//! not throw away the GPU time of a proof nobody has fetched yet. One small JSON file
//! per completed job (`<job id>.proof.json`: ids, the request's digest, timings, the
//! proof and its SHA-256), written atomically; kept as long as the job stays
//! answerable in memory (`job_retention`), read back at start.
//!
//! Queued and running work is not kept: its input is the client's to resubmit (the
//! request id is free after a restart, so a resubmission starts a new job).

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::request::{JobId, JobOutcome, JobTimings, ProofKind};

/// The record's layout; a file of another version is set aside, not misread.
const FORMAT: u32 = 1;
const SUFFIX: &str = ".proof.json";

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("state directory {dir}: {source}")]
    Dir { dir: PathBuf, source: std::io::Error },
    #[error("state directory {dir}: {why}")]
    Unusable { dir: PathBuf, why: String },
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path}: {why}")]
    Corrupt { path: PathBuf, why: String },
}

/// A completed job as stored: enough to answer AwaitProof and a resubmission of its
/// request id after a restart.
#[derive(Clone, Debug, PartialEq)]
pub struct StoredProof {
    pub job_id: JobId,
    pub request_id: String,
    pub request_digest: [u8; 32],
    pub kind: ProofKind,
    pub proof: Vec<u8>,
    pub timings: JobTimings,
    /// When the job completed, as wall-clock time (survives the restart).
    pub finished: SystemTime,
}

#[derive(Serialize, Deserialize)]
struct Record {
    format: u32,
    job_id: String,
    request_id: String,
    request_digest: String,
    kind: String,
    finished_unix_ms: u64,
    queue_wait_ms: u64,
    parameter_load_ms: u64,
    synthesis_ms: u64,
    gpu_compute_ms: u64,
    total_ms: u64,
    proof: String,
    proof_sha256: String,
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if s.len() % 2 != 0 {
        return None;
    }
    (0..s.len()).step_by(2).map(|i| s.get(i..i + 2).and_then(|d| u8::from_str_radix(d, 16).ok())).collect()
}

/// A job id as a file name: only ids of hex digits (all the engine makes) are stored,
/// so no id can name a path elsewhere.
fn file_stem(id: &JobId) -> Option<&str> {
    let ok = !id.0.is_empty() && id.0.len() <= 64 && id.0.bytes().all(|b| b.is_ascii_hexdigit());
    ok.then_some(id.0.as_str())
}

impl StoredProof {
    /// The record of a completed job's outcome; None for one without a proof (a
    /// timing-only job: there is nothing to return after a restart).
    pub fn of(outcome: &JobOutcome, request_id: &str, request_digest: [u8; 32], kind: ProofKind) -> Option<StoredProof> {
        (!outcome.proof.is_empty()).then(|| StoredProof {
            job_id: outcome.job_id.clone(),
            request_id: request_id.to_string(),
            request_digest,
            kind,
            proof: outcome.proof.clone(),
            timings: outcome.timings,
            finished: SystemTime::now(),
        })
    }

    fn to_json(&self) -> Vec<u8> {
        let t = self.timings;
        let r = Record {
            format: FORMAT,
            job_id: self.job_id.0.clone(),
            request_id: self.request_id.clone(),
            request_digest: hex(&self.request_digest),
            kind: self.kind.name().to_string(),
            finished_unix_ms: self.finished.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64),
            queue_wait_ms: t.queue_wait_ms,
            parameter_load_ms: t.parameter_load_ms,
            synthesis_ms: t.synthesis_ms,
            gpu_compute_ms: t.gpu_compute_ms,
            total_ms: t.total_ms,
            proof: hex(&self.proof),
            proof_sha256: hex(&Sha256::digest(&self.proof)),
        };
        // A struct of strings and numbers always serializes.
        serde_json::to_vec_pretty(&r).unwrap_or_default()
    }

    fn from_json(bytes: &[u8]) -> Result<StoredProof, String> {
        let r: Record = serde_json::from_slice(bytes).map_err(|e| format!("not a stored proof: {e}"))?;
        if r.format != FORMAT {
            return Err(format!("format {} (this cuzk reads {FORMAT})", r.format));
        }
        let proof = unhex(&r.proof).ok_or("the proof is not hex")?;
        if hex(&Sha256::digest(&proof)) != r.proof_sha256 {
            return Err("the proof does not match its SHA-256".into());
        }
        let request_digest: [u8; 32] = unhex(&r.request_digest).and_then(|d| d.try_into().ok()).ok_or("the request digest is not 32 hex bytes")?;
        let kind = ProofKind::from_name(&r.kind).ok_or_else(|| format!("unknown proof kind {:?}", r.kind))?;
        let job_id = JobId(r.job_id);
        file_stem(&job_id).ok_or("the job id is not hex")?;
        Ok(StoredProof {
            job_id,
            request_id: r.request_id,
            request_digest,
            kind,
            proof,
            timings: JobTimings {
                queue_wait_ms: r.queue_wait_ms,
                parameter_load_ms: r.parameter_load_ms,
                synthesis_ms: r.synthesis_ms,
                gpu_compute_ms: r.gpu_compute_ms,
                total_ms: r.total_ms,
            },
            finished: UNIX_EPOCH + Duration::from_millis(r.finished_unix_ms),
        })
    }
}

/// What [`ProofStore::load`] found.
#[derive(Debug, Default)]
pub struct Loaded {
    /// Still within the retention, oldest first.
    pub proofs: Vec<StoredProof>,
    /// Older than the retention: removed.
    pub expired: usize,
    /// Unreadable files, renamed to `*.corrupt` beside the others for inspection.
    pub set_aside: Vec<(PathBuf, String)>,
}

/// The directory of stored proofs.
#[derive(Debug)]
pub struct ProofStore {
    dir: PathBuf,
}

impl ProofStore {
    /// Opens the state directory, creating it (mode 0700: job ids are what let a client
    /// await or cancel a job) when missing, and checks that it takes files. An existing
    /// directory keeps its mode (it may be shared); one that others can read is logged.
    pub fn open(dir: &Path) -> Result<ProofStore, StoreError> {
        let err = |source| StoreError::Dir { dir: dir.to_path_buf(), source };
        ProofStore::check(dir)?;
        if !dir.exists() {
            fs::create_dir_all(dir).map_err(err)?;
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                fs::set_permissions(dir, fs::Permissions::from_mode(0o700)).map_err(err)?;
            }
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = fs::metadata(dir).map_err(err)?.permissions().mode();
            if mode & 0o007 != 0 {
                tracing::warn!(dir = %dir.display(), mode = format!("{:o}", mode & 0o777), "the state directory is open to other users, who could read job ids from it");
            }
        }
        let probe = dir.join(".cuzk-write-check");
        fs::write(&probe, b"").and_then(|_| fs::remove_file(&probe)).map_err(err)?;
        Ok(ProofStore { dir: dir.to_path_buf() })
    }

    /// Whether [`ProofStore::open`] could use `dir`, without making it: an existing
    /// directory that takes a file, or a path whose nearest existing ancestor is a
    /// directory that takes a new one (a file in the way, a read-only file system or
    /// /proc refused here). `--check-config` and the start both ask this.
    pub fn check(dir: &Path) -> Result<(), StoreError> {
        let unusable = |why: String| StoreError::Unusable { dir: dir.to_path_buf(), why };
        let mut existing = dir;
        while !existing.exists() {
            existing = match existing.parent() {
                Some(p) if !p.as_os_str().is_empty() => p,
                _ => Path::new("."),
            };
        }
        if !existing.is_dir() {
            return Err(unusable(if existing == dir {
                "is not a directory (a file is in the way)".into()
            } else {
                format!("cannot be made: {} is not a directory", existing.display())
            }));
        }
        let (probe, what) = if existing == dir {
            (dir.join(".cuzk-write-check"), "cannot write a file in it")
        } else {
            (existing.join(format!(".cuzk-state-check-{}", std::process::id())), "cannot be made")
        };
        let tried = if existing == dir {
            fs::write(&probe, b"").and_then(|_| fs::remove_file(&probe))
        } else {
            fs::create_dir(&probe).and_then(|_| fs::remove_dir(&probe))
        };
        tried.map_err(|e| unusable(format!("{what} ({e}, in {})", existing.display())))
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path(&self, id: &JobId) -> Option<PathBuf> {
        file_stem(id).map(|s| self.dir.join(format!("{s}{SUFFIX}")))
    }

    /// Writes a record: to a temporary file, synced, then renamed over its name and the
    /// directory synced, so a crash leaves the old state or the new, never half a file.
    pub fn save(&self, p: &StoredProof) -> Result<(), StoreError> {
        let Some(path) = self.path(&p.job_id) else {
            return Err(StoreError::Corrupt { path: self.dir.clone(), why: format!("job id {:?} is not hex; not stored", p.job_id.0) });
        };
        let tmp = path.with_extension("tmp");
        let io = |source| StoreError::Io { path: tmp.clone(), source };
        let mut f = fs::File::create(&tmp).map_err(io)?;
        f.write_all(&p.to_json()).and_then(|_| f.sync_all()).map_err(io)?;
        drop(f);
        fs::rename(&tmp, &path).map_err(|source| StoreError::Io { path: path.clone(), source })?;
        // The rename itself is durable once the directory is synced.
        fs::File::open(&self.dir).and_then(|d| d.sync_all()).map_err(|source| StoreError::Io { path: self.dir.clone(), source })
    }

    /// Removes a job's record (it has expired); a missing one is fine.
    pub fn remove(&self, id: &JobId) -> Result<(), StoreError> {
        let Some(path) = self.path(id) else { return Ok(()) };
        match fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(StoreError::Io { path, source: e }),
            _ => Ok(()),
        }
    }

    /// Reads every record: those completed within `keep` come back, older ones are
    /// removed, unreadable ones set aside (a daemon starts whatever it finds here).
    /// Leftover temporary files (a crash mid-write) are removed.
    pub fn load(&self, keep: Duration) -> Result<Loaded, StoreError> {
        let dir_err = |source| StoreError::Dir { dir: self.dir.clone(), source };
        let mut out = Loaded::default();
        let now = SystemTime::now();
        for entry in fs::read_dir(&self.dir).map_err(dir_err)? {
            let path = entry.map_err(dir_err)?.path();
            let Some(name) = path.file_name().and_then(|n| n.to_str()).map(str::to_string) else { continue };
            if name.ends_with(".proof.tmp") {
                let _ = fs::remove_file(&path);
                continue;
            }
            if !name.ends_with(SUFFIX) {
                continue;
            }
            let read = fs::read(&path).map_err(|e| e.to_string()).and_then(|b| StoredProof::from_json(&b));
            let read = read.and_then(|p| {
                // The name is the id: a record renamed by hand must not answer for another.
                if name == format!("{}{SUFFIX}", p.job_id.0) {
                    Ok(p)
                } else {
                    Err(format!("the file name does not match job id {}", p.job_id.label()))
                }
            });
            match read {
                Ok(p) if now.duration_since(p.finished).unwrap_or_default() > keep => {
                    fs::remove_file(&path).map_err(|source| StoreError::Io { path: path.clone(), source })?;
                    out.expired += 1;
                }
                Ok(p) => out.proofs.push(p),
                Err(why) => {
                    let aside = path.with_extension("corrupt");
                    fs::rename(&path, &aside).map_err(|source| StoreError::Io { path: path.clone(), source })?;
                    out.set_aside.push((aside, why));
                }
            }
        }
        out.proofs.sort_by_key(|p| p.finished);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cuzk_filecoin::CircuitKind;

    fn proof(id: &str, age: Duration) -> StoredProof {
        StoredProof {
            job_id: JobId(id.into()),
            request_id: format!("req-{id}"),
            request_digest: [7; 32],
            kind: ProofKind::Filecoin(CircuitKind::Porep),
            proof: (0..=255u8).collect(),
            timings: JobTimings { queue_wait_ms: 1, parameter_load_ms: 2, synthesis_ms: 3, gpu_compute_ms: 4, total_ms: 5 },
            finished: SystemTime::now() - age,
        }
    }

    #[test]
    fn records_come_back_expired_ones_go_and_damaged_ones_are_set_aside() {
        let dir = tempfile::tempdir().unwrap();
        let store = ProofStore::open(&dir.path().join("state")).unwrap();
        let kept = proof("00aa", Duration::from_secs(10));
        store.save(&kept).unwrap();
        store.save(&proof("00bb", Duration::from_secs(7200))).unwrap();
        store.save(&proof("00cc", Duration::ZERO)).unwrap();
        // A bit flipped in the proof, a cut file, and a record under another job's name.
        let cc = store.path(&JobId("00cc".into())).unwrap();
        let text = fs::read_to_string(&cc).unwrap().replacen("\"proof\": \"00", "\"proof\": \"01", 1);
        fs::write(&cc, text).unwrap();
        store.save(&proof("00dd", Duration::ZERO)).unwrap();
        let dd = store.path(&JobId("00dd".into())).unwrap();
        let bytes = fs::read(&dd).unwrap();
        fs::write(&dd, &bytes[..bytes.len() / 2]).unwrap();
        store.save(&proof("00ee", Duration::ZERO)).unwrap();
        fs::rename(store.path(&JobId("00ee".into())).unwrap(), dir.path().join("state/00ff.proof.json")).unwrap();
        fs::write(dir.path().join("state/00ab.proof.tmp"), b"half").unwrap();

        let loaded = store.load(Duration::from_secs(3600)).unwrap();
        assert_eq!(loaded.proofs.len(), 1);
        let back = &loaded.proofs[0];
        assert_eq!(
            (&back.job_id, &back.request_id, back.request_digest, back.kind),
            (&kept.job_id, &kept.request_id, kept.request_digest, kept.kind)
        );
        assert_eq!((&back.proof, back.timings), (&kept.proof, kept.timings));
        assert!(back.finished.duration_since(kept.finished).unwrap_or_else(|e| e.duration()) < Duration::from_millis(2));
        assert_eq!(loaded.expired, 1);
        let mut why: Vec<String> = loaded.set_aside.iter().map(|(_, w)| w.clone()).collect();
        why.sort();
        assert_eq!(why.len(), 3, "{why:?}");
        assert!(why.iter().any(|w| w.contains("SHA-256")), "{why:?}");
        assert!(why.iter().any(|w| w.contains("not a stored proof")), "{why:?}");
        assert!(why.iter().any(|w| w.contains("file name")), "{why:?}");
        // What was set aside is not read again; what expired is gone; no temporary left.
        let again = store.load(Duration::from_secs(3600)).unwrap();
        assert_eq!((again.proofs.len(), again.expired, again.set_aside.len()), (1, 0, 0));
        let mut names: Vec<String> = fs::read_dir(store.dir()).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        names.sort();
        assert_eq!(names, ["00aa.proof.json", "00cc.proof.corrupt", "00dd.proof.corrupt", "00ff.proof.corrupt"]);
        store.remove(&kept.job_id).unwrap();
        store.remove(&kept.job_id).unwrap();
        assert!(store.load(Duration::from_secs(3600)).unwrap().proofs.is_empty());
    }

    #[cfg(unix)]
    #[test]
    fn a_new_directory_is_private_and_an_existing_one_keeps_its_mode() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let new = dir.path().join("a/b");
        ProofStore::open(&new).unwrap();
        assert_eq!(fs::metadata(&new).unwrap().permissions().mode() & 0o777, 0o700);
        let shared = dir.path().join("shared");
        fs::create_dir(&shared).unwrap();
        fs::set_permissions(&shared, fs::Permissions::from_mode(0o755)).unwrap();
        ProofStore::open(&shared).unwrap();
        assert_eq!(fs::metadata(&shared).unwrap().permissions().mode() & 0o777, 0o755);
    }

    #[test]
    fn ids_that_are_not_hex_never_become_paths() {
        let dir = tempfile::tempdir().unwrap();
        let store = ProofStore::open(dir.path()).unwrap();
        for id in ["../x", "a/b", "", "zz"] {
            assert!(store.save(&proof(id, Duration::ZERO)).is_err(), "{id}");
        }
    }

    #[test]
    fn a_directory_that_cannot_be_made_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("file");
        fs::write(&file, b"").unwrap();
        let e = ProofStore::open(&file.join("state")).unwrap_err().to_string();
        assert!(e.starts_with("state directory") && e.contains("file/state"), "{e}");
    }

    #[test]
    fn the_check_refuses_what_open_refuses_and_makes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("file");
        fs::write(&file, b"").unwrap();
        // A file where the directory should be, and a file in the path above it.
        for (path, says) in [(file.clone(), "is not a directory"), (file.join("state"), "cannot be made")] {
            let checked = ProofStore::check(&path).unwrap_err().to_string();
            assert!(checked.contains(says), "{checked}");
            assert!(ProofStore::open(&path).is_err());
        }
        // Under /proc nothing can be made (as root too).
        if Path::new("/proc/self").is_dir() {
            let e = ProofStore::check(Path::new("/proc/cuzk-state")).unwrap_err().to_string();
            assert!(e.contains("cannot be made"), "{e}");
        }
        let fresh = dir.path().join("a/b");
        ProofStore::check(&fresh).unwrap();
        assert!(!dir.path().join("a").exists(), "the check made a directory");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1, "the check left a file behind");
    }
}
