//! Parameter sets: loaded on first use, shared by reference count, evicted on request
//! or when idle.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cuzk_groth16::verifier::PreparedVerifyingKey;
use cuzk_groth16::{ParameterSet, ProvingBackend};

use crate::budget::{BudgetGuard, MemoryBudget};
use crate::error::EngineError;
use crate::kind::KindHandler;

/// A parameter set ready for proving and for checking its proofs.
pub struct LoadedParams {
    pub circuit_id: String,
    pub set: ParameterSet,
    pub pvk: PreparedVerifyingKey,
    pub size_bytes: u64,
    /// Told when the set is dropped (evicted and no longer used), to free what they
    /// hold for it (a GPU's copy of the points).
    backends: Vec<Arc<dyn ProvingBackend>>,
}

impl Drop for LoadedParams {
    fn drop(&mut self) {
        for b in &self.backends {
            b.release_params(self.set.id());
        }
    }
}

struct Entry {
    params: Arc<LoadedParams>,
    last_used: Instant,
    /// The set's size, charged to the memory budget while it is cached.
    _charge: BudgetGuard,
}

/// Status of one loaded set.
#[derive(Clone, Debug)]
pub struct ParamStatus {
    pub circuit_id: String,
    pub size_bytes: u64,
    /// Users other than the cache itself (partitions being synthesized or proved).
    pub ref_count: u32,
    pub idle: Duration,
}

pub(crate) struct ParamCache {
    handlers: Vec<Arc<dyn KindHandler>>,
    backends: Vec<Arc<dyn ProvingBackend>>,
    budget: Arc<MemoryBudget>,
    min_idle: Duration,
    /// Every backend reads query points from their file itself (KindHandler::load_params).
    points_in_file: bool,
    /// Frees other idle memory (pooled buffers) when a set does not fit.
    on_pressure: Box<dyn Fn() + Send + Sync>,
    entries: Mutex<HashMap<String, Entry>>,
    /// Serializes loading, so two partitions needing the same set load it once.
    loading: Mutex<()>,
}

impl ParamCache {
    /// Cached sets are charged to `budget`; to make room for a new one, sets idle for
    /// `min_idle` are evicted and `on_pressure` is called first. `backends` are told
    /// when a set is gone; when every one of them reads points from files itself, sets
    /// are loaded with their points left in the file.
    pub fn new(
        handlers: Vec<Arc<dyn KindHandler>>,
        backends: Vec<Arc<dyn ProvingBackend>>,
        budget: Arc<MemoryBudget>,
        min_idle: Duration,
        on_pressure: Box<dyn Fn() + Send + Sync>,
    ) -> Self {
        let points_in_file = !backends.is_empty() && backends.iter().all(|b| b.reads_params_from_file());
        ParamCache { handlers, backends, budget, min_idle, points_in_file, on_pressure, entries: Mutex::new(HashMap::new()), loading: Mutex::new(()) }
    }

    fn cached(&self, id: &str) -> Option<Arc<LoadedParams>> {
        let mut g = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        g.get_mut(id).map(|e| {
            e.last_used = Instant::now();
            e.params.clone()
        })
    }

    /// The set, loading it if needed; the duration is the load time spent here.
    pub fn get(&self, id: &str) -> Result<(Arc<LoadedParams>, Duration), EngineError> {
        if let Some(p) = self.cached(id) {
            return Ok((p, Duration::ZERO));
        }
        let _one_loader = self.loading.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(p) = self.cached(id) {
            return Ok((p, Duration::ZERO));
        }
        let handler = self
            .handlers
            .iter()
            .find(|h| h.owns_circuit(id))
            .ok_or_else(|| EngineError::NotFound(format!("no proof kind knows the circuit id {id:?}")))?;
        let t = Instant::now();
        tracing::info!(circuit_id = id, "loading parameters");
        let set = handler.load_params(id, self.points_in_file)?;
        let pvk = PreparedVerifyingKey::new(&set.vk);
        // What the host holds for the set, and the pinned copy of its points that
        // backends streaming it share.
        let size_bytes = set.size_bytes() as u64 + self.backends.iter().map(|b| b.host_bytes_for(&set)).max().unwrap_or(0);
        let params = Arc::new(LoadedParams { circuit_id: id.to_string(), set, pvk, size_bytes, backends: self.backends.clone() });
        let took = t.elapsed();
        tracing::info!(circuit_id = id, size_bytes, ms = took.as_millis() as u64, "parameters loaded");
        // Charge the set: room is made by evicting idle sets, else it waits for
        // partitions in flight to finish.
        let charge = loop {
            if let Some(g) = self.budget.acquire(size_bytes, || true)? {
                break g;
            }
            self.evict_idle(self.min_idle);
            (self.on_pressure)();
            let retry_at = Instant::now() + Duration::from_secs(1);
            if let Some(g) = self.budget.acquire(size_bytes, || Instant::now() >= retry_at)? {
                break g;
            }
        };
        self.entries
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id.to_string(), Entry { params: params.clone(), last_used: Instant::now(), _charge: charge });
        Ok((params, took))
    }

    pub fn is_loaded(&self, id: &str) -> bool {
        self.entries.lock().unwrap_or_else(|e| e.into_inner()).contains_key(id)
    }

    /// Drops the cache's reference; partitions still using the set keep it alive
    /// until they finish. Returns the size if it was loaded.
    pub fn evict(&self, id: &str) -> Option<u64> {
        let e = self.entries.lock().unwrap_or_else(|e| e.into_inner()).remove(id)?;
        tracing::info!(circuit_id = id, "parameters evicted");
        Some(e.params.size_bytes)
    }

    /// Evicts sets nobody uses that have been idle at least `min_idle`.
    pub fn evict_idle(&self, min_idle: Duration) -> u64 {
        let mut g = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let idle: Vec<String> =
            g.iter().filter(|(_, e)| Arc::strong_count(&e.params) == 1 && e.last_used.elapsed() >= min_idle).map(|(k, _)| k.clone()).collect();
        let mut freed = 0;
        for k in idle {
            if let Some(e) = g.remove(&k) {
                tracing::info!(circuit_id = k.as_str(), "idle parameters evicted");
                freed += e.params.size_bytes;
            }
        }
        freed
    }

    pub fn knows(&self, id: &str) -> bool {
        self.handlers.iter().any(|h| h.owns_circuit(id))
    }

    pub fn status(&self) -> Vec<ParamStatus> {
        let g = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let mut v: Vec<ParamStatus> = g
            .values()
            .map(|e| ParamStatus {
                circuit_id: e.params.circuit_id.clone(),
                size_bytes: e.params.size_bytes,
                ref_count: (Arc::strong_count(&e.params) - 1) as u32,
                idle: e.last_used.elapsed(),
            })
            .collect();
        v.sort_by(|a, b| a.circuit_id.cmp(&b.circuit_id));
        v
    }
}
