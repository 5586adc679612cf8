//! A local fake of the Telegram Bot API, for end-to-end tests of a Telegram
//! channel without the network or a real bot.
//!
//! It speaks the real wire shapes (`{"ok":true,"result":..}` and
//! `{"ok":false,"error_code":..,"description":..}` with the real descriptions)
//! and keeps the semantics a channel relies on and can get wrong: offsets that
//! confirm updates, long polls woken by new updates, the 409 when two
//! `getUpdates` overlap, Telegram's strict HTML/MarkdownV2 parsing, the 4096
//! UTF-16 unit limit, "message is not modified" on a repeated edit. Parameters
//! are accepted as JSON, as a form or in the query string, as Telegram does.
//!
//! Tests feed updates with [`TelegramFake::push_message`], script failures with
//! [`TelegramFake::fail_next`] and look at what the bot did with
//! [`TelegramFake::calls`] and [`TelegramFake::sent`].

use std::collections::{HashMap, VecDeque};
use std::io;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode, Uri};
use axum::response::Response;
use axum::Router;
use serde_json::{json, Map, Value};

use crate::killable::Served;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// Telegram's limit for a message text, in UTF-16 code units after entity parsing.
pub const MAX_TEXT_UTF16: usize = 4096;

/// The methods the fake implements, spelled as Telegram documents them. Method
/// names are case-insensitive on the wire; calls are recorded under these.
const METHODS: [&str; 11] = [
    "getMe",
    "getUpdates",
    "deleteWebhook",
    "getWebhookInfo",
    "setMyCommands",
    "getMyCommands",
    "deleteMyCommands",
    "sendMessage",
    "editMessageText",
    "sendChatAction",
    "deleteMessage",
];

/// Update kinds Telegram leaves out unless `allowed_updates` names them.
const OPT_IN_UPDATES: [&str; 3] = ["chat_member", "message_reaction", "message_reaction_count"];

const CHAT_ACTIONS: [&str; 11] = [
    "typing",
    "upload_photo",
    "record_video",
    "upload_video",
    "record_voice",
    "upload_voice",
    "upload_document",
    "choose_sticker",
    "find_location",
    "record_video_note",
    "upload_video_note",
];

/// One request the fake received, in arrival order.
#[derive(Debug, Clone)]
pub struct Call {
    /// Spelled as in Telegram's documentation when the fake knows the method
    /// (the wire spelling is case-insensitive), else as sent.
    pub method: String,
    /// Always an object. Query string, form and JSON body merged; known numeric,
    /// boolean and JSON-serialised fields are turned into their JSON types, so
    /// assertions do not depend on the encoding the client chose.
    pub params: Value,
    pub at: Instant,
    /// HTTP status of the answer: `None` while a long poll is still open, or
    /// when its connection closed before it was answered.
    pub status: Option<u16>,
    /// `description` of an error answer, or [`NO_ANSWER`].
    pub error: Option<String>,
}

/// A message the bot sent, as it is now (after edits and deletion).
#[derive(Debug, Clone, PartialEq)]
pub struct SentMessage {
    pub message_id: i64,
    pub chat_id: i64,
    /// What a user sees: tags and markup removed, HTML entities decoded.
    pub text: String,
    /// The `text` parameter as sent (or as last edited).
    pub raw_text: String,
    pub parse_mode: Option<String>,
    /// Message entities as Telegram returns them (`type`, `offset`, `length`, ..).
    pub entities: Vec<Value>,
    pub reply_to_message_id: Option<i64>,
    /// Successful `editMessageText` calls on it.
    pub edits: u32,
    pub deleted: bool,
}

/// A message from a user, to be delivered to the bot as an update.
#[derive(Debug, Clone)]
pub struct Incoming {
    pub chat_id: i64,
    /// "private", "group" or "supergroup".
    pub chat_type: &'static str,
    /// Groups only; "Test group" when `None`.
    pub chat_title: Option<String>,
    pub from_id: i64,
    pub from_username: Option<String>,
    pub from_first_name: String,
    pub from_is_bot: bool,
    pub text: String,
    pub reply_to_message_id: Option<i64>,
}

impl Incoming {
    /// A direct message: the private chat's id is the user's id.
    pub fn dm(from_id: i64, username: &str, text: &str) -> Incoming {
        Incoming {
            chat_id: from_id,
            chat_type: "private",
            chat_title: None,
            from_id,
            from_username: Some(username.to_string()),
            from_first_name: username.to_string(),
            from_is_bot: false,
            text: text.to_string(),
            reply_to_message_id: None,
        }
    }

    /// A message in a basic group (Telegram group ids are negative).
    pub fn group(chat_id: i64, from_id: i64, username: &str, text: &str) -> Incoming {
        Incoming {
            chat_id,
            chat_type: "group",
            chat_title: Some("Test group".to_string()),
            ..Incoming::dm(from_id, username, text)
        }
    }

    /// Makes it a reply to `message_id` of the same chat.
    pub fn reply_to(mut self, message_id: i64) -> Incoming {
        self.reply_to_message_id = Some(message_id);
        self
    }
}

/// An error answer. `retry_after` goes into `parameters`, where Telegram puts it
/// (there is no Retry-After header).
#[derive(Debug, Clone)]
struct ApiError {
    code: u16,
    description: String,
    retry_after: Option<u64>,
}

impl ApiError {
    fn new(code: u16, description: impl Into<String>) -> ApiError {
        ApiError {
            code,
            description: description.into(),
            retry_after: None,
        }
    }
}

fn bad_request(reason: impl std::fmt::Display) -> ApiError {
    ApiError::new(400, format!("Bad Request: {reason}"))
}

fn not_found() -> ApiError {
    ApiError::new(404, "Not Found")
}

type Answer = Result<Value, ApiError>;

/// Locks ignoring poison: a panicking test predicate must not break the server.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// A message the chat history holds, sent by the bot or pushed as incoming.
struct Stored {
    message: Value,
    /// Index into `BotState::sent` for the bot's own messages.
    sent: Option<usize>,
}

/// The `getUpdates` currently waiting; a newer one cancels `terminate`.
struct ActivePoll {
    id: u64,
    terminate: CancellationToken,
}

struct BotState {
    calls: Vec<Call>,
    /// Unconfirmed updates, by increasing `update_id`.
    pending: VecDeque<Value>,
    next_update_id: i64,
    /// The last `allowed_updates` a `getUpdates` gave; it persists, as on Telegram.
    allowed_updates: Vec<String>,
    active_poll: Option<ActivePoll>,
    next_poll_id: u64,
    failures: HashMap<String, VecDeque<ApiError>>,
    chats: HashMap<i64, Value>,
    next_message_id: HashMap<i64, i64>,
    messages: HashMap<(i64, i64), Stored>,
    sent: Vec<SentMessage>,
    commands: Value,
}

struct Shared {
    token: String,
    bot_id: i64,
    username: String,
    state: Mutex<BotState>,
    /// A call was recorded or answered.
    calls_changed: Notify,
    /// An update was queued.
    updates_changed: Notify,
}

impl Shared {
    fn state(&self) -> MutexGuard<'_, BotState> {
        lock(&self.state)
    }

    /// The bot as the `from` of its messages.
    fn bot_user(&self) -> Value {
        json!({
            "id": self.bot_id,
            "is_bot": true,
            "first_name": self.username,
            "username": self.username,
        })
    }

    fn record(&self, method: String, params: Value) -> usize {
        let index = {
            let mut st = self.state();
            st.calls.push(Call {
                method,
                params,
                at: Instant::now(),
                status: None,
                error: None,
            });
            st.calls.len() - 1
        };
        self.calls_changed.notify_waiters();
        index
    }

    fn finish(&self, index: usize, answer: &Answer) {
        if let Some(call) = self.state().calls.get_mut(index) {
            match answer {
                Ok(_) => call.status = Some(200),
                Err(e) => {
                    call.status = Some(e.code);
                    call.error = Some(e.description.clone());
                }
            }
        }
        self.calls_changed.notify_waiters();
    }

    fn enqueue(&self, mut update: Value) -> i64 {
        let id = {
            let mut st = self.state();
            let id = st.next_update_id;
            st.next_update_id += 1;
            update["update_id"] = json!(id);
            st.pending.push_back(update);
            id
        };
        self.updates_changed.notify_waiters();
        id
    }
}

impl BotState {
    fn new() -> BotState {
        BotState {
            calls: Vec::new(),
            pending: VecDeque::new(),
            next_update_id: 1,
            allowed_updates: Vec::new(),
            active_poll: None,
            next_poll_id: 1,
            failures: HashMap::new(),
            chats: HashMap::new(),
            next_message_id: HashMap::new(),
            messages: HashMap::new(),
            sent: Vec::new(),
            commands: json!([]),
        }
    }

    fn take_message_id(&mut self, chat_id: i64) -> i64 {
        let next = self.next_message_id.entry(chat_id).or_insert(1);
        let id = *next;
        *next += 1;
        id
    }

    /// The chat as Telegram describes it: as last seen in an incoming message,
    /// else guessed from the id's sign (users positive, groups negative,
    /// supergroups -100…).
    fn chat(&self, chat_id: i64) -> Value {
        if let Some(chat) = self.chats.get(&chat_id) {
            return chat.clone();
        }
        if chat_id > 0 {
            json!({"id": chat_id, "type": "private", "first_name": format!("user{chat_id}")})
        } else if chat_id < -1_000_000_000_000 {
            json!({"id": chat_id, "type": "supergroup", "title": "Test group"})
        } else {
            json!({"id": chat_id, "type": "group", "title": "Test group"})
        }
    }

    /// Forgets what `offset` confirms: ids below it, or all but the last
    /// `-offset` when negative.
    fn confirm(&mut self, offset: i64) {
        if offset > 0 {
            while self
                .pending
                .front()
                .is_some_and(|u| u["update_id"].as_i64().unwrap_or(0) < offset)
            {
                self.pending.pop_front();
            }
        } else if offset < 0 {
            let keep = usize::try_from(offset.unsigned_abs()).unwrap_or(usize::MAX);
            while self.pending.len() > keep {
                self.pending.pop_front();
            }
        }
    }

    fn allowed(&self, update: &Value) -> bool {
        let kind = update
            .as_object()
            .and_then(|o| o.keys().find(|k| *k != "update_id"))
            .map(String::as_str)
            .unwrap_or("");
        if self.allowed_updates.is_empty() {
            !OPT_IN_UPDATES.contains(&kind)
        } else {
            self.allowed_updates.iter().any(|a| a == kind)
        }
    }

    fn batch(&self, limit: usize) -> Vec<Value> {
        self.pending
            .iter()
            .filter(|u| self.allowed(u))
            .take(limit)
            .cloned()
            .collect()
    }

    fn message(&self, chat_id: i64, message_id: i64) -> Option<&Stored> {
        self.messages.get(&(chat_id, message_id))
    }
}

/// Removes the poll from `active_poll` however its handler ends (answered,
/// or dropped with its connection).
struct PollSlot<'a> {
    shared: &'a Shared,
    id: u64,
}

impl Drop for PollSlot<'_> {
    fn drop(&mut self) {
        let mut st = self.shared.state();
        if st.active_poll.as_ref().is_some_and(|p| p.id == self.id) {
            st.active_poll = None;
        }
    }
}

/// A running fake Bot API for one bot. Clones share the server and its state;
/// dropping the last clone stops the server without waiting.
#[derive(Clone)]
pub struct TelegramFake {
    shared: Arc<Shared>,
    life: Arc<Served>,
}

impl std::fmt::Debug for TelegramFake {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TelegramFake")
            .field("port", &self.life.port)
            .field("username", &self.shared.username)
            .field("up", &self.life.is_up())
            .finish()
    }
}

impl TelegramFake {
    /// Serves on 127.0.0.1, on a free port, for the bot `bot_id`/`username`
    /// authenticated by `token`.
    pub async fn start(token: &str, bot_id: i64, username: &str) -> TelegramFake {
        TelegramFake::start_on(0, token, bot_id, username)
            .await
            .expect("binding 127.0.0.1:0 for the Telegram fake")
    }

    /// Serves on 127.0.0.1:`port`, e.g. where a stopped fake was. The state is
    /// new: update ids start again at 1, so a client that kept its offset would
    /// skip them; [`TelegramFake::disconnect`] and [`TelegramFake::restore`]
    /// keep the state instead.
    pub async fn start_on(
        port: u16,
        token: &str,
        bot_id: i64,
        username: &str,
    ) -> io::Result<TelegramFake> {
        let shared = Arc::new(Shared {
            token: token.to_string(),
            bot_id,
            username: username.to_string(),
            state: Mutex::new(BotState::new()),
            calls_changed: Notify::new(),
            updates_changed: Notify::new(),
        });
        let app_state = shared.clone();
        let served = Served::start_with(port, move |kill| {
            Router::new().fallback(handle).with_state(App {
                shared: app_state.clone(),
                kill,
            })
        })
        .await?;
        Ok(TelegramFake {
            shared,
            life: Arc::new(served),
        })
    }

    /// The channel's API base: the client appends `/bot<token>/<method>`.
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.life.port)
    }

    /// Full URL of `method` with the right token.
    pub fn method_url(&self, method: &str) -> String {
        format!("{}/bot{}/{method}", self.base_url(), self.shared.token)
    }

    pub fn port(&self) -> u16 {
        self.life.port
    }

    pub fn token(&self) -> &str {
        &self.shared.token
    }

    pub fn bot_id(&self) -> i64 {
        self.shared.bot_id
    }

    pub fn username(&self) -> &str {
        &self.shared.username
    }

    /// Queues `msg` as a `message` update and wakes a waiting long poll.
    /// Returns its `update_id`. Entities are added as Telegram would: a
    /// `mention` for each `@username`, a `bot_command` for a leading `/command`.
    pub fn push_message(&self, msg: Incoming) -> i64 {
        let message = {
            let mut st = self.shared.state();
            let chat = if msg.chat_type == "private" {
                let mut chat = json!({
                    "id": msg.chat_id,
                    "type": "private",
                    "first_name": msg.from_first_name,
                });
                if let Some(u) = &msg.from_username {
                    chat["username"] = json!(u);
                }
                chat
            } else {
                json!({
                    "id": msg.chat_id,
                    "type": msg.chat_type,
                    "title": msg.chat_title.as_deref().unwrap_or("Test group"),
                })
            };
            st.chats.insert(msg.chat_id, chat.clone());
            let mut from = json!({
                "id": msg.from_id,
                "is_bot": msg.from_is_bot,
                "first_name": msg.from_first_name,
            });
            if let Some(u) = &msg.from_username {
                from["username"] = json!(u);
            }
            let message_id = st.take_message_id(msg.chat_id);
            let mut message = json!({
                "message_id": message_id,
                "from": from,
                "chat": chat,
                "date": unix_now(),
                "text": msg.text,
            });
            let entities = incoming_entities(&msg.text);
            if !entities.is_empty() {
                message["entities"] = Value::Array(entities);
            }
            if let Some(target) = msg.reply_to_message_id {
                message["reply_to_message"] = reply_target(&st, msg.chat_id, target);
            }
            st.messages.insert(
                (msg.chat_id, message_id),
                Stored {
                    message: message.clone(),
                    sent: None,
                },
            );
            message
        };
        self.shared.enqueue(json!({ "message": message }))
    }

    /// Queues any update (`{"callback_query": ..}`, ..); its `update_id` is set
    /// here and returned.
    pub fn push_raw_update(&self, update: Value) -> i64 {
        assert!(update.is_object(), "an update is a JSON object: {update}");
        self.shared.enqueue(update)
    }

    /// Updates not yet confirmed by an offset.
    pub fn pending_updates(&self) -> usize {
        self.shared.state().pending.len()
    }

    /// The next call of `method` is answered with this error instead (once per
    /// call; several queue up). `retry_after` becomes `parameters.retry_after`,
    /// as with Telegram's 429 "Too Many Requests: retry after N".
    pub fn fail_next(
        &self,
        method: &str,
        error_code: u16,
        description: &str,
        retry_after: Option<u64>,
    ) {
        let method = canonical_method(method).unwrap_or(method).to_string();
        self.shared
            .state()
            .failures
            .entry(method)
            .or_default()
            .push_back(ApiError {
                code: error_code,
                description: description.to_string(),
                retry_after,
            });
    }

    /// Every call received, in order, including rejected ones.
    pub fn calls(&self) -> Vec<Call> {
        self.shared.state().calls.clone()
    }

    /// The calls of `method` (case-insensitive).
    pub fn calls_to(&self, method: &str) -> Vec<Call> {
        let method = canonical_method(method).unwrap_or(method);
        self.shared
            .state()
            .calls
            .iter()
            .filter(|c| c.method == method)
            .cloned()
            .collect()
    }

    /// Calls answered with 409 (overlapping `getUpdates`): a channel polling
    /// correctly has none.
    pub fn conflicts(&self) -> usize {
        self.shared
            .state()
            .calls
            .iter()
            .filter(|c| c.status == Some(409))
            .count()
    }

    /// The bot's messages in `chat_id`, oldest first.
    pub fn sent(&self, chat_id: i64) -> Vec<SentMessage> {
        self.shared
            .state()
            .sent
            .iter()
            .filter(|m| m.chat_id == chat_id)
            .cloned()
            .collect()
    }

    /// Waits until `pred` holds for the calls so far (re-checked whenever a
    /// call arrives or is answered) or `timeout` passes; returns whether it held.
    /// `pred` runs under the fake's lock: it must look at the slice only, not
    /// call the fake.
    pub async fn wait_for(&self, timeout: Duration, pred: impl Fn(&[Call]) -> bool) -> bool {
        crate::wait_until(&self.shared.calls_changed, timeout, || {
            pred(&self.shared.state().calls)
        })
        .await
    }

    /// A network outage: cuts every open connection (a client in a long poll
    /// sees its request fail) and closes the port, so new connections are
    /// refused, until [`TelegramFake::restore`]. Updates, messages and calls are
    /// kept.
    pub async fn disconnect(&self) {
        self.life.disconnect().await;
    }

    /// Serves again on the same port with the same state after
    /// [`TelegramFake::disconnect`]; a no-op while serving.
    pub async fn restore(&self) -> io::Result<()> {
        self.life.restore().await
    }

    /// Stops serving, for every clone: open connections are cut (not answered)
    /// and the port is free once this returns.
    pub async fn stop(self) {
        self.disconnect().await;
    }
}

/// The update's `reply_to_message`: the replied message as stored (without its
/// own reply, Telegram does not nest them), or a bare stub for an unknown one.
fn reply_target(st: &BotState, chat_id: i64, message_id: i64) -> Value {
    match st.message(chat_id, message_id) {
        Some(stored) => {
            let mut m = stored.message.clone();
            if let Some(o) = m.as_object_mut() {
                o.remove("reply_to_message");
            }
            m
        }
        None => json!({
            "message_id": message_id,
            "chat": st.chat(chat_id),
            "date": 0,
        }),
    }
}

fn utf16_len(s: &str) -> usize {
    s.chars().map(char::len_utf16).sum()
}

fn is_username_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// `mention` and `bot_command` entities of a user's text, with UTF-16 offsets.
fn incoming_entities(text: &str) -> Vec<Value> {
    let mut entities = Vec::new();
    if let Some(rest) = text.strip_prefix('/') {
        let name = rest.find(|c| !is_username_char(c)).unwrap_or(rest.len());
        if name > 0 {
            let mut end = 1 + name;
            if let Some(at) = text[end..].strip_prefix('@') {
                let bot = at.find(|c| !is_username_char(c)).unwrap_or(at.len());
                if bot > 0 {
                    end += 1 + bot;
                }
            }
            entities.push(json!({"type": "bot_command", "offset": 0, "length": end}));
        }
    }
    let mut offset = 0;
    let mut prev: Option<char> = None;
    for (i, c) in text.char_indices() {
        let at_boundary = prev.is_none_or(|p| !is_username_char(p) && p != '@');
        if c == '@' && at_boundary {
            let rest = &text[i + 1..];
            let len = rest.find(|c| !is_username_char(c)).unwrap_or(rest.len());
            if (1..=32).contains(&len) {
                entities.push(json!({"type": "mention", "offset": offset, "length": 1 + len}));
            }
        }
        offset += c.len_utf16();
        prev = Some(c);
    }
    entities
}

fn canonical_method(name: &str) -> Option<&'static str> {
    METHODS
        .iter()
        .copied()
        .find(|m| m.eq_ignore_ascii_case(name))
}

#[derive(Clone)]
struct App {
    shared: Arc<Shared>,
    /// This server instance's end: long polls answer at once so the cut
    /// connection fails now, not when the poll would have timed out.
    kill: CancellationToken,
}

async fn handle(State(app): State<App>, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    let Some((token, method)) = uri
        .path()
        .strip_prefix("/bot")
        .and_then(|rest| rest.split_once('/'))
    else {
        return respond(Err(not_found()));
    };
    let canonical = canonical_method(method);
    let name = canonical.unwrap_or(method).to_string();
    let (params, bad_params) = match collect_params(uri.query(), &headers, &body) {
        Ok(p) => (p, None),
        Err(e) => (Map::new(), Some(e)),
    };
    let shared = &app.shared;
    let record = CallRecord {
        shared,
        index: shared.record(name, Value::Object(params.clone())),
        answered: false,
    };
    let answer = if token != shared.token {
        Err(ApiError::new(401, "Unauthorized"))
    } else if let Some(e) = bad_params {
        Err(e)
    } else if let Some(method) = canonical {
        let scripted = shared
            .state()
            .failures
            .get_mut(method)
            .and_then(VecDeque::pop_front);
        match scripted {
            Some(e) => Err(e),
            None => dispatch(&app, method, &params).await,
        }
    } else {
        Err(not_found())
    };
    // A long poll ended by `disconnect` is never delivered: the record's drop
    // says so instead.
    if !app.kill.is_cancelled() {
        record.answer(&answer);
    }
    respond(answer)
}

/// [`Call::error`] of a call whose connection closed before its answer.
pub const NO_ANSWER: &str = "no answer: the connection closed first";

/// The call's recorded outcome. Dropped unanswered (the handler went with its
/// connection, or the answer cannot be delivered), it marks the call
/// [`NO_ANSWER`], so a test can wait for a client to have given up a poll.
struct CallRecord<'a> {
    shared: &'a Shared,
    index: usize,
    answered: bool,
}

impl CallRecord<'_> {
    fn answer(mut self, answer: &Answer) {
        self.answered = true;
        self.shared.finish(self.index, answer);
    }
}

impl Drop for CallRecord<'_> {
    fn drop(&mut self) {
        if self.answered {
            return;
        }
        if let Some(call) = self.shared.state().calls.get_mut(self.index) {
            call.error = Some(NO_ANSWER.to_string());
        }
        self.shared.calls_changed.notify_waiters();
    }
}

fn respond(answer: Answer) -> Response {
    let (status, body) = match answer {
        Ok(result) => (StatusCode::OK, json!({"ok": true, "result": result})),
        Err(e) => {
            let mut body = json!({
                "ok": false,
                "error_code": e.code,
                "description": e.description,
            });
            if let Some(secs) = e.retry_after {
                body["parameters"] = json!({"retry_after": secs});
            }
            let status = StatusCode::from_u16(e.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            (status, body)
        }
    };
    let mut resp = Response::new(Body::from(body.to_string()));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}

async fn dispatch(app: &App, method: &str, p: &Map<String, Value>) -> Answer {
    let shared = &app.shared;
    match method {
        "getMe" => {
            let mut me = shared.bot_user();
            me["can_join_groups"] = json!(true);
            me["can_read_all_group_messages"] = json!(false);
            me["supports_inline_queries"] = json!(false);
            me["can_connect_to_business"] = json!(false);
            me["has_main_web_app"] = json!(false);
            Ok(me)
        }
        "getUpdates" => get_updates(app, p).await,
        "deleteWebhook" => {
            if bool_param(p, "drop_pending_updates") {
                shared.state().pending.clear();
            }
            Ok(json!(true))
        }
        "getWebhookInfo" => Ok(json!({
            "url": "",
            "has_custom_certificate": false,
            "pending_update_count": shared.state().pending.len(),
        })),
        "setMyCommands" => set_my_commands(shared, p),
        "getMyCommands" => Ok(shared.state().commands.clone()),
        "deleteMyCommands" => {
            shared.state().commands = json!([]);
            Ok(json!(true))
        }
        "sendMessage" => send_message(shared, p),
        "editMessageText" => edit_message_text(shared, p),
        "sendChatAction" => {
            chat_id_param(p)?;
            match p.get("action").and_then(Value::as_str) {
                Some(a) if CHAT_ACTIONS.contains(&a) => Ok(json!(true)),
                Some(_) => Err(bad_request("wrong parameter action in request")),
                None => Err(bad_request("parameter \"action\" is required")),
            }
        }
        "deleteMessage" => {
            let chat_id = chat_id_param(p)?;
            let message_id = int_param(p, "message_id")?
                .ok_or_else(|| bad_request("message identifier is not specified"))?;
            let mut st = shared.state();
            let Some(stored) = st.messages.remove(&(chat_id, message_id)) else {
                return Err(bad_request("message to delete not found"));
            };
            if let Some(sent) = stored.sent.and_then(|i| st.sent.get_mut(i)) {
                sent.deleted = true;
            }
            Ok(json!(true))
        }
        _ => Err(not_found()),
    }
}

async fn get_updates(app: &App, p: &Map<String, Value>) -> Answer {
    let shared = &app.shared;
    let offset = int_param(p, "offset")?.unwrap_or(0);
    let limit = int_param(p, "limit")?.unwrap_or(100).clamp(1, 100) as usize;
    let timeout = int_param(p, "timeout")?.unwrap_or(0).max(0) as u64;
    let allowed = match p.get("allowed_updates") {
        None | Some(Value::Null) => None,
        Some(Value::Array(kinds)) => Some(
            kinds
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect::<Vec<_>>(),
        ),
        Some(_) => return Err(bad_request("can't parse allowed updates list")),
    };
    let (id, terminated) = {
        let mut st = shared.state();
        // Telegram answers the older request, not the newer one.
        if let Some(earlier) = st.active_poll.take() {
            earlier.terminate.cancel();
        }
        st.confirm(offset);
        if let Some(allowed) = allowed {
            st.allowed_updates = allowed;
        }
        let batch = st.batch(limit);
        if !batch.is_empty() || timeout == 0 {
            return Ok(Value::Array(batch));
        }
        let id = st.next_poll_id;
        st.next_poll_id += 1;
        let terminate = CancellationToken::new();
        st.active_poll = Some(ActivePoll {
            id,
            terminate: terminate.clone(),
        });
        (id, terminate)
    };
    let _slot = PollSlot { shared, id };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(timeout);
    loop {
        let pushed = shared.updates_changed.notified();
        tokio::pin!(pushed);
        pushed.as_mut().enable();
        if terminated.is_cancelled() {
            return Err(conflict());
        }
        let batch = shared.state().batch(limit);
        if !batch.is_empty() {
            return Ok(Value::Array(batch));
        }
        tokio::select! {
            biased;
            _ = terminated.cancelled() => return Err(conflict()),
            // Its connection is being cut; what is returned is never delivered.
            _ = app.kill.cancelled() => return Err(ApiError::new(502, "Bad Gateway")),
            _ = &mut pushed => {}
            _ = tokio::time::sleep_until(deadline) => return Ok(json!([])),
        }
    }
}

fn conflict() -> ApiError {
    ApiError::new(
        409,
        "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running",
    )
}

fn set_my_commands(shared: &Shared, p: &Map<String, Value>) -> Answer {
    let Some(Value::Array(commands)) = p.get("commands") else {
        return Err(bad_request("parameter \"commands\" is required"));
    };
    for c in commands {
        let name = c.get("command").and_then(Value::as_str).unwrap_or("");
        let valid = (1..=32).contains(&name.len())
            && name
                .chars()
                .all(|ch| ch.is_ascii_lowercase() || ch.is_ascii_digit() || ch == '_');
        if !valid {
            return Err(bad_request("BOT_COMMAND_INVALID"));
        }
        let description = c.get("description").and_then(Value::as_str).unwrap_or("");
        if description.is_empty() || description.chars().count() > 256 {
            return Err(bad_request("command description is invalid"));
        }
    }
    shared.state().commands = Value::Array(commands.clone());
    Ok(json!(true))
}

/// The text as a user sees it plus its entities, per `parse_mode` (or the
/// explicit `entities` without one).
fn formatted(p: &Map<String, Value>, text: &str) -> Result<(String, Vec<Value>), ApiError> {
    let mode = p
        .get("parse_mode")
        .and_then(Value::as_str)
        .filter(|m| !m.is_empty());
    let parsed = match mode.map(str::to_ascii_lowercase).as_deref() {
        None => {
            let entities = match p.get("entities") {
                Some(Value::Array(e)) => e.clone(),
                _ => Vec::new(),
            };
            return Ok((text.to_string(), entities));
        }
        Some("html") => parse_html(text),
        Some("markdownv2") => parse_markdown_v2(text),
        Some("markdown") => parse_markdown(text),
        Some(_) => return Err(bad_request("unsupported parse_mode")),
    };
    let (plain, entities) =
        parsed.map_err(|reason| bad_request(format!("can't parse entities: {reason}")))?;
    Ok((plain, entities.iter().map(Entity::to_json).collect()))
}

fn check_length(plain: &str, empty: &str) -> Result<(), ApiError> {
    if plain.trim().is_empty() {
        return Err(bad_request(empty));
    }
    if utf16_len(plain) > MAX_TEXT_UTF16 {
        return Err(bad_request("message is too long"));
    }
    Ok(())
}

fn send_message(shared: &Shared, p: &Map<String, Value>) -> Answer {
    let chat_id = chat_id_param(p)?;
    let raw = match p.get("text") {
        None | Some(Value::Null) => "",
        Some(Value::String(s)) => s.as_str(),
        Some(_) => return Err(bad_request("message text is empty")),
    };
    if raw.is_empty() {
        return Err(bad_request("message text is empty"));
    }
    let (plain, entities) = formatted(p, raw)?;
    check_length(&plain, "message text is empty")?;

    let reply = match p.get("reply_parameters") {
        None | Some(Value::Null) => int_param(p, "reply_to_message_id")?
            .map(|id| (chat_id, id, bool_param(p, "allow_sending_without_reply"))),
        Some(Value::Object(r)) => {
            let id = int_param(r, "message_id")?
                .ok_or_else(|| bad_request("message identifier is not specified"))?;
            let chat = match r.get("chat_id") {
                None | Some(Value::Null) => chat_id,
                Some(_) => chat_id_param(r)?,
            };
            Some((chat, id, bool_param(r, "allow_sending_without_reply")))
        }
        Some(_) => return Err(bad_request("can't parse reply parameters JSON object")),
    };

    let mut st = shared.state();
    let reply = match reply {
        Some((chat, id, _)) if st.message(chat, id).is_some() => Some((chat, id)),
        Some((_, _, true)) | None => None,
        Some(_) => return Err(bad_request("message to be replied not found")),
    };
    let message_id = st.take_message_id(chat_id);
    let mut message = json!({
        "message_id": message_id,
        "from": shared.bot_user(),
        "chat": st.chat(chat_id),
        "date": unix_now(),
        "text": plain,
    });
    if !entities.is_empty() {
        message["entities"] = Value::Array(entities.clone());
    }
    if let Some((chat, id)) = reply {
        message["reply_to_message"] = reply_target(&st, chat, id);
    }
    st.sent.push(SentMessage {
        message_id,
        chat_id,
        text: plain,
        raw_text: raw.to_string(),
        parse_mode: p
            .get("parse_mode")
            .and_then(Value::as_str)
            .map(str::to_string),
        entities,
        reply_to_message_id: reply.map(|(_, id)| id),
        edits: 0,
        deleted: false,
    });
    let index = st.sent.len() - 1;
    st.messages.insert(
        (chat_id, message_id),
        Stored {
            message: message.clone(),
            sent: Some(index),
        },
    );
    Ok(message)
}

fn edit_message_text(shared: &Shared, p: &Map<String, Value>) -> Answer {
    if p.contains_key("inline_message_id") {
        return Err(bad_request("inline messages are not supported by the fake"));
    }
    let chat_id = chat_id_param(p)?;
    let message_id = int_param(p, "message_id")?
        .ok_or_else(|| bad_request("message identifier is not specified"))?;
    let raw = p.get("text").and_then(Value::as_str).unwrap_or("");
    if raw.is_empty() {
        return Err(bad_request("text must be non-empty"));
    }
    let (plain, entities) = formatted(p, raw)?;
    check_length(&plain, "text must be non-empty")?;

    let mut st = shared.state();
    let Some(stored) = st.messages.get_mut(&(chat_id, message_id)) else {
        return Err(bad_request("message to edit not found"));
    };
    let Some(index) = stored.sent else {
        return Err(bad_request("message can't be edited"));
    };
    let message = &mut stored.message;
    let current_entities = match message.get("entities") {
        Some(Value::Array(e)) => e.clone(),
        _ => Vec::new(),
    };
    if message["text"] == plain.as_str() && current_entities == entities {
        return Err(bad_request(
            "message is not modified: specified new message content and reply markup are \
             exactly the same as a current content and reply markup of the message",
        ));
    }
    message["text"] = json!(plain);
    message["edit_date"] = json!(unix_now());
    if entities.is_empty() {
        if let Some(o) = message.as_object_mut() {
            o.remove("entities");
        }
    } else {
        message["entities"] = Value::Array(entities.clone());
    }
    let message = message.clone();
    if let Some(sent) = st.sent.get_mut(index) {
        sent.text = plain;
        sent.raw_text = raw.to_string();
        sent.parse_mode = p
            .get("parse_mode")
            .and_then(Value::as_str)
            .map(str::to_string);
        sent.entities = entities;
        sent.edits += 1;
    }
    Ok(message)
}

// ----- Parameters -----

/// Fields whose form/query (string) values are turned into JSON types.
const INT_FIELDS: [&str; 9] = [
    "chat_id",
    "message_id",
    "offset",
    "limit",
    "timeout",
    "reply_to_message_id",
    "message_thread_id",
    "from_chat_id",
    "user_id",
];
const BOOL_FIELDS: [&str; 6] = [
    "disable_notification",
    "protect_content",
    "allow_sending_without_reply",
    "drop_pending_updates",
    "disable_web_page_preview",
    "allow_paid_broadcast",
];
/// JSON-serialised objects/arrays, as Telegram wants them in a form or query.
const JSON_FIELDS: [&str; 9] = [
    "reply_parameters",
    "link_preview_options",
    "allowed_updates",
    "reply_markup",
    "commands",
    "entities",
    "scope",
    "message_ids",
    "reaction",
];

/// Query string and body (JSON or form) merged, the body winning.
fn collect_params(
    query: Option<&str>,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Map<String, Value>, ApiError> {
    let mut params = Map::new();
    if let Some(q) = query {
        params.extend(form_pairs(q));
    }
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| {
            v.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase()
        })
        .unwrap_or_default();
    let looks_like_json = body
        .iter()
        .find(|b| !b.is_ascii_whitespace())
        .is_some_and(|b| *b == b'{');
    if body.iter().all(u8::is_ascii_whitespace) {
        // No body: the query string is all there is.
    } else if content_type == "application/json" || (content_type.is_empty() && looks_like_json) {
        match serde_json::from_slice::<Value>(body) {
            Ok(Value::Object(o)) => params.extend(o),
            Ok(_) | Err(_) => return Err(bad_request("can't parse JSON object")),
        }
    } else if content_type == "application/x-www-form-urlencoded" || content_type.is_empty() {
        params.extend(form_pairs(&String::from_utf8_lossy(body)));
    } else {
        return Err(bad_request(format!(
            "content type {content_type} is not supported by the fake"
        )));
    }
    for (key, value) in params.iter_mut() {
        normalise(key, value);
    }
    Ok(params)
}

fn form_pairs(s: &str) -> Vec<(String, Value)> {
    s.split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (url_decode(k), Value::String(url_decode(v)))
        })
        .collect()
}

fn url_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = s
                    .get(i + 1..i + 3)
                    .and_then(|h| u8::from_str_radix(h, 16).ok());
                match hex {
                    Some(b) => {
                        out.push(b);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Strings where Telegram expects a number, a boolean or serialised JSON become
/// that; anything else is left as sent (e.g. chat_id "@channel").
fn normalise(key: &str, value: &mut Value) {
    let Value::String(s) = value else {
        return;
    };
    let s = s.trim();
    if INT_FIELDS.contains(&key) {
        if let Ok(n) = s.parse::<i64>() {
            *value = json!(n);
        }
    } else if BOOL_FIELDS.contains(&key) {
        match s {
            "true" | "True" | "1" => *value = json!(true),
            "false" | "False" | "0" => *value = json!(false),
            _ => {}
        }
    } else if JSON_FIELDS.contains(&key) {
        if let Ok(v) = serde_json::from_str::<Value>(s) {
            *value = v;
        }
    }
}

fn int_param(p: &Map<String, Value>, name: &str) -> Result<Option<i64>, ApiError> {
    match p.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n
            .as_i64()
            .map(Some)
            .ok_or_else(|| bad_request(format!("invalid {name} specified"))),
        Some(Value::String(s)) => s
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| bad_request(format!("invalid {name} specified"))),
        Some(_) => Err(bad_request(format!("invalid {name} specified"))),
    }
}

fn bool_param(p: &Map<String, Value>, name: &str) -> bool {
    match p.get(name) {
        Some(Value::Bool(b)) => *b,
        Some(Value::String(s)) => matches!(s.as_str(), "true" | "True" | "1"),
        Some(Value::Number(n)) => n.as_i64() == Some(1),
        _ => false,
    }
}

/// Only numeric ids are known chats; a public `@username` is not one of them.
fn chat_id_param(p: &Map<String, Value>) -> Result<i64, ApiError> {
    match p.get("chat_id") {
        None | Some(Value::Null) => Err(bad_request("chat_id is empty")),
        Some(Value::String(s)) if s.is_empty() => Err(bad_request("chat_id is empty")),
        Some(_) => int_param(p, "chat_id")
            .ok()
            .flatten()
            .ok_or_else(|| bad_request("chat not found")),
    }
}

// ----- Formatting (parse_mode) -----

#[derive(Debug, Clone, PartialEq)]
struct Entity {
    kind: &'static str,
    offset: usize,
    length: usize,
    url: Option<String>,
    language: Option<String>,
    custom_emoji_id: Option<String>,
}

impl Entity {
    fn new(kind: &'static str, offset: usize, length: usize) -> Entity {
        Entity {
            kind,
            offset,
            length,
            url: None,
            language: None,
            custom_emoji_id: None,
        }
    }

    fn to_json(&self) -> Value {
        let mut v = json!({"type": self.kind, "offset": self.offset, "length": self.length});
        if let Some(url) = &self.url {
            v["url"] = json!(url);
        }
        if let Some(language) = &self.language {
            v["language"] = json!(language);
        }
        if let Some(id) = &self.custom_emoji_id {
            v["custom_emoji_id"] = json!(id);
        }
        v
    }
}

/// The visible text being built, with its length in UTF-16 units (what
/// entity offsets count).
#[derive(Default)]
struct Plain {
    text: String,
    utf16: usize,
    entities: Vec<Entity>,
}

impl Plain {
    fn push(&mut self, c: char) {
        self.text.push(c);
        self.utf16 += c.len_utf16();
    }

    /// Empty entities are dropped, as Telegram does.
    fn entity(&mut self, e: Entity) {
        if e.length > 0 {
            self.entities.push(e);
        }
    }

    /// Telegram's order: by offset, the longer (outer) one first.
    fn finish(mut self) -> (String, Vec<Entity>) {
        self.entities
            .sort_by(|a, b| a.offset.cmp(&b.offset).then(b.length.cmp(&a.length)));
        (self.text, self.entities)
    }
}

const HTML_TAGS: [&str; 16] = [
    "b",
    "strong",
    "i",
    "em",
    "u",
    "ins",
    "s",
    "strike",
    "del",
    "code",
    "pre",
    "a",
    "blockquote",
    "tg-spoiler",
    "span",
    "tg-emoji",
];

fn is_html_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r' | b'\x0c')
}

/// `&lt;`, `&gt;`, `&amp;`, `&quot;` or a numeric reference at the start of
/// `s`: the character and the bytes it took.
fn html_entity(s: &str) -> Option<(char, usize)> {
    let semi = s.get(1..12.min(s.len()))?.find(';')? + 1;
    let name = &s[1..semi];
    let c = match name {
        "lt" => '<',
        "gt" => '>',
        "amp" => '&',
        "quot" => '"',
        _ => {
            let num = name.strip_prefix('#')?;
            let code = match num.strip_prefix(['x', 'X']) {
                Some(hex) if !hex.is_empty() && hex.chars().all(|c| c.is_ascii_hexdigit()) => {
                    u32::from_str_radix(hex, 16).ok()?
                }
                Some(_) => return None,
                None if !num.is_empty() && num.chars().all(|c| c.is_ascii_digit()) => {
                    num.parse().ok()?
                }
                None => return None,
            };
            if code == 0 {
                return None;
            }
            char::from_u32(code)?
        }
    };
    Some((c, semi + 1))
}

/// Attribute values are decoded leniently: an `&` that is no entity stays.
fn decode_attribute(s: &str) -> String {
    let mut out = String::new();
    let mut i = 0;
    while let Some(c) = s[i..].chars().next() {
        match (c, html_entity(&s[i..])) {
            ('&', Some((decoded, len))) => {
                out.push(decoded);
                i += len;
            }
            _ => {
                out.push(c);
                i += c.len_utf8();
            }
        }
    }
    out
}

struct OpenTag {
    tag: String,
    start: usize,
    attribute: Option<String>,
    expandable: bool,
    /// `pre` only: the language a nested `<code class="language-…">` gave.
    language: Option<String>,
}

/// Telegram's HTML: the supported tags only, correctly nested and closed;
/// `<` and `&` only as markup or entities. Errors read like Telegram's
/// (after "can't parse entities: "), with byte offsets into `src`.
fn parse_html(src: &str) -> Result<(String, Vec<Entity>), String> {
    let b = src.as_bytes();
    let n = b.len();
    let mut out = Plain::default();
    let mut open: Vec<OpenTag> = Vec::new();
    let mut i = 0;
    while i < n {
        match b[i] {
            b'&' => {
                let (c, len) = html_entity(&src[i..]).ok_or_else(|| {
                    format!("Character '&' must be escaped as \"&amp;\" at byte offset {i}")
                })?;
                out.push(c);
                i += len;
            }
            b'<' if b.get(i + 1) == Some(&b'/') => {
                let begin = i;
                i += 2;
                let name_start = i;
                while i < n && !is_html_space(b[i]) && b[i] != b'>' {
                    i += 1;
                }
                let name = src[name_start..i].to_ascii_lowercase();
                while i < n && is_html_space(b[i]) {
                    i += 1;
                }
                if i >= n || b[i] != b'>' {
                    return Err(format!("Unclosed end tag at byte offset {begin}"));
                }
                i += 1;
                let Some(top) = open.pop() else {
                    return Err(format!("Unexpected end tag at byte offset {begin}"));
                };
                if !name.is_empty() && name != top.tag {
                    return Err(format!(
                        "Unmatched end tag at byte offset {begin}, expected \"</{}>\", found \"</{name}>\"",
                        top.tag
                    ));
                }
                close_html_tag(&mut out, top, open.last_mut());
            }
            b'<' => {
                let begin = i;
                i += 1;
                let name_start = i;
                while i < n && !is_html_space(b[i]) && b[i] != b'>' {
                    i += 1;
                }
                if i >= n {
                    return Err(format!("Unclosed start tag at byte offset {begin}"));
                }
                let tag = src[name_start..i].to_ascii_lowercase();
                if !HTML_TAGS.contains(&tag.as_str()) {
                    return Err(format!(
                        "Unsupported start tag \"{tag}\" at byte offset {begin}"
                    ));
                }
                let mut attribute = None;
                let mut expandable = false;
                loop {
                    while i < n && is_html_space(b[i]) {
                        i += 1;
                    }
                    if i >= n {
                        return Err(format!("Unclosed start tag at byte offset {begin}"));
                    }
                    if b[i] == b'>' {
                        i += 1;
                        break;
                    }
                    let name_start = i;
                    while i < n && !is_html_space(b[i]) && b[i] != b'=' && b[i] != b'>' {
                        i += 1;
                    }
                    let name = src[name_start..i].to_ascii_lowercase();
                    if name.is_empty() {
                        return Err(format!(
                            "Empty attribute name in the tag \"{tag}\" at byte offset {begin}"
                        ));
                    }
                    while i < n && is_html_space(b[i]) {
                        i += 1;
                    }
                    if i >= n || b[i] != b'=' {
                        if tag == "blockquote" && name == "expandable" {
                            expandable = true;
                            continue;
                        }
                        return Err(format!(
                            "Expected equal sign in declaration of an attribute of the tag \"{tag}\" at byte offset {begin}"
                        ));
                    }
                    i += 1;
                    while i < n && is_html_space(b[i]) {
                        i += 1;
                    }
                    if i >= n {
                        return Err(format!(
                            "Unclosed start tag \"{tag}\" at byte offset {begin}"
                        ));
                    }
                    let value = if b[i] == b'"' || b[i] == b'\'' {
                        let quote = b[i];
                        i += 1;
                        let value_start = i;
                        while i < n && b[i] != quote {
                            i += 1;
                        }
                        if i >= n {
                            return Err(format!(
                                "Unclosed end of attribute value at byte offset {value_start}"
                            ));
                        }
                        i += 1;
                        decode_attribute(&src[value_start..i - 1])
                    } else {
                        let value_start = i;
                        while i < n
                            && (b[i].is_ascii_alphanumeric() || b[i] == b'.' || b[i] == b'-')
                        {
                            i += 1;
                        }
                        if i >= n || !(is_html_space(b[i]) || b[i] == b'>') {
                            return Err(format!(
                                "Unexpected end of name token at byte offset {value_start}"
                            ));
                        }
                        src[value_start..i].to_ascii_lowercase()
                    };
                    let wanted = matches!(
                        (tag.as_str(), name.as_str()),
                        ("a", "href") | ("span" | "code", "class") | ("tg-emoji", "emoji-id")
                    );
                    if wanted {
                        attribute = Some(value);
                    }
                }
                if tag == "span" && attribute.as_deref() != Some("tg-spoiler") {
                    return Err(format!(
                        "Tag \"span\" must have class \"tg-spoiler\" at byte offset {begin}"
                    ));
                }
                open.push(OpenTag {
                    tag,
                    start: out.utf16,
                    attribute,
                    expandable,
                    language: None,
                });
            }
            _ => {
                let Some(c) = src[i..].chars().next() else {
                    break;
                };
                out.push(c);
                i += c.len_utf8();
            }
        }
    }
    if let Some(top) = open.last() {
        return Err(format!(
            "Can't find end tag corresponding to start tag \"{}\"",
            top.tag
        ));
    }
    Ok(out.finish())
}

fn close_html_tag(out: &mut Plain, tag: OpenTag, parent: Option<&mut OpenTag>) {
    let length = out.utf16 - tag.start;
    let entity = |kind| Entity::new(kind, tag.start, length);
    let e = match tag.tag.as_str() {
        "b" | "strong" => entity("bold"),
        "i" | "em" => entity("italic"),
        "u" | "ins" => entity("underline"),
        "s" | "strike" | "del" => entity("strikethrough"),
        "tg-spoiler" | "span" => entity("spoiler"),
        "blockquote" if tag.expandable => entity("expandable_blockquote"),
        "blockquote" => entity("blockquote"),
        "pre" => Entity {
            language: tag.language,
            ..entity("pre")
        },
        "code" => match parent {
            // <pre><code class="language-x"> is one pre entity with a language.
            Some(pre) if pre.tag == "pre" => {
                pre.language = tag
                    .attribute
                    .as_deref()
                    .and_then(|c| c.strip_prefix("language-"))
                    .map(str::to_string);
                return;
            }
            _ => entity("code"),
        },
        "a" => match tag.attribute {
            Some(url) => Entity {
                url: Some(url),
                ..entity("text_link")
            },
            None => return,
        },
        "tg-emoji" => match tag.attribute {
            Some(id) => Entity {
                custom_emoji_id: Some(id),
                ..entity("custom_emoji")
            },
            None => return,
        },
        _ => return,
    };
    out.entity(e);
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Md {
    Bold,
    Italic,
    Underline,
    Strikethrough,
    Spoiler,
    TextUrl,
    CustomEmoji,
    Code,
    Pre,
}

impl Md {
    fn name(self) -> &'static str {
        match self {
            Md::Bold => "Bold",
            Md::Italic => "Italic",
            Md::Underline => "Underline",
            Md::Strikethrough => "Strikethrough",
            Md::Spoiler => "Spoiler",
            Md::TextUrl => "TextUrl",
            Md::CustomEmoji => "CustomEmoji",
            Md::Code => "Code",
            Md::Pre => "Pre",
        }
    }

    fn kind(self) -> &'static str {
        match self {
            Md::Bold => "bold",
            Md::Italic => "italic",
            Md::Underline => "underline",
            Md::Strikethrough => "strikethrough",
            Md::Spoiler => "spoiler",
            Md::TextUrl => "text_link",
            Md::CustomEmoji => "custom_emoji",
            Md::Code => "code",
            Md::Pre => "pre",
        }
    }
}

struct MdOpen {
    md: Md,
    begin: usize,
    start: usize,
    language: Option<String>,
}

fn reserved(c: char) -> String {
    format!("Character '{c}' is reserved and must be escaped with the preceding '\\'")
}

/// MarkdownV2: every one of `_*[]()~`>#+-=|{}.!` outside markup must be
/// escaped with `\`, which is the mistake a channel most often makes.
fn parse_markdown_v2(src: &str) -> Result<(String, Vec<Entity>), String> {
    let chars: Vec<(usize, char)> = src.char_indices().collect();
    let at = |k: usize| chars.get(k).map(|&(_, c)| c);
    let mut out = Plain::default();
    let mut open: Vec<MdOpen> = Vec::new();
    // (start, end so far) of the block quote being read.
    let mut quote: Option<(usize, usize)> = None;
    let mut line_start = true;
    let mut k = 0;
    while k < chars.len() {
        let (pos, c) = chars[k];
        let top = open.last().map(|o| o.md);
        if matches!(top, Some(Md::Code | Md::Pre)) {
            let closes = match top {
                Some(Md::Code) => c == '`',
                _ => c == '`' && at(k + 1) == Some('`') && at(k + 2) == Some('`'),
            };
            if closes {
                let Some(o) = open.pop() else { break };
                out.entity(Entity {
                    language: o.language,
                    ..Entity::new(o.md.kind(), o.start, out.utf16 - o.start)
                });
                k += if o.md == Md::Pre { 3 } else { 1 };
            } else if c == '\\' && at(k + 1).is_some_and(|n| (1..=126).contains(&(n as u32))) {
                out.push(at(k + 1).unwrap_or('\\'));
                k += 2;
            } else if c == '`' || c == '\\' {
                return Err(reserved(c));
            } else {
                out.push(c);
                k += 1;
            }
            continue;
        }
        if line_start {
            line_start = false;
            if c == '>' {
                quote = Some(quote.unwrap_or((out.utf16, out.utf16)));
                k += 1;
                continue;
            }
            if let Some((start, end)) = quote.take() {
                out.entity(Entity::new("blockquote", start, end - start));
            }
        }
        let closes = match top {
            Some(Md::Bold) => c == '*',
            Some(Md::Italic) => c == '_' && at(k + 1) != Some('_'),
            Some(Md::Underline) => c == '_' && at(k + 1) == Some('_'),
            Some(Md::Strikethrough) => c == '~',
            Some(Md::Spoiler) => c == '|' && at(k + 1) == Some('|'),
            Some(Md::TextUrl | Md::CustomEmoji) => c == ']',
            _ => false,
        };
        if closes {
            let Some(o) = open.pop() else { break };
            let mut e = Entity::new(o.md.kind(), o.start, out.utf16 - o.start);
            k += match o.md {
                Md::Underline | Md::Spoiler => 2,
                _ => 1,
            };
            if matches!(o.md, Md::TextUrl | Md::CustomEmoji) {
                let mut url = String::new();
                if at(k) == Some('(') {
                    let url_begin = chars[k].0;
                    k += 1;
                    loop {
                        match at(k) {
                            None => {
                                return Err(format!(
                                    "Can't find end of a URL at byte offset {url_begin}"
                                ))
                            }
                            Some(')') => {
                                k += 1;
                                break;
                            }
                            Some('\\') if at(k + 1).is_some() => {
                                url.push(at(k + 1).unwrap_or('\\'));
                                k += 2;
                            }
                            Some(ch) => {
                                url.push(ch);
                                k += 1;
                            }
                        }
                    }
                }
                if o.md == Md::CustomEmoji {
                    let id = url.strip_prefix("tg://emoji?id=").map(str::to_string);
                    if id.is_none() {
                        return Err(format!(
                            "Custom emoji entity must contain a tg://emoji URL at byte offset {}",
                            o.begin
                        ));
                    }
                    e.custom_emoji_id = id;
                } else if url.is_empty() {
                    continue;
                } else {
                    e.url = Some(url);
                }
            }
            out.entity(e);
            continue;
        }
        let (md, width) = match c {
            '\\' => {
                match at(k + 1) {
                    Some(n) if (1..=126).contains(&(n as u32)) => out.push(n),
                    _ => return Err(reserved('\\')),
                }
                k += 2;
                continue;
            }
            '\n' => {
                if let Some((_, end)) = quote.as_mut() {
                    *end = out.utf16;
                }
                out.push(c);
                line_start = true;
                k += 1;
                continue;
            }
            '*' => (Md::Bold, 1),
            '_' if at(k + 1) == Some('_') => (Md::Underline, 2),
            '_' => (Md::Italic, 1),
            '~' => (Md::Strikethrough, 1),
            '|' if at(k + 1) == Some('|') => (Md::Spoiler, 2),
            '[' => (Md::TextUrl, 1),
            '!' if at(k + 1) == Some('[') => (Md::CustomEmoji, 2),
            '`' if at(k + 1) == Some('`') && at(k + 2) == Some('`') => (Md::Pre, 3),
            '`' => (Md::Code, 1),
            c if "_*[]()~`>#+-=|{}.!".contains(c) => return Err(reserved(c)),
            c => {
                out.push(c);
                k += 1;
                continue;
            }
        };
        k += width;
        let mut language = None;
        if md == Md::Pre {
            // ```lang\n: the rest of the opening line names the language.
            let line_end = (k..chars.len()).find(|&j| chars[j].1 == '\n');
            if let Some(end) = line_end {
                let lang: String = chars[k..end].iter().map(|&(_, ch)| ch).collect();
                if !lang.contains('`') {
                    language = Some(lang.trim().to_string()).filter(|l| !l.is_empty());
                    k = end + 1;
                }
            }
        }
        open.push(MdOpen {
            md,
            begin: pos,
            start: out.utf16,
            language,
        });
    }
    if let Some(o) = open.last() {
        return Err(format!(
            "Can't find end of {} entity at byte offset {}",
            o.md.name(),
            o.begin
        ));
    }
    if let Some((start, _)) = quote {
        let end = out.utf16;
        out.entity(Entity::new("blockquote", start, end - start));
    }
    Ok(out.finish())
}

/// Legacy Markdown: `*bold*`, `_italic_`, `` `code` ``, ```` ```pre``` ````,
/// `[text](url)`, not nested; only an unclosed entity is an error.
fn parse_markdown(src: &str) -> Result<(String, Vec<Entity>), String> {
    let chars: Vec<(usize, char)> = src.char_indices().collect();
    let at = |k: usize| chars.get(k).map(|&(_, c)| c);
    let mut out = Plain::default();
    let mut k = 0;
    while k < chars.len() {
        let (pos, c) = chars[k];
        let unclosed = || format!("Can't find end of the entity starting at byte offset {pos}");
        let (kind, close, width) = match c {
            '\\' if at(k + 1).is_some_and(|n| "_*`[".contains(n)) => {
                out.push(at(k + 1).unwrap_or('\\'));
                k += 2;
                continue;
            }
            '*' => ("bold", "*", 1),
            '_' => ("italic", "_", 1),
            '`' if at(k + 1) == Some('`') && at(k + 2) == Some('`') => ("pre", "```", 3),
            '`' => ("code", "`", 1),
            '[' => ("text_link", "]", 1),
            _ => {
                out.push(c);
                k += 1;
                continue;
            }
        };
        let body_start = k + width;
        let rest: String = chars[body_start..].iter().map(|&(_, ch)| ch).collect();
        let Some(len) = rest.find(close) else {
            return Err(unclosed());
        };
        let body = &rest[..len];
        let start = out.utf16;
        body.chars().for_each(|ch| out.push(ch));
        k = body_start + body.chars().count() + close.chars().count();
        let mut e = Entity::new(kind, start, out.utf16 - start);
        if kind == "text_link" {
            if at(k) != Some('(') {
                continue;
            }
            let url: String = chars[k + 1..]
                .iter()
                .map(|&(_, ch)| ch)
                .take_while(|&ch| ch != ')')
                .collect();
            if k + 1 + url.chars().count() >= chars.len() {
                return Err(unclosed());
            }
            k += url.chars().count() + 2;
            e.url = Some(url);
        }
        out.entity(e);
    }
    Ok(out.finish())
}
