//! [`MemoryStore`]: sessions that live only as long as the process, for surfaces whose
//! clients bring the whole conversation with every request (the executor) and delete
//! the session when the run is over. Nothing is written to disk, so there is nothing to
//! lease across processes and nothing for an integrity scan to repair.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use ferroclaw_types::{Entry, EntryBody, Message, Usage};

use crate::integrity::{Incident, IntegrityStatus, ScanOptions, ScanSummary};
use crate::transcript::{build_context, iso_now, next_entry};
use crate::{
    validate_agent_id, validate_session_key, Integrity, LoadProblem, SessionLease, SessionLog,
    SessionMeta, SessionStore, StoreError,
};

struct Stored {
    meta: SessionMeta,
    entries: Arc<Mutex<Vec<Entry>>>,
}

/// Sessions in memory, keyed by agent and session key.
pub struct MemoryStore {
    sessions: Mutex<HashMap<(String, String), Stored>>,
    tool_result_chars: usize,
}

impl MemoryStore {
    /// Tool results over `tool_result_chars` are cut when appended, as on disk.
    pub fn new(tool_result_chars: usize) -> Self {
        MemoryStore {
            sessions: Mutex::new(HashMap::new()),
            tool_result_chars,
        }
    }

    /// Sessions held right now (a finished surface run leaves none behind).
    pub fn len(&self) -> usize {
        lock(&self.sessions).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // The guarded maps stay consistent between statements, so a panic elsewhere while
    // one was held leaves nothing half-done to protect.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn now_ms() -> i64 {
    ferroclaw_types::now_millis()
}

/// One open session; appends go to the shared entries at once.
struct MemoryLog {
    session_id: String,
    key: String,
    entries: Vec<Entry>,
    shared: Arc<Mutex<Vec<Entry>>>,
    tool_result_chars: usize,
}

#[async_trait]
impl SessionLog for MemoryLog {
    fn session_id(&self) -> &str {
        &self.session_id
    }

    fn key(&self) -> &str {
        &self.key
    }

    fn entries(&self) -> &[Entry] {
        &self.entries
    }

    fn problems(&self) -> &[LoadProblem] {
        &[]
    }

    fn context(&self) -> Vec<Message> {
        build_context(&self.entries)
    }

    async fn append(&mut self, body: EntryBody) -> Result<Entry, StoreError> {
        let entry = next_entry(
            &self.entries,
            |id| self.entries.iter().any(|e| e.id == id),
            body,
            self.tool_result_chars,
            &self.session_id,
        );
        lock(&self.shared).push(entry.clone());
        self.entries.push(entry.clone());
        Ok(entry)
    }

    async fn flush(&mut self) -> Result<(), StoreError> {
        Ok(())
    }
}

#[async_trait]
impl SessionStore for MemoryStore {
    async fn read(&self, agent_id: &str, key: &str) -> Result<Option<Vec<Entry>>, StoreError> {
        let sessions = lock(&self.sessions);
        Ok(sessions
            .get(&(agent_id.to_string(), key.to_string()))
            .map(|s| lock(&s.entries).clone()))
    }

    async fn open(&self, agent_id: &str, key: &str) -> Result<Box<dyn SessionLog>, StoreError> {
        validate_agent_id(agent_id)?;
        validate_session_key(key)?;
        let mut sessions = lock(&self.sessions);
        let stored = sessions
            .entry((agent_id.to_string(), key.to_string()))
            .or_insert_with(|| {
                let now = now_ms();
                Stored {
                    meta: SessionMeta {
                        key: key.to_string(),
                        session_id: uuid::Uuid::now_v7().to_string(),
                        agent_id: agent_id.to_string(),
                        created_at: now,
                        updated_at: now,
                        provider: None,
                        model: None,
                        usage: Usage::default(),
                        label: None,
                    },
                    entries: Arc::default(),
                }
            });
        let entries = lock(&stored.entries).clone();
        Ok(Box::new(MemoryLog {
            session_id: stored.meta.session_id.clone(),
            key: key.to_string(),
            entries,
            shared: stored.entries.clone(),
            tool_result_chars: self.tool_result_chars,
        }))
    }

    async fn get(&self, agent_id: &str, key: &str) -> Result<Option<SessionMeta>, StoreError> {
        Ok(lock(&self.sessions)
            .get(&(agent_id.to_string(), key.to_string()))
            .map(|s| s.meta.clone()))
    }

    async fn list(&self, agent_id: &str) -> Result<Vec<SessionMeta>, StoreError> {
        let mut out: Vec<SessionMeta> = lock(&self.sessions)
            .iter()
            .filter(|((agent, _), _)| agent == agent_id)
            .map(|(_, s)| s.meta.clone())
            .collect();
        out.sort_by_key(|m| std::cmp::Reverse(m.updated_at));
        Ok(out)
    }

    async fn record_run(
        &self,
        agent_id: &str,
        key: &str,
        provider: &str,
        model: &str,
        usage: &Usage,
    ) -> Result<(), StoreError> {
        let mut sessions = lock(&self.sessions);
        let stored = sessions
            .get_mut(&(agent_id.to_string(), key.to_string()))
            .ok_or_else(|| StoreError::NotFound(key.to_string()))?;
        stored.meta.provider = Some(provider.to_string());
        stored.meta.model = Some(model.to_string());
        stored.meta.usage.add(usage);
        stored.meta.updated_at = now_ms();
        Ok(())
    }

    async fn delete(&self, agent_id: &str, key: &str) -> Result<bool, StoreError> {
        Ok(lock(&self.sessions)
            .remove(&(agent_id.to_string(), key.to_string()))
            .is_some())
    }

    async fn lease(&self, _agent_id: &str, _key: &str) -> Result<SessionLease, StoreError> {
        // No other process can see these sessions; the runtime's session queue is the
        // only writer discipline they need.
        Ok(SessionLease::new(()))
    }

    async fn export(&self, agent_id: &str, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let sessions = lock(&self.sessions);
        let Some(stored) = sessions.get(&(agent_id.to_string(), key.to_string())) else {
            return Ok(None);
        };
        let header = ferroclaw_types::SessionHeader {
            kind: "session".into(),
            version: ferroclaw_types::TRANSCRIPT_VERSION,
            id: stored.meta.session_id.clone(),
            timestamp: iso_now(),
            cwd: String::new(),
            session_key: Some(key.to_string()),
        };
        let mut out = serde_json::to_vec(&header).map_err(|e| StoreError::Corrupt {
            path: "memory".into(),
            message: e.to_string(),
        })?;
        out.push(b'\n');
        for entry in lock(&stored.entries).iter() {
            serde_json::to_writer(&mut out, entry).map_err(|e| StoreError::Corrupt {
                path: "memory".into(),
                message: e.to_string(),
            })?;
            out.push(b'\n');
        }
        Ok(Some(out))
    }
}

#[async_trait]
impl Integrity for MemoryStore {
    async fn scan(&self, opts: ScanOptions) -> Result<ScanSummary, StoreError> {
        let sessions = lock(&self.sessions)
            .keys()
            .filter(|(agent, _)| opts.agent.as_deref().is_none_or(|a| a == agent))
            .count();
        // Entries only ever come from `append`, one whole entry at a time: there are no
        // torn lines or foreign edits for a scan to find.
        Ok(ScanSummary {
            sessions,
            ..ScanSummary::default()
        })
    }

    async fn last_scan_status(&self) -> Option<IntegrityStatus> {
        None
    }

    async fn report_incident(&self, incident: Incident) -> Result<(), StoreError> {
        tracing::warn!(
            ?incident,
            "security.integrity_incident in an in-memory session"
        );
        Ok(())
    }

    async fn incidents(&self, _limit: usize) -> Result<Vec<Incident>, StoreError> {
        Ok(Vec::new())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn sessions_hold_their_entries_until_deleted() {
        let store = MemoryStore::new(3_000);
        let mut log = store.open("main", "k").await.unwrap();
        log.append(EntryBody::Message {
            message: Message::user("hi"),
        })
        .await
        .unwrap();
        log.append(EntryBody::Message {
            message: Message::tool_result("c1", "read", "x".repeat(10_000), false),
        })
        .await
        .unwrap();
        drop(log);
        let again = store.open("main", "k").await.unwrap();
        assert_eq!(again.entries().len(), 2);
        assert_eq!(
            again.entries()[1].parent_id.as_ref(),
            Some(&again.entries()[0].id)
        );
        assert!(
            again.context()[1].text().contains("tool result truncated"),
            "tool results are capped as on disk"
        );
        assert_eq!(store.list("main").await.unwrap().len(), 1);
        assert!(store.open("main", "").await.is_err(), "keys are validated");
        assert!(store.delete("main", "k").await.unwrap());
        assert!(store.is_empty());
        assert!(store.open("main", "k").await.unwrap().entries().is_empty());
    }
}
