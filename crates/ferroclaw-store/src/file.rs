//! Embedded backend: the session index in the home's SQLite database ([`crate::sqlite`])
//! plus one JSONL transcript per session under `<home>/agents/<agentId>/sessions/`.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::ffi::OsString;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use ferroclaw_types::TRANSCRIPT_VERSION;
use ferroclaw_types::{now_millis, Entry, EntryBody, Message, SessionHeader, Usage};
use lru::LruCache;
use tracing::warn;

use crate::group_sync::GroupSync;
use crate::integrity::{
    repair_bytes, replace_with_backup, write_incident, Incident, Issue, IssueKind, Strategy,
    DEFAULT_TOOL_RESULT_CHARS,
};
use crate::migration::MigrationState;
use crate::sqlite::SqliteIndex;
use crate::transcript::{
    build_context, iso_now, iso_to_millis, next_entry, parse_header, parse_transcript,
};
use crate::{
    is_safe_name, read_transcript, validate_agent_id, validate_session_key, Durability,
    LoadProblem, SessionLease, SessionLog, SessionMeta, SessionStore, StoreError,
};

pub(crate) type Index = BTreeMap<String, SessionMeta>;

/// File-backed [`SessionStore`]: transcripts are files, the index is rows of the home's
/// database. Several stores (and processes) on one home are safe together; a clone
/// shares the database handle and the caches.
#[derive(Clone)]
pub struct FileSessionStore {
    home: PathBuf,
    /// Opened at first use (on a blocking thread); a failed open is retried next time.
    db: Arc<std::sync::Mutex<Option<Arc<SqliteIndex>>>>,
    strategy: Strategy,
    tool_result_chars: usize,
    /// `Some` under `Durability::Batch`: the turns' syncs are shared.
    group: Option<Arc<GroupSync>>,
    /// Transcripts of recently closed sessions, so a continuing conversation is not
    /// re-read and re-validated on every turn.
    log_cache: Arc<std::sync::Mutex<LogCache>>,
    directory: Arc<crate::sqlite::directory::SqliteDirectory>,
    cron: Arc<crate::sqlite::cron::SqliteCron>,
    mcp_servers: Arc<crate::sqlite::mcp_servers::SqliteMcpServers>,
    channels: Arc<crate::sqlite::channels::SqliteChannels>,
    traces: Arc<crate::sqlite::traces::SqliteTraces>,
    devices: Arc<crate::sqlite::devices::SqliteDevices>,
}

/// Identity of a file's current contents: any rewrite (rename) changes the inode, any
/// append the length, any in-place write the modification time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileStamp {
    len: u64,
    modified: Option<std::time::SystemTime>,
    ino: u64,
}

fn file_stamp(path: &Path) -> Option<FileStamp> {
    use std::os::unix::fs::MetadataExt;
    let m = fs::metadata(path).ok()?;
    Some(FileStamp {
        len: m.len(),
        modified: m.modified().ok(),
        ino: m.ino(),
    })
}

/// Parsed state of a closed transcript, valid while the file still has `len` bytes and
/// the same inode (appends by this process are counted; anyone else's change the length).
struct CachedLog {
    header: SessionHeader,
    entries: Vec<Entry>,
    ids: HashSet<String>,
    len: u64,
    ino: u64,
}

/// Sessions kept parsed in memory at most.
const LOG_CACHE_CAPACITY: NonZeroUsize = match NonZeroUsize::new(128) {
    Some(n) => n,
    None => panic!("the log cache holds at least one session"),
};

/// Closed transcripts by path; a log is taken out while open, so one session is never
/// both cached and being written.
type LogCache = LruCache<PathBuf, CachedLog>;

impl FileSessionStore {
    /// `home` is `FERROCLAW_HOME`.
    pub fn new(home: impl Into<PathBuf>) -> Self {
        let home = home.into();
        let records = crate::sqlite::records::RecordsDb::new(&home);
        FileSessionStore {
            home: home.clone(),
            db: Arc::default(),
            strategy: Strategy::Full,
            tool_result_chars: DEFAULT_TOOL_RESULT_CHARS,
            group: None,
            log_cache: Arc::new(std::sync::Mutex::new(LruCache::new(LOG_CACHE_CAPACITY))),
            directory: Arc::new(crate::sqlite::directory::SqliteDirectory::new(
                records.clone(),
            )),
            cron: Arc::new(crate::sqlite::cron::SqliteCron::new(records.clone())),
            mcp_servers: Arc::new(crate::sqlite::mcp_servers::SqliteMcpServers::new(
                records.clone(),
            )),
            channels: Arc::new(crate::sqlite::channels::SqliteChannels::new(
                records.clone(),
            )),
            devices: Arc::new(crate::sqlite::devices::SqliteDevices::new(records)),
            traces: Arc::new(crate::sqlite::traces::SqliteTraces::new(
                crate::sqlite::records::RecordsDb::traces(&home),
            )),
        }
    }

    /// How a damaged transcript is repaired when it is opened (default: full).
    pub fn with_integrity_strategy(mut self, strategy: Strategy) -> Self {
        self.strategy = strategy;
        self
    }

    /// Cap on the text of one persisted tool result (default 50,000 chars; 0 = no cap).
    pub fn with_tool_result_chars(mut self, max_chars: usize) -> Self {
        self.tool_result_chars = max_chars;
        self
    }

    /// How a turn's end makes its lines durable (default: an fsync of its own).
    pub fn with_durability(mut self, durability: Durability) -> Self {
        self.group = match durability {
            Durability::Fsync => None,
            Durability::Batch => Some(Arc::default()),
        };
        self
    }

    pub fn home(&self) -> &Path {
        &self.home
    }

    /// `<home>/agents/<agentId>/sessions`.
    pub fn sessions_dir(&self, agent_id: &str) -> Result<PathBuf, StoreError> {
        validate_agent_id(agent_id)?;
        Ok(self.home.join("agents").join(agent_id).join("sessions"))
    }

    /// `<home>/agents/<agentId>/sessions/<sessionId>.jsonl`.
    pub fn transcript_path(&self, agent_id: &str, session_id: &str) -> Result<PathBuf, StoreError> {
        let dir = self.sessions_dir(agent_id)?;
        transcript_path_in(&dir, session_id)
    }

    /// Runs `f` on a blocking thread with the database open and the agent's sessions in
    /// it (see [`SqliteIndex::prepare_agent`]); `f` also gets the agent's sessions dir.
    pub(crate) async fn with_index<R, F>(&self, agent_id: &str, f: F) -> Result<R, StoreError>
    where
        R: Send + 'static,
        F: FnOnce(&SqliteIndex, &Path) -> Result<R, StoreError> + Send + 'static,
    {
        let dir = self.sessions_dir(agent_id)?;
        let agent = agent_id.to_owned();
        let (slot, home) = (self.db.clone(), self.home.clone());
        blocking(dir.clone(), move || {
            let db = open_db(&slot, &home)?;
            db.prepare_agent(&agent, &dir)?;
            f(&db, &dir)
        })
        .await
    }

    /// Applies the pending migrations of the home's database (every start does too) and
    /// returns them all, applied.
    pub async fn migrate_up(&self) -> Result<Vec<MigrationState>, StoreError> {
        let (slot, home) = (self.db.clone(), self.home.clone());
        blocking(home.join(crate::sqlite::DB_PATH), move || {
            let mut all = open_db(&slot, &home)?.migration_status()?;
            all.extend(crate::sqlite::records::migration_states(&home, true)?);
            Ok(all)
        })
        .await
    }

    /// The migrations and whether each is applied, changing nothing.
    pub async fn migration_status(&self) -> Result<Vec<MigrationState>, StoreError> {
        let home = self.home.clone();
        blocking(home.join(crate::sqlite::DB_PATH), move || {
            let mut all = SqliteIndex::pending_status(&home)?;
            all.extend(crate::sqlite::records::migration_states(&home, false)?);
            Ok(all)
        })
        .await
    }

    /// Session id → key of one agent, for reports (blocking: scans call it).
    pub(crate) fn keys_by_id_blocking(&self, agent_id: &str) -> HashMap<String, String> {
        match open_db(&self.db, &self.home) {
            Ok(db) => {
                if let Ok(dir) = self.sessions_dir(agent_id) {
                    if let Err(e) = db.prepare_agent(agent_id, &dir) {
                        warn!(agent = agent_id, error = %e, "could not index the agent's sessions");
                    }
                }
                db.keys_by_id(agent_id)
            }
            Err(e) => {
                warn!(error = %e, "session index unavailable; sessions are named by id");
                HashMap::new()
            }
        }
    }
}

/// The open database, opening it when none is.
fn open_db(
    slot: &std::sync::Mutex<Option<Arc<SqliteIndex>>>,
    home: &Path,
) -> Result<Arc<SqliteIndex>, StoreError> {
    let mut slot = lock(slot);
    if let Some(db) = slot.as_ref() {
        return Ok(db.clone());
    }
    let db = Arc::new(SqliteIndex::open(home)?);
    *slot = Some(db.clone());
    Ok(db)
}

#[async_trait]
impl SessionStore for FileSessionStore {
    async fn open(&self, agent_id: &str, key: &str) -> Result<Box<dyn SessionLog>, StoreError> {
        validate_session_key(key)?;
        let agent = agent_id.to_owned();
        let owned_key = key.to_owned();
        let (dir, session_id) = self
            .with_index(agent_id, move |db, dir| {
                let id = db.session_for(&agent, &owned_key, |id| {
                    init_transcript(&transcript_path_in(dir, id)?, id, Some(&owned_key)).map(drop)
                })?;
                Ok((dir.to_owned(), id))
            })
            .await?;
        let path = transcript_path_in(&dir, &session_id)?;
        let target = LoadTarget {
            home: self.home.clone(),
            agent_id: agent_id.to_owned(),
            key: key.to_owned(),
            session_id,
            path: path.clone(),
            strategy: self.strategy,
            tool_result_chars: self.tool_result_chars,
            group: self.group.clone(),
            cache: Arc::downgrade(&self.log_cache),
        };
        let cache = self.log_cache.clone();
        let log = blocking(path, move || {
            let cached = lock(&cache).pop(&target.path);
            match cached {
                Some(c)
                    if file_stamp(&target.path)
                        .is_some_and(|st| st.len == c.len && st.ino == c.ino) =>
                {
                    Ok(FileSessionLog::from_cache(target, c))
                }
                _ => FileSessionLog::load(target),
            }
        })
        .await?;
        Ok(Box::new(log))
    }

    async fn read(&self, agent_id: &str, key: &str) -> Result<Option<Vec<Entry>>, StoreError> {
        validate_session_key(key)?;
        let Some(meta) = self.get(agent_id, key).await? else {
            return Ok(None);
        };
        let path = transcript_path_in(&self.sessions_dir(agent_id)?, &meta.session_id)?;
        blocking(path.clone(), move || match fs::read(&path) {
            Ok(bytes) if !bytes.is_empty() => Ok(Some(
                crate::transcript::parse_transcript(&bytes, &path)?.entries,
            )),
            Ok(_) => Ok(Some(Vec::new())),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Some(Vec::new())),
            Err(e) => Err(StoreError::io(&path, e)),
        })
        .await
    }

    async fn get(&self, agent_id: &str, key: &str) -> Result<Option<SessionMeta>, StoreError> {
        let key = key.to_owned();
        let agent = agent_id.to_owned();
        self.with_index(agent_id, move |db, _| db.get(&agent, &key))
            .await
    }

    async fn list(&self, agent_id: &str) -> Result<Vec<SessionMeta>, StoreError> {
        let agent = agent_id.to_owned();
        self.with_index(agent_id, move |db, _| db.list(&agent))
            .await
    }

    async fn record_run(
        &self,
        agent_id: &str,
        key: &str,
        provider: &str,
        model: &str,
        usage: &Usage,
    ) -> Result<(), StoreError> {
        let (agent, key, provider, model, usage) = (
            agent_id.to_owned(),
            key.to_owned(),
            provider.to_owned(),
            model.to_owned(),
            *usage,
        );
        self.with_index(agent_id, move |db, _| {
            db.record_run(&agent, &key, &provider, &model, &usage)
        })
        .await
    }

    async fn lease(&self, agent_id: &str, key: &str) -> Result<SessionLease, StoreError> {
        validate_session_key(key)?;
        // One lock file per session key (hashed: keys may hold any character), in a
        // directory of its own so scans and rebuilds never mistake it for a transcript.
        let dir = self.sessions_dir(agent_id)?.join(".locks");
        let path = dir.join(format!(
            "{:016x}.lock",
            ferroclaw_types::fnv1a(key.as_bytes())
        ));
        blocking(path.clone(), move || {
            fs::create_dir_all(&dir).map_err(|e| StoreError::io(&dir, e))?;
            let file = fs::OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(&path)
                .map_err(|e| StoreError::io(&path, e))?;
            // Blocks this pool thread (not a runtime thread) until the other writer, in
            // whatever process, drops its lease; the OS releases it if that process dies.
            file.lock().map_err(|e| StoreError::io(&path, e))?;
            Ok(SessionLease::new(file))
        })
        .await
    }

    async fn available(&self) -> bool {
        let (slot, home) = (self.db.clone(), self.home.clone());
        blocking(home.join(crate::sqlite::DB_PATH), move || {
            open_db(&slot, &home).map(drop)
        })
        .await
        .is_ok()
    }

    fn directory(&self) -> Option<Arc<dyn crate::Directory>> {
        Some(self.directory.clone())
    }

    fn cron(&self) -> Option<Arc<dyn crate::CronStore>> {
        Some(self.cron.clone())
    }

    fn mcp_servers(&self) -> Option<Arc<dyn crate::McpServerStore>> {
        Some(self.mcp_servers.clone())
    }

    fn channels(&self) -> Option<Arc<dyn crate::ChannelStore>> {
        Some(self.channels.clone())
    }

    fn traces(&self) -> Option<Arc<dyn crate::TraceStore>> {
        Some(self.traces.clone())
    }

    fn devices(&self) -> Option<Arc<dyn crate::DeviceStore>> {
        Some(self.devices.clone())
    }

    async fn export(&self, agent_id: &str, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let (agent, key) = (agent_id.to_owned(), key.to_owned());
        self.with_index(agent_id, move |db, dir| {
            let Some(meta) = db.get(&agent, &key)? else {
                return Ok(None);
            };
            let path = transcript_path_in(dir, &meta.session_id)?;
            match fs::read(&path) {
                Ok(bytes) => Ok(Some(bytes)),
                Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(StoreError::io(path, e)),
            }
        })
        .await
    }

    async fn delete(&self, agent_id: &str, key: &str) -> Result<bool, StoreError> {
        let (agent, key) = (agent_id.to_owned(), key.to_owned());
        let removed = self
            .with_index(agent_id, move |db, dir| {
                Ok(db.remove(&agent, &key)?.map(|m| (dir.to_owned(), m)))
            })
            .await?;
        let Some((dir, meta)) = removed else {
            return Ok(false);
        };
        // The index entry goes first: a crash in between leaves an orphan file that a
        // rebuild would find, never an index entry pointing at nothing.
        match transcript_path_in(&dir, &meta.session_id) {
            Ok(path) => {
                blocking(path.clone(), move || match fs::remove_file(&path) {
                    Ok(()) => Ok(()),
                    Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
                    Err(e) => Err(StoreError::io(path, e)),
                })
                .await?
            }
            Err(e) => warn!(error = %e, "deleted index entry had an unusable session id"),
        }
        Ok(true)
    }
}

/// What [`FileSessionLog::load`] needs to know.
struct LoadTarget {
    home: PathBuf,
    agent_id: String,
    key: String,
    session_id: String,
    path: PathBuf,
    strategy: Strategy,
    tool_result_chars: usize,
    group: Option<Arc<GroupSync>>,
    cache: std::sync::Weak<std::sync::Mutex<LogCache>>,
}

/// An open transcript. Appends go through one append-mode handle, opened at the first
/// append. Loading a transcript that fails validation repairs the file first (backup,
/// atomic rewrite, incident report), so that what a crash left behind never reaches a
/// provider; a healthy file is read once and never rewritten. Opening is the writer's
/// business: its caller holds the session's lease (see `repair_on_load`).
pub struct FileSessionLog {
    home: PathBuf,
    agent_id: String,
    tool_result_chars: usize,
    path: PathBuf,
    session_id: String,
    key: String,
    header: SessionHeader,
    entries: Vec<Entry>,
    ids: HashSet<String>,
    problems: Vec<LoadProblem>,
    file: Option<Arc<File>>,
    /// False when the file may not end with `\n` (loaded that way, or a write failed or
    /// was cancelled); the next append inspects and repairs the tail first.
    tail_clean: bool,
    unsynced: bool,
    /// Shared syncs (`Durability::Batch`), else each flush syncs this file.
    group: Option<Arc<GroupSync>>,
    /// Where this log's parsed state goes when it is dropped.
    cache: std::sync::Weak<std::sync::Mutex<LogCache>>,
    /// Bytes in the file and its inode, as far as this log knows; `None` once unsure
    /// (the file changed while it was read, a write failed): such a log is never cached.
    file_len: Option<u64>,
    ino: u64,
}

impl Drop for FileSessionLog {
    fn drop(&mut self) {
        // Only a log read from a still file and whose every write completed knows the
        // file's exact length. Any log (a reader's too) may come back here: its entries
        // are those of the file's first `len` bytes, and `open` checks the length.
        let (Some(len), true, Some(cache)) = (self.file_len, self.tail_clean, self.cache.upgrade())
        else {
            return;
        };
        let cached = CachedLog {
            header: self.header.clone(),
            entries: std::mem::take(&mut self.entries),
            ids: std::mem::take(&mut self.ids),
            len,
            ino: self.ino,
        };
        lock(&cache).put(std::mem::take(&mut self.path), cached);
    }
}

impl FileSessionLog {
    fn from_cache(t: LoadTarget, c: CachedLog) -> Self {
        FileSessionLog {
            home: t.home,
            agent_id: t.agent_id,
            tool_result_chars: t.tool_result_chars,
            path: t.path,
            session_id: t.session_id,
            key: t.key,
            header: c.header,
            entries: c.entries,
            ids: c.ids,
            problems: Vec::new(),
            file: None,
            tail_clean: true,
            unsynced: false,
            group: t.group,
            cache: t.cache,
            file_len: Some(c.len),
            ino: c.ino,
        }
    }

    fn load(t: LoadTarget) -> Result<Self, StoreError> {
        Self::load_with(t, |path| fs::read(path))
    }

    /// [`Self::load`], the transcript being read by `read` (a test puts a concurrent
    /// writer's append around the read).
    fn load_with(
        t: LoadTarget,
        read: impl FnOnce(&Path) -> io::Result<Vec<u8>>,
    ) -> Result<Self, StoreError> {
        let LoadTarget {
            home,
            agent_id,
            key,
            session_id,
            path,
            strategy,
            tool_result_chars,
            group,
            cache,
        } = t;
        // The file is stamped before and after the read: equal stamps whose length is the
        // number of bytes read mean no write landed in between, so the bytes are all of
        // the file that stamp describes. Otherwise someone is writing it right now: the
        // log is used as read, but never cached (its stamp is unknown) and the file is
        // not repaired, which would cut off the line being written.
        let before = file_stamp(&path);
        let (header, entries, problems, tail_clean, stamp) = match read(&path) {
            Ok(bytes) if !bytes.is_empty() => {
                let stable = before
                    .filter(|st| st.len == bytes.len() as u64 && file_stamp(&path) == Some(*st));
                let (bytes, validated, stamp) = match stable {
                    Some(st) => {
                        let (bytes, problems, rewritten) = repair_on_load(
                            &home,
                            &agent_id,
                            &key,
                            &session_id,
                            &path,
                            bytes,
                            strategy,
                        )?;
                        // A repair replaced the file: stamp the new one, if it is still ours.
                        let stamp = if rewritten {
                            file_stamp(&path).filter(|now| now.len == bytes.len() as u64)
                        } else {
                            Some(st)
                        };
                        (bytes, Some(problems), stamp)
                    }
                    None => (bytes, None, None),
                };
                let parsed = parse_transcript(&bytes, &path)?;
                let problems = match validated {
                    // The validator already reported line damage; the typed parse adds
                    // only what it could not model.
                    Some(mut problems) => {
                        problems.extend(
                            parsed
                                .problems
                                .into_iter()
                                .filter(|p| p.kind == IssueKind::SkippedEntry),
                        );
                        problems
                    }
                    None => parsed.problems,
                };
                (
                    parsed.header,
                    parsed.entries,
                    problems,
                    bytes.ends_with(b"\n"),
                    stamp,
                )
            }
            // An empty file can only come from an interrupted creation: no data. (Not
            // cached: what a concurrent creator appended is unknown.)
            Ok(_) => (
                init_transcript(&path, &session_id, Some(&key))?,
                vec![],
                vec![],
                true,
                None,
            ),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                warn!(path = %path.display(), "transcript listed in the index is missing; starting it afresh");
                (
                    init_transcript(&path, &session_id, Some(&key))?,
                    vec![],
                    vec![],
                    true,
                    None,
                )
            }
            Err(e) => return Err(StoreError::io(&path, e)),
        };
        if !problems.is_empty() {
            warn!(path = %path.display(), problems = problems.len(), "transcript loaded with skipped lines");
        }
        if header.id != session_id {
            warn!(path = %path.display(), header_id = %header.id, "transcript header id differs from its file name");
        }
        Ok(FileSessionLog {
            ids: entries.iter().map(|e| e.id.clone()).collect(),
            home,
            agent_id,
            tool_result_chars,
            path,
            session_id,
            key,
            header,
            entries,
            problems,
            file: None,
            tail_clean,
            unsynced: false,
            group,
            cache,
            file_len: stamp.map(|st| st.len),
            ino: stamp.map_or(0, |st| st.ino),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn header(&self) -> &SessionHeader {
        &self.header
    }
}

#[async_trait]
impl SessionLog for FileSessionLog {
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
        &self.problems
    }

    fn context(&self) -> Vec<Message> {
        build_context(&self.entries)
    }

    async fn append(&mut self, body: EntryBody) -> Result<Entry, StoreError> {
        let entry = next_entry(
            &self.entries,
            |id| self.ids.contains(id),
            body,
            self.tool_result_chars,
            &self.session_id,
        );
        let mut line = Vec::new();
        let repaired_tail = !self.tail_clean;
        if !self.tail_clean {
            let path = self.path.clone();
            let session_id = self.session_id.clone();
            let (home, agent, key) = (self.home.clone(), self.agent_id.clone(), self.key.clone());
            if blocking(path.clone(), move || {
                repair_tail(&path, &session_id, &home, &agent, &key)
            })
            .await?
            {
                line.push(b'\n');
            }
        }
        serde_json::to_writer(&mut line, &entry)
            .map_err(|e| StoreError::io(&self.path, e.into()))?;
        line.push(b'\n');

        let file = match &self.file {
            Some(f) => f.clone(),
            None => {
                let path = self.path.clone();
                let f = blocking(path.clone(), move || {
                    OpenOptions::new()
                        .append(true)
                        .open(&path)
                        .map_err(|e| StoreError::io(&path, e))
                })
                .await?;
                let f = Arc::new(f);
                self.file = Some(f.clone());
                f
            }
        };
        // Until the write is known to be complete the tail is suspect, including when this
        // future is dropped mid-write.
        self.tail_clean = false;
        self.unsynced = true;
        let written = line.len() as u64;
        // A tail repair may have rewritten the file: the length is unknown from here on.
        let known_len = if repaired_tail { None } else { self.file_len };
        self.file_len = None;
        let path = self.path.clone();
        blocking(path.clone(), move || {
            // One write call for the whole line: an O_APPEND write is never interleaved
            // with another and a crash tears at most this line.
            (&*file)
                .write_all(&line)
                .map_err(|e| StoreError::io(&path, e))
        })
        .await?;
        self.tail_clean = true;
        self.file_len = known_len.map(|n| n + written);
        self.ids.insert(entry.id.clone());
        self.entries.push(entry.clone());
        Ok(entry)
    }

    async fn flush(&mut self) -> Result<(), StoreError> {
        let Some(file) = self.file.clone().filter(|_| self.unsynced) else {
            return Ok(());
        };
        let path = self.path.clone();
        match &self.group {
            None => {
                blocking(path.clone(), move || {
                    file.sync_data().map_err(|e| StoreError::io(&path, e))
                })
                .await?
            }
            // One syncfs covers every file of the filesystem written before it: all the
            // sessions whose turns ended in the same window.
            Some(group) => {
                group
                    .flush(|| {
                        blocking(path.clone(), move || {
                            use std::os::fd::AsRawFd;
                            // SAFETY: the descriptor is open for as long as `file` lives.
                            if unsafe { libc::syncfs(file.as_raw_fd()) } == 0 {
                                Ok(())
                            } else {
                                Err(StoreError::io(&path, io::Error::last_os_error()))
                            }
                        })
                    })
                    .await?
            }
        }
        self.unsynced = false;
        Ok(())
    }
}

/// Validates a transcript just read and, when it is damaged, repairs it on disk (backup,
/// atomic replace, incident). Returns the bytes to load, what was found and whether the
/// file was replaced.
///
/// Only the session's writer (the holder of its lease) may repair: the replaced file
/// would lose whatever another writer appends after the read, and that writer's open
/// handle would go on appending to the file no longer linked. [`FileSessionLog::load`]
/// skips the repair when the file changed during its read (a line being written looks
/// torn), but a writer between two appends (a run waiting on a tool: its call looks
/// unanswered) leaves the file still; readers use [`SessionStore::read`], which never
/// writes.
fn repair_on_load(
    home: &Path,
    agent_id: &str,
    key: &str,
    session_id: &str,
    path: &Path,
    bytes: Vec<u8>,
    strategy: Strategy,
) -> Result<(Vec<u8>, Vec<LoadProblem>, bool), StoreError> {
    let repair = repair_bytes(&bytes, strategy, session_id);
    let Some(fixed) = repair.bytes else {
        // Clean, hopeless (the parser reports it as corrupt) or nothing the strategy fixes.
        return Ok((bytes, repair.issues, false));
    };
    let backup = replace_with_backup(path, &bytes, &fixed)?;
    warn!(
        path = %path.display(),
        backup = %backup.display(),
        issues = repair.issues.len(),
        "transcript failed validation on load; backed up and repaired"
    );
    let incident = Incident {
        timestamp: String::new(),
        agent_id: Some(agent_id.to_owned()),
        session_key: Some(key.to_owned()),
        file: Some(path.to_owned()),
        issues: repair.issues.clone(),
        action: "repaired_on_load".into(),
        backup: Some(backup),
    };
    if let Err(e) = write_incident(home, &incident) {
        // The repair is done and durable; a missing report must not block the session.
        warn!(error = %e, "could not write integrity incident report");
    }
    Ok((fixed, repair.issues, true))
}

/// Runs blocking file work off the async runtime.
pub(crate) async fn blocking<R, F>(path: PathBuf, f: F) -> Result<R, StoreError>
where
    R: Send + 'static,
    F: FnOnce() -> Result<R, StoreError> + Send + 'static,
{
    match tokio::task::spawn_blocking(f).await {
        Ok(result) => result,
        Err(join) => Err(StoreError::io(
            path,
            io::Error::other(format!("storage task failed: {join}")),
        )),
    }
}

fn transcript_path_in(dir: &Path, session_id: &str) -> Result<PathBuf, StoreError> {
    if !is_safe_name(session_id, 128) {
        return Err(StoreError::Corrupt {
            path: dir.to_path_buf(),
            message: format!("session id {session_id:?} is not a safe file name"),
        });
    }
    Ok(dir.join(format!("{session_id}.jsonl")))
}

fn header_line(
    session_id: &str,
    key: Option<&str>,
) -> Result<(SessionHeader, Vec<u8>), serde_json::Error> {
    let header = SessionHeader {
        kind: "session".into(),
        version: TRANSCRIPT_VERSION,
        id: session_id.to_owned(),
        timestamp: iso_now(),
        cwd: std::env::current_dir()
            .map(|d| d.display().to_string())
            .unwrap_or_default(),
        session_key: key.map(str::to_owned),
    };
    let mut line = serde_json::to_vec(&header)?;
    line.push(b'\n');
    Ok((header, line))
}

/// Creates the transcript (or fills an empty one) with its header, durably.
fn init_transcript(
    path: &Path,
    session_id: &str,
    key: Option<&str>,
) -> Result<SessionHeader, StoreError> {
    let io_err = |e| StoreError::io(path, e);
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).map_err(|e| StoreError::io(dir, e))?;
    }
    let (header, line) = header_line(session_id, key).map_err(|e| io_err(e.into()))?;
    let mut file = OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .map_err(io_err)?;
    file.write_all(&line).map_err(io_err)?;
    file.sync_all().map_err(io_err)?;
    sync_dir(path)?;
    Ok(header)
}

/// Makes sure the next appended line starts on a fresh line. Returns `true` when the
/// caller must prefix a newline (the last line is complete JSON that merely lacks its
/// `\n`). A torn last line is backed up with the whole file to `<file>.bak.<ms>` and cut
/// off; if that leaves nothing, the header is rewritten.
fn repair_tail(
    path: &Path,
    session_id: &str,
    home: &Path,
    agent_id: &str,
    key: &str,
) -> Result<bool, StoreError> {
    let bytes = fs::read(path).map_err(|e| StoreError::io(path, e))?;
    if bytes.is_empty() {
        init_transcript(path, session_id, Some(key))?;
        return Ok(false);
    }
    if bytes.ends_with(b"\n") {
        return Ok(false);
    }
    let keep = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
    let tail = &bytes[keep..];
    let tail_is_whole = tail.iter().all(u8::is_ascii_whitespace)
        || serde_json::from_slice::<Entry>(tail).is_ok()
        || (keep == 0 && parse_header(tail).is_ok());
    if tail_is_whole {
        return Ok(true);
    }

    let backup = write_backup(path, &bytes)?;
    let file = OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(|e| StoreError::io(path, e))?;
    file.set_len(keep as u64)
        .and_then(|()| file.sync_all())
        .map_err(|e| StoreError::io(path, e))?;
    warn!(
        path = %path.display(),
        backup = %backup.display(),
        dropped_bytes = tail.len(),
        "transcript ended with a torn line; backed up and truncated to the last complete line"
    );
    let incident = Incident {
        timestamp: String::new(),
        agent_id: Some(agent_id.to_owned()),
        session_key: Some(key.to_owned()),
        file: Some(path.to_owned()),
        issues: vec![Issue {
            kind: IssueKind::TornLine,
            line: bytes[..keep].iter().filter(|b| **b == b'\n').count() + 1,
            entry_id: None,
            tool_call_id: None,
            description: format!("{} bytes of an unfinished write", tail.len()),
        }],
        action: "truncated_before_append".into(),
        backup: Some(backup.clone()),
    };
    if let Err(e) = write_incident(home, &incident) {
        warn!(error = %e, "could not write integrity incident report");
    }
    if keep == 0 {
        init_transcript(path, session_id, Some(key))?;
    }
    Ok(false)
}

/// Atomic replace of a whole file: temp file in the same directory, fsync, rename, fsync
/// the directory. A crash leaves either the old or the new content, never a mix.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    write_atomic_with(path, bytes, true)
}

/// [`write_atomic`]; when not `durable` nothing is fsynced: the rename still keeps the
/// file whole against a process crash, for data that can be recomputed after a power loss.
pub(crate) fn write_atomic_with(
    path: &Path,
    bytes: &[u8],
    durable: bool,
) -> Result<(), StoreError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.{}.tmp", uuid::Uuid::new_v4().simple()));
    let result = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
            .map_err(|e| StoreError::io(&tmp, e))?;
        f.write_all(bytes)
            .and_then(|()| if durable { f.sync_all() } else { Ok(()) })
            .map_err(|e| StoreError::io(&tmp, e))?;
        fs::rename(&tmp, path).map_err(|e| StoreError::io(path, e))?;
        if durable {
            sync_dir(path)
        } else {
            Ok(())
        }
    })();
    if result.is_err() {
        // Best effort: a leftover temp file is harmless, the original error matters more.
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// Writes `bytes` durably to a new `<path>.bak.<unix-ms>` (bumping the number if taken).
pub(crate) fn write_backup(path: &Path, bytes: &[u8]) -> Result<PathBuf, StoreError> {
    let mut ms = now_millis();
    loop {
        let mut name = OsString::from(path.as_os_str());
        name.push(format!(".bak.{ms}"));
        let backup = PathBuf::from(name);
        match OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&backup)
        {
            Ok(mut f) => {
                f.write_all(bytes)
                    .and_then(|()| f.sync_all())
                    .map_err(|e| StoreError::io(&backup, e))?;
                return Ok(backup);
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => ms += 1,
            Err(e) => return Err(StoreError::io(&backup, e)),
        }
    }
}

/// Makes a just-created or renamed directory entry durable.
pub(crate) fn sync_dir(path: &Path) -> Result<(), StoreError> {
    #[cfg(unix)]
    if let Some(dir) = path.parent() {
        File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| StoreError::io(dir, e))?;
    }
    #[cfg(not(unix))]
    let _ = path;
    Ok(())
}

/// Reads an agent's `sessions.json` (earlier versions, OpenClaw) to move it into the
/// database. A corrupt one is backed up and the rows are rebuilt from the transcripts.
pub(crate) fn read_legacy_index(dir: &Path, agent_id: &str) -> Result<Index, StoreError> {
    let path = dir.join(crate::sqlite::LEGACY_INDEX);
    let bytes = fs::read(&path).map_err(|e| StoreError::io(&path, e))?;
    match serde_json::from_slice::<Index>(&bytes) {
        Ok(mut index) => {
            for (key, meta) in &mut index {
                key.clone_into(&mut meta.key);
                agent_id.clone_into(&mut meta.agent_id);
            }
            // An edited index must not point outside the sessions directory.
            index.retain(|key, meta| {
                let ok = is_safe_name(&meta.session_id, 128) && validate_session_key(key).is_ok();
                if !ok {
                    warn!(key = %key, "skipping an index entry with an unusable key or session id");
                }
                ok
            });
            Ok(index)
        }
        Err(err) => {
            let backup = write_backup(&path, &bytes)?;
            let rebuilt = rebuild_index(dir, agent_id)?;
            warn!(
                path = %path.display(),
                backup = %backup.display(),
                error = %err,
                sessions = rebuilt.len(),
                "session index was corrupt; backed up and rebuilt from transcripts (keys are now session ids)"
            );
            Ok(rebuilt)
        }
    }
}

/// Rebuilds index rows from `*.jsonl` files: each session under the key its header
/// records (older transcripts have none and are keyed by their id; when two claim one
/// key the newer wins); totals are summed from the assistant messages.
pub(crate) fn rebuild_index(dir: &Path, agent_id: &str) -> Result<Index, StoreError> {
    let mut index = Index::new();
    let read_dir = match fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(index),
        Err(e) => return Err(StoreError::io(dir, e)),
    };
    for item in read_dir {
        let item = item.map_err(|e| StoreError::io(dir, e))?;
        let name = item.file_name();
        let Some(session_id) = name.to_str().and_then(|n| n.strip_suffix(".jsonl")) else {
            continue;
        };
        if !is_safe_name(session_id, 128) {
            warn!(file = ?name, "skipping transcript with an unusable file name during index rebuild");
            continue;
        }
        let path = item.path();
        let mtime = item
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_millis() as i64);
        let mut meta = SessionMeta {
            key: session_id.to_owned(),
            session_id: session_id.to_owned(),
            agent_id: agent_id.to_owned(),
            created_at: mtime,
            updated_at: mtime,
            provider: None,
            model: None,
            usage: Usage::default(),
            label: None,
        };
        match read_transcript(&path) {
            Ok((header, entries, _)) => {
                meta.created_at = iso_to_millis(&header.timestamp).unwrap_or(mtime);
                if let Some(key) = header
                    .session_key
                    .filter(|k| validate_session_key(k).is_ok())
                {
                    meta.key = key;
                }
                meta.add_runs(&entries);
            }
            // Still listed: opening it will report the error instead of hiding the file.
            Err(e) => warn!(error = %e, "unreadable transcript during index rebuild"),
        }
        match index.get(&meta.key) {
            Some(existing) if existing.created_at > meta.created_at => {}
            _ => {
                index.insert(meta.key.clone(), meta);
            }
        }
    }
    Ok(index)
}

/// Locks a cache; a poisoned one is still a valid map (nothing is half-updated by an
/// insert or remove).
fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(text: &str) -> EntryBody {
        EntryBody::Message {
            message: Message::user(text),
        }
    }

    fn texts(log: &dyn SessionLog) -> Vec<String> {
        log.context().iter().map(Message::text).collect()
    }

    /// The JSONL line a writer would append after `entries`.
    fn line_after(entries: &[Entry], text: &str) -> Vec<u8> {
        let mut line = serde_json::to_vec(&next_entry(entries, |_| false, user(text), 0, "s"))
            .expect("entry serializes");
        line.push(b'\n');
        line
    }

    fn append_raw(path: &Path, bytes: &[u8]) {
        OpenOptions::new()
            .append(true)
            .open(path)
            .and_then(|mut f| f.write_all(bytes))
            .expect("append");
    }

    /// A session holding the entry "one", closed (so cached), and the line a writer
    /// appends next.
    async fn session_with_one(store: &FileSessionStore) -> (String, Vec<u8>) {
        let mut log = store.open("main", "k").await.expect("open");
        log.append(user("one")).await.expect("append");
        let line = line_after(log.entries(), "two");
        (log.session_id().to_owned(), line)
    }

    /// What `open` loads from when the session is not cached.
    fn target(store: &FileSessionStore, session_id: &str) -> LoadTarget {
        let path = store.transcript_path("main", session_id).expect("path");
        lock(&store.log_cache).pop(&path);
        LoadTarget {
            home: store.home.clone(),
            agent_id: "main".into(),
            key: "k".into(),
            session_id: session_id.into(),
            path,
            strategy: store.strategy,
            tool_result_chars: store.tool_result_chars,
            group: None,
            cache: Arc::downgrade(&store.log_cache),
        }
    }

    /// A load (a reader's, say) that reads just before a writer's append must not put
    /// entries missing that append in the cache under a stamp that includes it.
    #[tokio::test]
    async fn a_load_racing_an_append_is_not_cached() {
        let home = tempfile::tempdir().expect("tempdir");
        let store = FileSessionStore::new(home.path());
        let (sid, line) = session_with_one(&store).await;

        let loaded = FileSessionLog::load_with(target(&store, &sid), |path| {
            let bytes = fs::read(path);
            append_raw(path, &line); // lands between the read and the stamp
            bytes
        })
        .expect("load");
        assert_eq!(texts(&loaded), ["one"]);
        drop(loaded);

        let log = store.open("main", "k").await.expect("reopen");
        assert_eq!(texts(log.as_ref()), ["one", "two"], "stale cache");
        drop(log);
        // A load from a still file is cached, with the file's length.
        let path = store.transcript_path("main", &sid).expect("path");
        let cached_len = lock(&store.log_cache).peek(&path).map(|c| c.len);
        assert_eq!(cached_len, Some(fs::metadata(&path).expect("stat").len()));
    }

    /// A load that meets a line still being written leaves the file alone: a repair
    /// would cut the line off (and the writer would go on in the replaced file).
    #[tokio::test]
    async fn a_line_being_written_is_not_cut_by_a_load() {
        let home = tempfile::tempdir().expect("tempdir");
        let store = FileSessionStore::new(home.path());
        let (sid, line) = session_with_one(&store).await;
        let path = store.transcript_path("main", &sid).expect("path");
        let mut expected = fs::read(&path).expect("read");
        expected.extend_from_slice(&line);

        let (head, rest) = line.split_at(line.len() / 2);
        let loaded = FileSessionLog::load_with(target(&store, &sid), |path| {
            append_raw(path, head); // the read comes halfway through the write
            let bytes = fs::read(path);
            append_raw(path, rest);
            bytes
        })
        .expect("load");
        assert_eq!(texts(&loaded), ["one"]);
        assert_eq!(loaded.problems().len(), 1);
        assert_eq!(loaded.problems()[0].kind, IssueKind::TornLine);
        assert_eq!(
            String::from_utf8_lossy(&fs::read(&path).expect("read")),
            String::from_utf8_lossy(&expected),
            "the append was cut"
        );
        let backups = fs::read_dir(path.parent().expect("dir"))
            .expect("dir")
            .filter(|e| {
                e.as_ref()
                    .is_ok_and(|e| e.file_name().to_string_lossy().contains(".bak."))
            })
            .count();
        assert_eq!(backups, 0, "nothing was repaired");
        drop(loaded);

        let log = store.open("main", "k").await.expect("reopen");
        assert_eq!(texts(log.as_ref()), ["one", "two"]);
        assert!(log.problems().is_empty(), "{:?}", log.problems());
    }
}
