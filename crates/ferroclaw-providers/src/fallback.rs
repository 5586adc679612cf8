//! Model fallback: an ordered list of (provider, model) candidates. A candidate that
//! fails in a way another model could fix (rate limit, outage, auth, unknown model)
//! is cooled down and the next one is tried.
//!
//! Cool-downs are per (provider, model), not per provider: a rate limit on one model
//! says little about the provider's other models.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

use crate::{ChatRequest, ChatResponse, DeltaSink, ErrorKind, Provider, ProviderError};

type Key = (String, String);

pub struct FallbackChain {
    candidates: Vec<(Arc<dyn Provider>, String)>,
    cooldown: Duration,
    name: String,
    /// When each cooling (provider, model) becomes usable again.
    cooling: Mutex<HashMap<Key, Instant>>,
}

impl FallbackChain {
    /// `candidates` in order of preference; `cooldown` is how long a failed candidate
    /// is skipped (60 s is a sensible default), or its `Retry-After` if longer.
    pub fn new(candidates: Vec<(Arc<dyn Provider>, String)>, cooldown: Duration) -> Self {
        let name = candidates
            .first()
            .map(|(p, _)| p.name().to_owned())
            .unwrap_or_default();
        Self {
            candidates,
            cooldown,
            name,
            cooling: Mutex::new(HashMap::new()),
        }
    }

    /// (provider, model) pairs currently cooling down.
    pub fn cooling(&self) -> Vec<(String, String)> {
        let now = Instant::now();
        let mut v: Vec<Key> = self
            .lock()
            .iter()
            .filter(|(_, until)| **until > now)
            .map(|(k, _)| k.clone())
            .collect();
        v.sort();
        v
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<Key, Instant>> {
        // The map stays consistent even if a holder panicked: each write is one insert.
        self.cooling.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Indices to try, in order: every candidate not cooling; if all are, the one
    /// whose cool-down ends first (better a likely failure than no attempt).
    fn plan(&self) -> Vec<usize> {
        let now = Instant::now();
        let mut map = self.lock();
        map.retain(|_, until| *until > now);
        let until = |i: usize| {
            let (p, m) = &self.candidates[i];
            map.get(&(p.name().to_owned(), m.clone())).copied()
        };
        let ready: Vec<usize> = (0..self.candidates.len())
            .filter(|&i| until(i).is_none())
            .collect();
        if !ready.is_empty() {
            return ready;
        }
        (0..self.candidates.len())
            .min_by_key(|&i| until(i))
            .into_iter()
            .collect()
    }
}

#[async_trait]
impl Provider for FallbackChain {
    fn name(&self) -> &str {
        &self.name
    }

    async fn chat(
        &self,
        req: &ChatRequest,
        sink: &dyn DeltaSink,
        cancel: &CancellationToken,
    ) -> Result<ChatResponse, ProviderError> {
        let plan = self.plan();
        if plan.is_empty() {
            return Err(ProviderError::new(
                ErrorKind::NotFound,
                "fallback chain has no candidates",
            ));
        }
        let mut failures: Vec<ProviderError> = Vec::new();
        for i in plan {
            let (provider, model) = &self.candidates[i];
            let key = (provider.name().to_owned(), model.clone());
            let mut attempt = req.clone();
            attempt.model.clone_from(model);
            match provider.chat(&attempt, sink, cancel).await {
                Ok(mut resp) => {
                    self.lock().remove(&key);
                    if resp.model.is_empty() {
                        resp.model.clone_from(model);
                    }
                    if resp.provider.is_empty() {
                        resp.provider = key.0;
                    }
                    return Ok(resp);
                }
                Err(e) if e.should_fall_back() => {
                    let wait = e
                        .retry_after
                        .map_or(self.cooldown, |ra| ra.max(self.cooldown));
                    tracing::warn!(
                        provider = %key.0,
                        model = %key.1,
                        status = ?e.status,
                        kind = ?e.kind,
                        cooldown_s = wait.as_secs(),
                        error = %e.message,
                        "model failed, falling back"
                    );
                    self.lock().insert(key, Instant::now() + wait);
                    failures.push(e);
                }
                Err(e) => return Err(e),
            }
        }
        Err(summarise(failures))
    }

    async fn list_models(&self) -> Result<Vec<String>, ProviderError> {
        match self.candidates.first() {
            Some((p, _)) => p.list_models().await,
            None => Ok(Vec::new()),
        }
    }
}

/// The last error, its message listing every attempt so the operator sees them all.
fn summarise(mut failures: Vec<ProviderError>) -> ProviderError {
    let listing = failures
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ");
    let count = failures.len();
    let Some(mut last) = failures.pop() else {
        return ProviderError::new(ErrorKind::NotFound, "fallback chain has no candidates");
    };
    if count > 1 {
        last.message = format!("all {count} models failed: {listing}");
    }
    last
}
