//! Parameter sets, cached: loaded on first use, shared while partitions use them,
//! evicted on request or when idle. A set is named by its circuit id (one set per
//! circuit); the wire calls a set an "SRS" (PreloadSRS, `loaded_srs`).

use std::collections::HashMap;
use std::mem::ManuallyDrop;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cuzk_groth16::matrices::ConstraintMatrices;
use cuzk_groth16::verifier::PreparedVerifyingKey;
use cuzk_groth16::{ParameterSet, ProvingBackend};

use crate::error::EngineError;
use crate::kind::ParameterSource;
use crate::memory::{BudgetGuard, MemoryBudget};
use cuzk_groth16::sync::lock;

/// A parameter set ready for proving and for checking its proofs. Its memory stays
/// charged until its last user is done, even after it left the cache.
pub(crate) struct LoadedParameterSet {
    pub circuit_id: String,
    pub set: ParameterSet,
    pub pvk: PreparedVerifyingKey,
    /// The circuit's compiled matrices where its kind proves with them
    /// ([`ParameterSource::load_matrices`]).
    pub matrices: Option<Arc<ConstraintMatrices>>,
    /// Whether every backend computes a, b, c of its partitions from the matrices
    /// ([`ProvingBackend::computes_products`]); else a partition's synthesis computes
    /// them on the host, in buffers the budget counts.
    pub products_by_backends: bool,
    /// Host memory it holds: the set, its matrices, and the pinned copy of its points
    /// backends streaming it share.
    pub size_bytes: u64,
    /// Told when the set is dropped (evicted and no longer used), to free what they
    /// hold for it (a GPU's copy of the points).
    backends: Vec<Arc<dyn ProvingBackend>>,
    /// Its memory: what was charged once it was loaded, and what its header said
    /// before.
    _charge: (BudgetGuard, Option<BudgetGuard>),
}

impl Drop for LoadedParameterSet {
    fn drop(&mut self) {
        // The matrices first, so that a backend releasing the set finds no other holder
        // of them and drops its device copy too.
        self.matrices = None;
        for b in &self.backends {
            b.release_params(self.set.id());
        }
    }
}

/// A partition's (or a preload's) use of a set. Dropping it may make the set
/// evictable, so waiters for memory are told.
pub(crate) struct ParameterLease {
    set: ManuallyDrop<Arc<LoadedParameterSet>>,
    budget: Arc<MemoryBudget>,
}

impl std::ops::Deref for ParameterLease {
    type Target = LoadedParameterSet;
    fn deref(&self) -> &LoadedParameterSet {
        &self.set
    }
}

impl Drop for ParameterLease {
    fn drop(&mut self) {
        // The reference goes first, so that a woken waiter sees the set unused.
        // SAFETY: `set` is dropped once, here, and not used afterwards.
        unsafe { ManuallyDrop::drop(&mut self.set) };
        self.budget.notify();
    }
}

struct Entry {
    set: Arc<LoadedParameterSet>,
    last_used: Instant,
}

impl Entry {
    /// Nobody but the cache holds it.
    fn unused(&self) -> bool {
        Arc::strong_count(&self.set) == 1
    }
}

/// What [`ParameterCache::evict`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Eviction {
    NotLoaded,
    /// Gone, its memory back in the budget.
    Evicted {
        bytes: u64,
    },
    /// Kept: `users` partitions (or preloads) hold it now.
    InUse {
        users: usize,
    },
}

/// Status of one cached set.
#[derive(Clone, Debug)]
pub struct ParameterSetStatus {
    pub circuit_id: String,
    pub size_bytes: u64,
    /// Users other than the cache itself (partitions being synthesized or proved).
    pub ref_count: u32,
    pub idle: Duration,
}

pub(crate) struct ParameterCache {
    handlers: Vec<Arc<dyn ParameterSource>>,
    backends: Vec<Arc<dyn ProvingBackend>>,
    budget: Arc<MemoryBudget>,
    /// Every backend reads query points from their file itself (ParameterSource::load_params).
    points_in_file: bool,
    entries: Mutex<HashMap<String, Entry>>,
    /// Serializes loading, so two partitions needing the same set load it once.
    loading: Mutex<()>,
}

impl ParameterCache {
    /// Cached sets are charged to `budget`. `backends` are told when a set is gone;
    /// when every one of them reads points from files itself, sets are loaded with
    /// their points left in the file.
    pub fn new(handlers: Vec<Arc<dyn ParameterSource>>, backends: Vec<Arc<dyn ProvingBackend>>, budget: Arc<MemoryBudget>) -> Self {
        let points_in_file = !backends.is_empty() && backends.iter().all(|b| b.reads_params_from_file());
        ParameterCache { handlers, backends, budget, points_in_file, entries: Mutex::new(HashMap::new()), loading: Mutex::new(()) }
    }

    fn lease(&self, set: Arc<LoadedParameterSet>) -> ParameterLease {
        ParameterLease { set: ManuallyDrop::new(set), budget: self.budget.clone() }
    }

    fn cached(&self, id: &str) -> Option<ParameterLease> {
        let mut g = lock(&self.entries);
        // Loaded without compiled matrices that have been made since: loaded again, with
        // them, once nobody holds it (until then its partitions are synthesized in full).
        let stale = g
            .get(id)
            .is_some_and(|e| e.set.matrices.is_none() && e.unused() && self.handlers.iter().any(|h| h.owns_circuit(id) && h.matrices_ready(id)));
        if stale {
            let old = g.remove(id);
            drop(g);
            drop(old);
            tracing::info!(circuit_id = id, "parameters evicted to be loaded again with the compiled matrices made for them");
            return None;
        }
        let set = g.get_mut(id).map(|e| {
            e.last_used = Instant::now();
            e.set.clone()
        })?;
        drop(g);
        Some(self.lease(set))
    }

    /// The set, loading it if needed, and the load time spent here. A new set's memory
    /// is waited for as [`MemoryBudget::wait_for`] does (`make_room` frees idle memory,
    /// idle sets included); None if `give_up` said so meanwhile, or at shutdown.
    pub fn get(
        &self,
        id: &str,
        give_up: &dyn Fn() -> bool,
        make_room: &dyn Fn() -> Option<Instant>,
    ) -> Result<Option<(ParameterLease, Duration)>, EngineError> {
        if let Some(p) = self.cached(id) {
            return Ok(Some((p, Duration::ZERO)));
        }
        let _one_loader = lock(&self.loading);
        if let Some(p) = self.cached(id) {
            return Ok(Some((p, Duration::ZERO)));
        }
        let handler = self
            .handlers
            .iter()
            .find(|h| h.owns_circuit(id))
            .ok_or_else(|| EngineError::NotFound(format!("no proof kind knows the circuit id {}", crate::error::shown(id))))?;
        let t = Instant::now();
        // What the set will take, from its file's header: a set larger than the whole
        // budget is refused before any point is read, and one that fits is charged
        // before it is read (room made by evicting idle sets, else waiting for
        // partitions in flight), so loading never takes memory the budget has not got.
        let header_bytes = handler.params_host_bytes(id, self.points_in_file)?;
        if let Some(h) = header_bytes.filter(|&h| h > self.budget.total()) {
            return Err(EngineError::ResourceExhausted(format!(
                "parameter set {id} takes at least {h} bytes of host memory (from its file's header), more than the whole memory budget ({} bytes, memory.total_budget); nothing of it was read",
                self.budget.total()
            )));
        }
        let header_charge = match header_bytes {
            Some(h) => match self.budget.wait_for(give_up, make_room, || self.budget.try_charge(h, 0))? {
                Some(c) => Some(c),
                None => return Ok(None),
            },
            None => None,
        };
        tracing::info!(circuit_id = id, header_bytes, "loading parameters");
        let set = handler.load_params(id, self.points_in_file)?;
        let pvk = PreparedVerifyingKey::new(&set.vk);
        let matrices = handler.load_matrices(id)?.map(Arc::new);
        let matrices_bytes = matrices.as_ref().map_or(0, |m| m.bytes() as u64);
        // Each device plans the set now, knowing its matrices: a set no GPU here can hold
        // a partition of is refused before any partition is accepted for it.
        // A backend out of service (its device lost) is asked nothing: the set is
        // planned and charged for the others.
        let serving: Vec<&Arc<dyn ProvingBackend>> = self.backends.iter().filter(|b| b.in_service()).collect();
        for b in &serving {
            b.plan_params(&set, matrices.as_deref())
                .map_err(|e| EngineError::FailedPrecondition(format!("parameter set {id} on {}: {e}", b.name())))?;
        }
        let products_by_backends = matrices.is_some() && serving.iter().all(|b| b.computes_products(&set));
        // What the host holds for the set and its matrices, and the pinned copy of its
        // points that backends streaming it share.
        let pinned = serving.iter().map(|b| b.host_bytes_for(&set)).max().unwrap_or(0);
        let size_bytes = set.size_bytes() as u64 + matrices_bytes + pinned;
        let took = t.elapsed();
        tracing::info!(circuit_id = id, size_bytes, matrices_bytes, products_by_backends, ms = took.as_millis() as u64, "parameters loaded");
        // A set larger than the whole budget would wait forever.
        if size_bytes > self.budget.total() {
            return Err(EngineError::ResourceExhausted(format!(
                "parameter set {id} takes {size_bytes} bytes of host memory, more than the whole memory budget ({} bytes, memory.total_budget)",
                self.budget.total()
            )));
        }
        // The rest beyond the header's charge (a pinned copy of the points): taken now if
        // there is room. Else the header's charge goes back and the whole set is waited
        // for, holding nothing meanwhile: a partition of another set waiting for memory
        // must be able to finish (it would wait for the header's charge, and this for
        // its set's memory); room is made by evicting idle sets, else this waits for
        // partitions in flight to finish.
        let rest = size_bytes.saturating_sub(header_charge.as_ref().map_or(0, |c| c.bytes()));
        let charge = match self.budget.try_charge(rest, pinned.min(rest))? {
            Some(c) => (c, header_charge),
            None => {
                drop(header_charge);
                let Some(c) = self.budget.wait_for(give_up, make_room, || self.budget.try_charge(size_bytes, pinned))? else {
                    return Ok(None);
                };
                (c, None)
            }
        };
        let loaded = Arc::new(LoadedParameterSet {
            circuit_id: id.to_string(),
            set,
            pvk,
            matrices,
            products_by_backends,
            size_bytes,
            backends: self.backends.clone(),
            _charge: charge,
        });
        lock(&self.entries).insert(id.to_string(), Entry { set: loaded.clone(), last_used: Instant::now() });
        Ok(Some((self.lease(loaded), took)))
    }

    /// Drops the copy `copy` of the set from the cache, used or not, so the next use
    /// loads and charges the set anew: after a backend's placement of that copy ran
    /// short (the new plan's host memory may differ). A newer copy (another worker's
    /// reload) stays. Users keep their lease, and its charge, until they finish.
    pub fn forget(&self, id: &str, copy: cuzk_groth16::params::ParameterSetId) {
        let forgotten = {
            let mut g = lock(&self.entries);
            match g.get(id) {
                Some(e) if e.set.set.id() == copy => g.remove(id),
                _ => None,
            }
        };
        if let Some(e) = forgotten {
            tracing::info!(circuit_id = id, bytes = e.set.size_bytes, "parameters to be loaded and charged again at the next use");
        }
    }

    pub fn is_loaded(&self, id: &str) -> bool {
        lock(&self.entries).contains_key(id)
    }

    /// Drops the set from the cache if nobody uses it. A set in use stays: evicting it
    /// would free nothing until its users finish, and the next request for it would
    /// load a second copy meanwhile (twice the memory the budget shows).
    pub fn evict(&self, id: &str) -> Eviction {
        let mut g = lock(&self.entries);
        let Some(e) = g.get(id) else { return Eviction::NotLoaded };
        if !e.unused() {
            return Eviction::InUse { users: Arc::strong_count(&e.set) - 1 };
        }
        let Some(e) = g.remove(id) else { return Eviction::NotLoaded };
        drop(g);
        let bytes = e.set.size_bytes;
        // Dropped here, outside the lock: its charge goes back now.
        drop(e);
        tracing::info!(circuit_id = id, bytes, "parameters evicted");
        Eviction::Evicted { bytes }
    }

    /// Evicts the sets nobody uses that have been idle at least `min_idle`; returns
    /// when the next unused set will have been idle that long (None: no unused set
    /// left; a set in use becomes a candidate when its last lease is dropped).
    pub fn evict_idle(&self, min_idle: Duration) -> Option<Instant> {
        let evicted: Vec<Entry> = {
            let mut g = lock(&self.entries);
            let idle: Vec<String> = g.iter().filter(|(_, e)| e.unused() && e.last_used.elapsed() >= min_idle).map(|(k, _)| k.clone()).collect();
            idle.iter().filter_map(|k| g.remove(k)).collect()
        };
        for e in &evicted {
            tracing::info!(circuit_id = e.set.circuit_id.as_str(), "idle parameters evicted");
        }
        // Dropped outside the lock: each returns its charge.
        drop(evicted);
        lock(&self.entries).values().filter(|e| e.unused()).map(|e| e.last_used + min_idle).min()
    }

    pub fn knows(&self, id: &str) -> bool {
        self.handlers.iter().any(|h| h.owns_circuit(id))
    }

    pub fn status(&self) -> Vec<ParameterSetStatus> {
        let g = lock(&self.entries);
        let mut v: Vec<ParameterSetStatus> = g
            .values()
            .map(|e| ParameterSetStatus {
                circuit_id: e.set.circuit_id.clone(),
                size_bytes: e.set.size_bytes,
                ref_count: (Arc::strong_count(&e.set) - 1) as u32,
                idle: e.last_used.elapsed(),
            })
            .collect();
        v.sort_by(|a, b| a.circuit_id.cmp(&b.circuit_id));
        v
    }
}
