//! Chat channels through the real binary, against a local fake of the Telegram Bot API
//! (`ferroclaw_testkit::telegram`) and the scripted LLM: pairing, approval, answers split
//! and formatted, group context, the bot ignoring itself, 429s, lost connections,
//! `/stop`, and two gateways sharing one bot account.

use std::time::{Duration, Instant};

use ferroclaw_testkit::telegram::{Call, Incoming, TelegramFake};
use ferroclaw_testkit::{Reply, ScriptedLlm};
use serde_json::json;

use crate::gateway_services::{Gateway, WAIT};

const TOKEN: &str = "7000001:TEST-token-not-real";
const BOT_ID: i64 = 7_000_001;

fn channel_config(fake: &TelegramFake, extra: &str) -> String {
    format!(
        r#"channels: {{ telegram: {{ api_base_url: "{}", poll_timeout_seconds: 1, {extra} }} }},"#,
        fake.base_url()
    )
}

/// The messages the bot sent to `chat` (after edits), texts only.
fn texts(fake: &TelegramFake, chat: i64) -> Vec<String> {
    fake.sent(chat).into_iter().map(|m| m.text).collect()
}

/// Messages the fake accepted from the bot for `chat` (its lock is held while a
/// `wait_for` predicate runs, so predicates read the calls they are given).
fn accepted_for(calls: &[Call], chat: i64) -> usize {
    calls
        .iter()
        .filter(|c| c.method == "sendMessage" && c.status == Some(200))
        .filter(|c| {
            let id = &c.params["chat_id"];
            id.as_i64() == Some(chat) || id.as_str() == Some(chat.to_string().as_str())
        })
        .count()
}

/// Waits until the bot has sent `n` messages to `chat`.
async fn sent_to(fake: &TelegramFake, chat: i64, n: usize) -> Vec<String> {
    let ok = fake
        .wait_for(WAIT, |calls| accepted_for(calls, chat) >= n)
        .await;
    assert!(
        ok,
        "chat {chat}: wanted {n} messages, got {:?}",
        texts(fake, chat)
    );
    texts(fake, chat)
}

fn code_in(text: &str) -> String {
    let at = text.find("pairing code: ").expect("a pairing code") + "pairing code: ".len();
    text[at..at + 8].to_string()
}

fn pairing_cli(gw: &Gateway, args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_ferroclaw"))
        .arg("pairing")
        .args(args)
        .env("FERROCLAW_HOME", gw.home.path())
        .env("HOME", gw.home.path())
        .env("FERROCLAW_LOG_LEVEL", "warn")
        .output()
        .expect("run ferroclaw pairing")
}

#[tokio::test]
async fn a_telegram_stranger_pairs_then_talks_in_direct_and_group_chats() {
    let fake = TelegramFake::start(TOKEN, BOT_ID, "ferro_bot").await;
    let llm = ScriptedLlm::start().await.unwrap();
    let gw = Gateway::start(
        tempfile::tempdir().unwrap(),
        llm,
        &channel_config(&fake, ""),
        &[("TELEGRAM_BOT_TOKEN", TOKEN)],
    )
    .await;

    // A stranger gets a code, once, however often they write; nothing reaches the model.
    // A code Telegram makes the bot wait to send (a 429) holds up nobody else: Bob's goes
    // out while Ann's waits.
    fake.fail_next(
        "sendMessage",
        429,
        "Too Many Requests: retry after 3",
        Some(3),
    );
    fake.push_message(Incoming::dm(42, "ann", "hello?"));
    fake.push_message(Incoming::dm(42, "ann", "hello again"));
    fake.push_message(Incoming::dm(43, "bob", "me too"));
    let to_bob = sent_to(&fake, 43, 1).await;
    sent_to(&fake, 42, 1).await;
    let sends = fake.calls_to("sendMessage");
    let waited = sends
        .iter()
        .find(|c| c.status == Some(429))
        .map(|c| c.params["chat_id"].clone());
    let accepted: Vec<_> = sends
        .iter()
        .filter(|c| c.status == Some(200))
        .map(|c| c.params["chat_id"].clone())
        .collect();
    assert!(
        waited.is_some() && accepted.last() == waited.as_ref(),
        "{accepted:?}"
    );
    let to_ann = texts(&fake, 42);
    assert_eq!(to_ann.len(), 1, "one reply per minute: {to_ann:?}");
    let code = code_in(&to_ann[0]);
    assert_ne!(code, code_in(&to_bob[0]));
    assert!(gw.llm.requests().is_empty());

    // Approval by the operator, refused for codes that are not valid.
    for (bad, why) in [
        ("ABCD2345", "no valid pairing code"),
        ("nope", "is not a pairing code"),
    ] {
        let out = pairing_cli(&gw, &["approve", bad]);
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(why), "{bad}: {err}");
    }
    let listed = pairing_cli(&gw, &["list"]);
    let listed = String::from_utf8_lossy(&listed.stdout).to_string();
    assert!(listed.contains(&code) && listed.contains("ann"), "{listed}");
    let out = pairing_cli(&gw, &["approve", &code.to_lowercase()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Pairing with nobody allowed was worth a warning at start (long since logged).
    assert!(
        gw.stderr().contains("allow_from` is empty"),
        "{}",
        gw.stderr()
    );
    // A used code is spent.
    assert!(!pairing_cli(&gw, &["approve", &code]).status.success());

    // Now Ann is answered: a long Markdown answer arrives split under 4096 and formatted.
    // Distinct paragraphs (the answer sanitiser drops degenerate repetition).
    let paragraph: String = (0..150)
        .map(|i| {
            format!("Paragraph {i} has **bold {i}** words and a list:\n\n- one {i}\n- two {i}\n\n")
        })
        .collect();
    gw.llm.push(Reply::text(paragraph.clone()));
    fake.push_message(Incoming::dm(42, "ann", "tell me a lot"));
    let before = texts(&fake, 42).len();
    let deadline = Instant::now() + WAIT;
    let answer = loop {
        let mine: Vec<_> = fake.sent(42).into_iter().skip(before).collect();
        let total: usize = mine.iter().map(|m| m.text.len()).sum();
        // Every part is out once the last paragraph is.
        let done = mine
            .last()
            .is_some_and(|m| m.text.contains("Paragraph 149 "));
        if total >= paragraph.len() / 2 && mine.len() >= 2 && done {
            break mine;
        }
        assert!(
            Instant::now() < deadline,
            "{:?}",
            fake.calls_to("sendMessage")
                .iter()
                .map(|c| (c.status, c.error.clone()))
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    for m in &answer {
        assert!(m.text.encode_utf16().count() <= 4096, "{}", m.text.len());
        assert_eq!(m.parse_mode.as_deref(), Some("HTML"));
        assert!(
            !m.text.contains("**"),
            "Markdown left in: {}",
            &m.text[..80]
        );
    }
    let request = &gw.llm.requests()[0];
    assert!(request.body.to_string().contains("tell me a lot"));

    // Markup the platform rejects goes out again as plain text.
    gw.llm.push(Reply::text("a <weird> **answer**"));
    fake.fail_next(
        "sendMessage",
        400,
        "Bad Request: can't parse entities: unsupported start tag",
        None,
    );
    let n = texts(&fake, 42).len();
    fake.push_message(Incoming::dm(42, "ann", "and now?"));
    let all = sent_to(&fake, 42, n + 1).await;
    let last = fake.sent(42).pop().unwrap();
    assert!(
        all[n].contains("a <weird> answer") && last.parse_mode.is_none(),
        "{last:?}"
    );

    // A 429 is waited out for as long as it says, then the answer goes out.
    gw.llm.push(Reply::text("after the wait"));
    fake.fail_next(
        "sendMessage",
        429,
        "Too Many Requests: retry after 1",
        Some(1),
    );
    let n = texts(&fake, 42).len();
    fake.push_message(Incoming::dm(42, "ann", "quick"));
    let all = sent_to(&fake, 42, n + 1).await;
    assert!(all[n].contains("after the wait"));
    let sends: Vec<Call> = fake
        .calls()
        .into_iter()
        .filter(|c| c.method == "sendMessage" && c.params["chat_id"].to_string().contains("42"))
        .collect();
    let (refused, retried) = (&sends[sends.len() - 2], &sends[sends.len() - 1]);
    assert!(retried.at.duration_since(refused.at) >= Duration::from_secs(1));

    // The bot's own messages (and other bots') are never answered.
    let before_llm = gw.llm.requests().len();
    let mut own = Incoming::dm(BOT_ID, "ferro_bot", "I am the bot");
    own.from_is_bot = true;
    fake.push_message(own);
    // In a group, a message without a mention is remembered, not answered...
    fake.push_message(Incoming::group(
        -100,
        42,
        "ann",
        "we are talking about apples",
    ));
    fake.push_message(Incoming::group(-100, 43, "bob", "and pears"));
    // ...and given to the model with the message that mentions the bot.
    gw.llm.push(Reply::text("Apples and pears."));
    fake.push_message(Incoming::group(
        -100,
        42,
        "ann",
        "@ferro_bot what was that about?",
    ));
    sent_to(&fake, -100, 1).await;
    let requests = gw.llm.requests();
    assert_eq!(
        requests.len(),
        before_llm + 1,
        "the bot answered something else"
    );
    let asked = requests.last().unwrap().body.to_string();
    assert!(
        asked.contains("apples")
            && asked.contains("pears")
            && asked.contains("what was that about"),
        "{asked}"
    );
    assert!(!asked.contains("@ferro_bot"), "{asked}");
    assert_eq!(texts(&fake, -100), vec!["Apples and pears.".to_string()]);

    // An answer being written shows in a draft message that is edited as it grows;
    // `/stop` ends the run at once, the draft says where it stopped, and the rest of
    // the answer never arrives.
    gw.llm.push(
        Reply::text("The first part of a long answer, and then something too late")
            .chunk_size(4)
            .hang_after(10),
    );
    let n = texts(&fake, 42).len();
    fake.push_message(Incoming::dm(42, "ann", "think hard"));
    let draft = sent_to(&fake, 42, n + 1).await;
    assert!(
        draft[n].starts_with("The first part") && !draft[n].contains("too late"),
        "{draft:?}"
    );
    fake.push_message(Incoming::dm(42, "ann", "/stop"));
    let all = sent_to(&fake, 42, n + 2).await;
    assert!(all[n + 1].contains("Stopped 1"), "{all:?}");
    let stopped = |calls: &[Call]| {
        calls.iter().any(|c| {
            c.method == "editMessageText"
                && c.status == Some(200)
                && c.params["text"]
                    .as_str()
                    .is_some_and(|t| t.ends_with("(stopped)"))
        })
    };
    assert!(fake.wait_for(WAIT, stopped).await, "{:?}", texts(&fake, 42));
    let shown = &fake.sent(42)[n];
    assert!(
        shown.text.starts_with("The first part") && shown.edits >= 1,
        "{shown:?}"
    );

    // The API goes away (a long poll in flight is cut) and comes back: polling resumes.
    fake.disconnect().await;
    gw.llm.push(Reply::text("back"));
    fake.push_message(Incoming::dm(42, "ann", "still there?"));
    let n = texts(&fake, 42).len();
    fake.restore().await.unwrap();
    let all = sent_to(&fake, 42, n + 1).await;
    assert_eq!(all[n], "back");
    assert!(!all.iter().any(|t| t.contains("too late")), "{all:?}");
    assert_eq!(fake.conflicts(), 0, "two polls overlapped");

    // The approval shows in the WebSocket's list and can be revoked there.
    let mut ws = gw.ws().await;
    ws.connect(Some(&gw.token.clone())).await;
    let list = ws.call("device.pair.list", json!({})).await;
    assert!(
        list["payload"]["approved"].to_string().contains("\"42\""),
        "{list}"
    );
    let status = ws
        .call("channels.status", json!({"channel": "telegram"}))
        .await;
    assert_eq!(status["payload"]["channel"]["state"], "polling", "{status}");

    // A scheduled job of the administrator delivering to Ann's session reaches her chat.
    gw.llm.push(Reply::text("Good morning, Ann."));
    let deliver = json!({"kind": "session", "sessionKey": "agent:main:telegram:direct:42"});
    let job = json!({"name": "morning", "message": "greet Ann", "deliver": deliver,
                     "schedule": {"kind": "every", "every": "1h"}});
    let res = ws.call("cron.create", job.clone()).await;
    assert_eq!(res["ok"], true, "{res}");
    let id = res["payload"]["job"]["id"].as_str().unwrap().to_string();
    let n = texts(&fake, 42).len();
    let res = ws.call("cron.run", json!({"id": id})).await;
    assert_eq!(res["ok"], true, "{res}");
    let all = sent_to(&fake, 42, n + 1).await;
    assert_eq!(all[n], "Good morning, Ann.");
    // A user's job cannot make the bot write to someone else's chat.
    let mut user = gw.ws().await;
    user.connect(None).await;
    gw.llm.push(Reply::text("Hello from a stranger's job."));
    let res = user.call("cron.create", job).await;
    assert_eq!(res["ok"], true, "{res}");
    let theirs = res["payload"]["job"]["id"].as_str().unwrap().to_string();
    user.call("cron.run", json!({"id": theirs})).await;
    let deadline = Instant::now() + WAIT;
    let error = loop {
        let runs = user.call("cron.runs", json!({"id": theirs})).await;
        let ended = runs["payload"]["runs"]
            .as_array()
            .and_then(|r| r.iter().find(|r| r["status"] != "running").cloned());
        if let Some(run) = ended {
            break run["error"].as_str().unwrap_or_default().to_string();
        }
        assert!(Instant::now() < deadline, "{runs}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(
        error.contains("may post only to its owner's own direct chat"),
        "{error}"
    );
    assert_eq!(texts(&fake, 42).len(), n + 1, "{:?}", texts(&fake, 42));

    let revoked = ws
        .call(
            "device.pair.revoke",
            json!({"channel": "telegram", "sender": "42"}),
        )
        .await;
    assert_eq!(revoked["ok"], true, "{revoked}");
    fake.push_message(Incoming::dm(42, "ann", "hello after revoke"));
    let n = texts(&fake, 42).len();
    let all = sent_to(&fake, 42, n + 1).await;
    assert!(all[n].contains("pairing code"), "{all:?}");
}

#[tokio::test]
async fn two_gateways_share_one_telegram_bot_one_polls_and_the_other_takes_over() {
    let url = ferroclaw_testkit::pg::fresh_database().await;
    let fake = TelegramFake::start(TOKEN, BOT_ID, "ferro_bot").await;
    let config = format!(
        r#"database: {{ mode: "managed" }}, {}"#,
        channel_config(&fake, r#"dm_policy: "open""#)
    );
    let env = [
        ("TELEGRAM_BOT_TOKEN", TOKEN),
        ("FERROCLAW_DATABASE_URL", url.as_str()),
    ];
    let mut a = Gateway::start(
        tempfile::tempdir().unwrap(),
        ScriptedLlm::start().await.unwrap(),
        &config,
        &env,
    )
    .await;
    let mut b = Gateway::start(
        tempfile::tempdir().unwrap(),
        ScriptedLlm::start().await.unwrap(),
        &config,
        &env,
    )
    .await;
    for i in 0..4 {
        a.llm.push(Reply::text(format!("answer {i}")));
        b.llm.push(Reply::text(format!("answer {i}")));
    }
    for sender in [51, 52, 53] {
        fake.push_message(Incoming::dm(sender, "someone", "hi"));
    }
    for sender in [51, 52, 53] {
        sent_to(&fake, sender, 1).await;
    }
    let (asked_a, asked_b) = (a.llm.requests().len(), b.llm.requests().len());
    assert_eq!(asked_a + asked_b, 3);
    assert!(
        asked_a == 0 || asked_b == 0,
        "both instances answered: {asked_a} {asked_b}"
    );
    assert_eq!(fake.conflicts(), 0, "both instances polled");

    // The instance that polls dies without a word; the other takes the account over
    // once its lease lapses, from where the first left off.
    let (dead, alive) = if asked_a > 0 {
        (&mut a, &b)
    } else {
        (&mut b, &a)
    };
    dead.child.start_kill().unwrap();
    dead.child.wait().await.unwrap();
    let killed_at = Instant::now();
    fake.push_message(Incoming::dm(54, "latecomer", "anyone?"));
    sent_to(&fake, 54, 1).await;
    // Bounded by WAIT; the lease is 15 s.
    eprintln!("taken over after {:?}", killed_at.elapsed());
    assert_eq!(alive.llm.requests().len(), 1);
    for sender in [51, 52, 53, 54] {
        assert_eq!(
            texts(&fake, sender).len(),
            1,
            "chat {sender} answered twice"
        );
    }
    assert_eq!(fake.conflicts(), 0);
}

mod discord {
    use super::*;
    use ferroclaw_testkit::discord::{dm_channel_of, DiscordFake, Incoming, Sent};

    const TOKEN: &str = "MTAwMDAw.fake.discord-token";
    const BOT: &str = "4242";

    fn contents(fake: &DiscordFake, channel: &str) -> Vec<String> {
        fake.sent(channel).into_iter().map(|m| m.content).collect()
    }

    /// Waits until the bot's messages in `channel` satisfy `pred`.
    async fn until(fake: &DiscordFake, channel: &str, what: &str, pred: impl Fn(&[Sent]) -> bool) {
        let ok = fake.wait_sent(channel, WAIT, pred).await;
        assert!(ok, "{what}: {:?}", contents(fake, channel));
    }

    /// Settled: `n` messages, none of them the placeholder any more.
    fn settled(n: usize) -> impl Fn(&[Sent]) -> bool {
        move |m: &[Sent]| m.len() >= n && m.iter().all(|m| m.content != "Thinking…")
    }

    #[tokio::test]
    async fn a_discord_stranger_pairs_then_talks_and_the_gateway_resumes_after_an_outage() {
        let fake = DiscordFake::start(TOKEN, BOT, "ferro").await;
        let gw = Gateway::start(
            tempfile::tempdir().unwrap(),
            ScriptedLlm::start().await.unwrap(),
            &format!(
                r#"channels: {{ discord: {{ api_base_url: "{}" }} }},"#,
                fake.api_base_url()
            ),
            &[("DISCORD_BOT_TOKEN", TOKEN)],
        )
        .await;
        assert!(
            fake.wait_for_gateway(WAIT, |identified, _, live| identified == 1 && live == 1)
                .await,
            "the bot never identified: {}",
            gw.stderr()
        );
        let ann = dm_channel_of("501");

        // A stranger gets one code however often they write; nothing reaches the model.
        fake.push(Incoming::dm("501", "ann", "hello?"));
        fake.push(Incoming::dm("501", "ann", "hello again"));
        fake.push(Incoming::dm("502", "bob", "me too"));
        until(&fake, &dm_channel_of("502"), "bob's code", |m| m.len() == 1).await;
        until(&fake, &ann, "ann's code", |m| m.len() == 1).await;
        let to_ann = contents(&fake, &ann);
        assert_eq!(to_ann.len(), 1, "{to_ann:?}");
        let code = code_in(&to_ann[0]);
        assert!(gw.llm.requests().is_empty());
        let out = pairing_cli(&gw, &["approve", &code]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );

        // A long answer: "Thinking…" first, edited into the first part; the rest in
        // further messages, each within 2,000 characters, Markdown kept for Discord to
        // render, and nobody pinged by what the model wrote.
        let long: String = (0..60)
            .map(|i| format!("Part {i}: **bold {i}** and `code {i}` for @everyone to read.\n\n"))
            .collect();
        gw.llm.push(Reply::text(long.clone()));
        fake.push(Incoming::dm("501", "ann", "tell me a lot"));
        until(&fake, &ann, "the long answer", |m| {
            m.len() >= 3 && m.last().is_some_and(|m| m.content.contains("Part 59:"))
        })
        .await;
        let answer: Vec<Sent> = fake.sent(&ann).into_iter().skip(1).collect();
        assert!(answer.len() >= 2, "{answer:?}");
        for m in &answer {
            assert!(
                m.content.encode_utf16().count() <= 2000,
                "{}",
                m.content.len()
            );
            assert_eq!(
                m.allowed_mentions.as_ref().unwrap()["parse"],
                json!([]),
                "{m:?}"
            );
        }
        assert!(
            answer[0].content.starts_with("Part 0: **bold 0**"),
            "{:?}",
            answer[0]
        );
        assert!(
            answer[0].edits >= 1,
            "the placeholder was not edited: {:?}",
            answer[0]
        );
        let placeholder = fake
            .calls_to("createMessage")
            .into_iter()
            .find(|c| c.body["content"] == "Thinking…");
        assert!(placeholder.is_some(), "no placeholder was sent");
        assert!(gw.llm.requests()[0]
            .body
            .to_string()
            .contains("tell me a lot"));

        // A 429 is waited out for as long as Discord says, then the message goes out.
        gw.llm.push(Reply::text("after the wait"));
        fake.fail_next("createMessage", 429, 1.2);
        let n = contents(&fake, &ann).len();
        fake.push(Incoming::dm("501", "ann", "quick"));
        until(&fake, &ann, "after a 429", settled(n + 1)).await;
        assert_eq!(contents(&fake, &ann)[n], "after the wait");
        let to_ann: Vec<_> = fake
            .calls_to("createMessage")
            .into_iter()
            .filter(|c| c.target.as_deref() == Some(ann.as_str()))
            .collect();
        let (refused, retried) = (&to_ann[to_ann.len() - 2], &to_ann[to_ann.len() - 1]);
        assert_eq!((refused.status, retried.status), (429, 200));
        assert!(retried.at.duration_since(refused.at) >= Duration::from_millis(1200));

        // Its own messages and other bots' are not answered; in a server channel a
        // message without a mention is remembered and given with the next mention.
        let asked = gw.llm.requests().len();
        fake.push(Incoming::dm(BOT, "ferro", "I am the bot").from_bot());
        fake.push(Incoming::guild(
            "600",
            "700",
            "501",
            "ann",
            "we talk about apples",
        ));
        fake.push(Incoming::guild("600", "700", "503", "carl", "and pears"));
        gw.llm.push(Reply::text("Apples and pears."));
        fake.push(
            Incoming::guild("600", "700", "501", "ann", "what was that about?").mentioning_bot(),
        );
        until(&fake, "700", "the group answer", settled(1)).await;
        assert_eq!(
            gw.llm.requests().len(),
            asked + 1,
            "something else was answered"
        );
        let body = gw.llm.requests().last().unwrap().body.to_string();
        assert!(
            body.contains("apples")
                && body.contains("pears")
                && body.contains("what was that about"),
            "{body}"
        );
        assert!(!body.contains("<@4242>"), "{body}");
        assert_eq!(
            contents(&fake, "700"),
            vec!["Apples and pears.".to_string()]
        );

        // An answer being written shows in the placeholder as it grows; `/stop` ends it,
        // the message says so, and the rest never arrives.
        gw.llm.push(
            Reply::text("The first part of a long answer, and then something too late")
                .chunk_size(4)
                .hang_after(10),
        );
        let n = contents(&fake, &ann).len();
        fake.push(Incoming::dm("501", "ann", "think hard"));
        until(&fake, &ann, "the draft", |m| {
            m.len() > n && m[n].content.starts_with("The first part")
        })
        .await;
        fake.push(Incoming::dm("501", "ann", "/stop"));
        until(&fake, &ann, "stopped", |m| {
            m.len() > n + 1
                && m[n + 1].content.contains("Stopped 1")
                && m[n].content.ends_with("(stopped)")
        })
        .await;
        assert!(!contents(&fake, &ann).iter().any(|t| t.contains("too late")));

        // The network goes away; a message written meanwhile is replayed when the bot
        // resumes its session, and answered once.
        fake.disconnect().await;
        gw.llm.push(Reply::text("back"));
        fake.push(Incoming::dm("501", "ann", "still there?"));
        let n = contents(&fake, &ann).len();
        fake.restore().await.unwrap();
        until(&fake, &ann, "after the outage", settled(n + 1)).await;
        assert_eq!(contents(&fake, &ann)[n], "back");
        let (identified, resumed, _) = fake.sessions_opened();
        assert_eq!((identified, resumed), (1, 1), "the session was not resumed");
        assert_eq!(fake.live_connections().1, 1, "two connections at once");

        // The channel's state over the WebSocket; a scheduled job reaches Ann's DM.
        let mut ws = gw.ws().await;
        ws.connect(Some(&gw.token.clone())).await;
        let status = ws
            .call("channels.status", json!({"channel": "discord"}))
            .await;
        assert_eq!(
            status["payload"]["channel"]["state"], "connected",
            "{status}"
        );
        assert_eq!(status["payload"]["channel"]["bot"], "ferro", "{status}");
        gw.llm.push(Reply::text("Good morning, Ann."));
        let job = json!({"name": "morning", "message": "greet Ann",
            "deliver": {"kind": "session", "sessionKey": "agent:main:discord:direct:501"},
            "schedule": {"kind": "every", "every": "1h"}});
        let res = ws.call("cron.create", job).await;
        let id = res["payload"]["job"]["id"].as_str().unwrap().to_string();
        let n = contents(&fake, &ann).len();
        ws.call("cron.run", json!({"id": id})).await;
        until(&fake, &ann, "the job's message", |m| m.len() > n).await;
        assert_eq!(contents(&fake, &ann)[n], "Good morning, Ann.");
        assert!(
            !fake.calls_to("createDM").is_empty(),
            "the DM channel was not opened"
        );
    }

    #[tokio::test]
    async fn a_bad_discord_token_is_reported_with_the_reason_and_never_logged() {
        let fake = DiscordFake::start(TOKEN, BOT, "ferro").await;
        let gw = Gateway::start(
            tempfile::tempdir().unwrap(),
            ScriptedLlm::start().await.unwrap(),
            &format!(
                r#"channels: {{ discord: {{ api_base_url: "{}" }} }},"#,
                fake.api_base_url()
            ),
            &[("DISCORD_BOT_TOKEN", "not-the-token")],
        )
        .await;
        let refused = fake
            .wait_for(WAIT, |calls| {
                calls
                    .iter()
                    .any(|c| c.route == "getCurrentUser" && c.status == 401)
            })
            .await;
        assert!(refused);
        let mut ws = gw.ws().await;
        ws.connect(Some(&gw.token.clone())).await;
        let deadline = Instant::now() + WAIT;
        let status = loop {
            let s = ws
                .call("channels.status", json!({"channel": "discord"}))
                .await;
            if s["payload"]["channel"]["state"] == "failed" {
                break s;
            }
            assert!(Instant::now() < deadline, "{s}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        let error = status["payload"]["channel"]["lastError"]
            .as_str()
            .unwrap_or_default();
        assert!(error.contains("401"), "{status}");
        assert!(!error.contains("not-the-token") && !gw.stderr().contains("not-the-token"));
        assert_eq!(
            fake.live_connections().1,
            0,
            "connected without a valid token"
        );
    }
}

mod slack {
    use super::*;
    use ferroclaw_testkit::slack::{dm_channel_of, Incoming, Sent, SlackFake};

    const BOT_TOKEN: &str = "xoxb-fake-bot-token";
    const APP_TOKEN: &str = "xapp-fake-app-token";

    fn texts(fake: &SlackFake, channel: &str) -> Vec<String> {
        fake.sent(channel).into_iter().map(|m| m.text).collect()
    }

    async fn until(fake: &SlackFake, channel: &str, what: &str, pred: impl Fn(&[Sent]) -> bool) {
        let ok = fake.wait_sent(channel, WAIT, pred).await;
        assert!(ok, "{what}: {:?}", fake.sent(channel));
    }

    fn settled(n: usize) -> impl Fn(&[Sent]) -> bool {
        move |m: &[Sent]| m.len() >= n && m.iter().all(|m| m.text != "Thinking…")
    }

    #[tokio::test]
    async fn a_slack_member_pairs_then_talks_in_threads_and_the_socket_comes_back() {
        let fake = SlackFake::start(BOT_TOKEN, APP_TOKEN, "UBOT", "BBOT").await;
        let gw = Gateway::start(
            tempfile::tempdir().unwrap(),
            ScriptedLlm::start().await.unwrap(),
            &format!(
                r#"channels: {{ slack: {{ api_base_url: "{}" }} }},"#,
                fake.api_base_url()
            ),
            &[
                ("SLACK_BOT_TOKEN", BOT_TOKEN),
                ("SLACK_APP_TOKEN", APP_TOKEN),
            ],
        )
        .await;
        assert!(
            fake.wait_socket(WAIT, |_, _, connected| connected).await,
            "no socket: {}",
            gw.stderr()
        );
        let ann = dm_channel_of("U501");

        // A stranger gets one code; nothing reaches the model.
        fake.push(Incoming::dm("U501", "hello?"));
        fake.push(Incoming::dm("U501", "hello again"));
        fake.push(Incoming::dm("U502", "me too"));
        until(&fake, &dm_channel_of("U502"), "bob's code", |m| {
            m.len() == 1
        })
        .await;
        until(&fake, &ann, "ann's code", |m| m.len() == 1).await;
        let to_ann = texts(&fake, &ann);
        assert_eq!(to_ann.len(), 1, "{to_ann:?}");
        let code = code_in(&to_ann[0]);
        assert!(gw.llm.requests().is_empty());
        let out = pairing_cli(&gw, &["approve", &code]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );

        // A long answer in mrkdwn, split under 4,000 characters; what Slack would read as
        // a control sequence (`<!channel>`) is escaped, never a ping.
        let long: String = (0..120)
            .map(|i| format!("Part {i}: **bold {i}** and a [link](https://example.com/{i}) for <!channel>.\n\n"))
            .collect();
        gw.llm.push(Reply::text(long.clone()));
        fake.push(Incoming::dm("U501", "tell me a lot"));
        until(&fake, &ann, "the long answer", |m| {
            m.len() >= 3 && m.last().is_some_and(|m| m.text.contains("Part 119:"))
        })
        .await;
        let answer: Vec<Sent> = fake.sent(&ann).into_iter().skip(1).collect();
        for m in &answer {
            assert!(m.text.chars().count() <= 4000, "{}", m.text.len());
            assert!(
                !m.text.contains("<!channel>"),
                "a ping went out: {}",
                &m.text[..200]
            );
            assert!(!m.text.contains("**"), "Markdown left: {}", &m.text[..200]);
        }
        assert!(
            answer[0]
                .text
                .starts_with("Part 0: *bold 0* and a <https://example.com/0|link>"),
            "{}",
            &answer[0].text[..120]
        );
        assert!(
            answer[0].edits >= 1,
            "the placeholder was not edited: {:?}",
            answer[0].text.len()
        );

        // A 429 is waited out for its Retry-After.
        gw.llm.push(Reply::text("after the wait"));
        fake.rate_limit_next("chat.postMessage", 1);
        let n = texts(&fake, &ann).len();
        fake.push(Incoming::dm("U501", "quick"));
        until(&fake, &ann, "after a 429", settled(n + 1)).await;
        assert_eq!(texts(&fake, &ann)[n], "after the wait");
        let posts = fake.calls_to("chat.postMessage");
        let refused = posts.iter().position(|c| c.status == 429).unwrap();
        let waited = posts[refused + 1].at.duration_since(posts[refused].at);
        assert!(
            waited >= Duration::from_secs(1),
            "{waited:?} {:?}",
            posts
                .iter()
                .map(|c| (c.status, c.body["text"].to_string(), c.error.clone()))
                .collect::<Vec<_>>()
        );

        // In a channel: an unmentioned message is remembered, the bot's own ignored, and
        // the mention answered in a thread under it (once, though Slack sends both
        // `message` and `app_mention`).
        let asked = gw.llm.requests().len();
        fake.push(Incoming::channel("C1", "U501", "we talk about apples"));
        fake.push(Incoming::channel("C1", "U503", "and pears"));
        fake.push(Incoming::channel("C1", "UBOT", "I am the bot").from_bot("BBOT"));
        gw.llm.push(Reply::text("Apples and pears."));
        let mention = fake.push(Incoming::channel(
            "C1",
            "U501",
            "<@UBOT> what was that about?",
        ));
        until(&fake, "C1", "the thread answer", settled(1)).await;
        let answered = fake.sent("C1");
        assert_eq!(answered.len(), 1, "{answered:?}");
        assert_eq!(answered[0].text, "Apples and pears.");
        assert_eq!(answered[0].thread_ts.as_deref(), Some(mention.as_str()));
        assert_eq!(
            gw.llm.requests().len(),
            asked + 1,
            "answered twice or something else"
        );
        let body = gw.llm.requests().last().unwrap().body.to_string();
        assert!(
            body.contains("apples") && body.contains("pears") && !body.contains("<@UBOT>"),
            "{body}"
        );
        // A message in that thread answers in the thread.
        gw.llm.push(Reply::text("Still in the thread."));
        fake.push(Incoming::channel("C1", "U501", "<@UBOT> and then?").in_thread(&mention));
        until(&fake, "C1", "the second thread answer", settled(2)).await;
        assert_eq!(
            fake.sent("C1")[1].thread_ts.as_deref(),
            Some(mention.as_str())
        );

        // `/stop` ends an answer being written; the placeholder says so.
        gw.llm.push(
            Reply::text("The first part of a long answer, and then something too late")
                .chunk_size(4)
                .hang_after(10),
        );
        let n = texts(&fake, &ann).len();
        fake.push(Incoming::dm("U501", "think hard"));
        until(&fake, &ann, "the draft", |m| {
            m.len() > n && m[n].text.starts_with("The first part")
        })
        .await;
        fake.push(Incoming::dm("U501", "/stop"));
        until(&fake, &ann, "stopped", |m| {
            m.len() > n + 1
                && m[n + 1].text.contains("Stopped 1")
                && m[n].text.ends_with("(stopped)")
        })
        .await;

        // Slack asks for a new socket: the bot opens one and goes on.
        fake.ask_to_reconnect("refresh_requested");
        assert!(
            fake.wait_socket(WAIT, |tickets, conns, live| tickets >= 2
                && conns >= 2
                && live)
                .await
        );
        // The network goes away; a message written meanwhile arrives on the next socket.
        fake.disconnect().await;
        gw.llm.push(Reply::text("back"));
        fake.push(Incoming::dm("U501", "still there?"));
        let n = texts(&fake, &ann).len();
        fake.restore().await.unwrap();
        until(&fake, &ann, "after the outage", settled(n + 1)).await;
        assert_eq!(texts(&fake, &ann)[n], "back");
        assert!(!texts(&fake, &ann).iter().any(|t| t.contains("too late")));
        let (_, _, delivered, acked) = fake.sockets();
        assert_eq!(delivered, acked, "an envelope was not acknowledged");

        // The state over the WebSocket; a scheduled job opens Ann's DM and posts there.
        let mut ws = gw.ws().await;
        ws.connect(Some(&gw.token.clone())).await;
        let status = ws
            .call("channels.status", json!({"channel": "slack"}))
            .await;
        assert_eq!(
            status["payload"]["channel"]["state"], "connected",
            "{status}"
        );
        gw.llm.push(Reply::text("Good morning, Ann."));
        let job = json!({"name": "morning", "message": "greet Ann",
            "deliver": {"kind": "session", "sessionKey": "agent:main:slack:direct:U501"},
            "schedule": {"kind": "every", "every": "1h"}});
        let res = ws.call("cron.create", job).await;
        let id = res["payload"]["job"]["id"].as_str().unwrap().to_string();
        let n = texts(&fake, &ann).len();
        ws.call("cron.run", json!({"id": id})).await;
        until(&fake, &ann, "the job's message", |m| m.len() > n).await;
        assert_eq!(texts(&fake, &ann)[n], "Good morning, Ann.");
    }

    #[tokio::test]
    async fn slack_tokens_swapped_are_refused_with_the_reason() {
        let fake = SlackFake::start(BOT_TOKEN, APP_TOKEN, "UBOT", "BBOT").await;
        let gw = Gateway::start(
            tempfile::tempdir().unwrap(),
            ScriptedLlm::start().await.unwrap(),
            &format!(
                r#"channels: {{ slack: {{ api_base_url: "{}" }} }},"#,
                fake.api_base_url()
            ),
            // The app-level token where the bot token belongs, and the other way round.
            &[
                ("SLACK_BOT_TOKEN", APP_TOKEN),
                ("SLACK_APP_TOKEN", BOT_TOKEN),
            ],
        )
        .await;
        let mut ws = gw.ws().await;
        ws.connect(Some(&gw.token.clone())).await;
        let deadline = Instant::now() + WAIT;
        let status = loop {
            let s = ws
                .call("channels.status", json!({"channel": "slack"}))
                .await;
            if s["payload"]["channel"]["lastError"]
                .as_str()
                .is_some_and(|e| e.contains("not_allowed_token_type"))
            {
                break s;
            }
            assert!(Instant::now() < deadline, "{s}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        assert_eq!(status["payload"]["channel"]["state"], "failed", "{status}");
        assert!(!fake.connected());
        assert!(!gw.stderr().contains(APP_TOKEN) && !gw.stderr().contains(BOT_TOKEN));
    }
}

mod whatsapp {
    use super::*;
    use ferroclaw_testkit::whatsapp::WhatsAppBridgeFake;

    const ANN: &str = "15550000501@s.whatsapp.net";

    async fn until(
        fake: &WhatsAppBridgeFake,
        chat: &str,
        what: &str,
        pred: impl Fn(&[String]) -> bool,
    ) {
        let ok = fake.wait_sent(chat, WAIT, pred).await;
        assert!(ok, "{what}: {:?}", fake.sent_to(chat));
    }

    #[tokio::test]
    async fn whatsapp_through_a_bridge_pairs_answers_and_reconnects() {
        let fake = WhatsAppBridgeFake::start("15559990000", Some("bridge-secret")).await;
        let gw = Gateway::start(
            tempfile::tempdir().unwrap(),
            ScriptedLlm::start().await.unwrap(),
            &format!(
                r#"channels: {{ whatsapp: {{ bridge_url: "{}" }} }},"#,
                fake.url()
            ),
            &[("WHATSAPP_BRIDGE_TOKEN", "bridge-secret")],
        )
        .await;
        assert!(fake.wait_connected(WAIT).await, "{}", gw.stderr());

        fake.dm("15550000501", "Ann", "hello?");
        fake.dm("15550000501", "Ann", "hello again");
        fake.dm("15550000502", "Bob", "me too");
        until(&fake, "15550000502@s.whatsapp.net", "bob's code", |m| {
            m.len() == 1
        })
        .await;
        until(&fake, ANN, "ann's code", |m| m.len() == 1).await;
        let code = code_in(&fake.sent_to(ANN)[0]);
        assert!(pairing_cli(&gw, &["approve", &code]).status.success());

        // Split under 4,000 characters, in WhatsApp's marks.
        let long: String = (0..150)
            .map(|i| format!("Part {i}: **bold {i}** and _more_ words here.\n\n"))
            .collect();
        gw.llm.push(Reply::text(long));
        fake.dm("15550000501", "Ann", "tell me a lot");
        until(&fake, ANN, "the long answer", |m| {
            m.last().is_some_and(|t| t.contains("Part 149:"))
        })
        .await;
        let answer = &fake.sent_to(ANN)[1..];
        assert!(answer.len() >= 2);
        for t in answer {
            assert!(t.chars().count() <= 4000);
            assert!(!t.contains("**"), "{}", &t[..100]);
        }
        assert!(
            answer[0].starts_with("Part 0: *bold 0* and _more_"),
            "{}",
            &answer[0][..60]
        );

        // Its own messages are not answered; group messages without a mention are
        // remembered and given with the mention.
        let asked = gw.llm.requests().len();
        fake.from_me(ANN, "sent from the phone itself");
        fake.group(
            "1203630001@g.us",
            "15550000501",
            "we talk about apples",
            false,
        );
        fake.group("1203630001@g.us", "15550000503", "and pears", false);
        gw.llm.push(Reply::text("Apples and pears."));
        fake.group(
            "1203630001@g.us",
            "15550000501",
            "what was that about?",
            true,
        );
        until(&fake, "1203630001@g.us", "the group answer", |m| {
            !m.is_empty()
        })
        .await;
        assert_eq!(
            fake.sent_to("1203630001@g.us"),
            vec!["Apples and pears.".to_string()]
        );
        assert_eq!(gw.llm.requests().len(), asked + 1);
        let body = gw.llm.requests().last().unwrap().body.to_string();
        assert!(
            body.contains("apples") && body.contains("pears") && !body.contains("@15559990000"),
            "{body}"
        );

        // `/stop` ends an answer being written; the rest never arrives.
        gw.llm.push(
            Reply::text("The first part, and then something too late")
                .chunk_size(4)
                .hang_after(5),
        );
        let n = fake.sent_to(ANN).len();
        fake.dm("15550000501", "Ann", "think hard");
        let asked_again = tokio::time::timeout(WAIT, gw.llm.wait_for_requests(asked + 2)).await;
        assert!(asked_again.is_ok(), "the model was not asked");
        fake.dm("15550000501", "Ann", "/stop");
        until(&fake, ANN, "stopped", |m| {
            m.len() > n && m[n].contains("Stopped 1")
        })
        .await;

        // The bridge goes away and comes back: the channel reconnects (and authenticates
        // again) and answers.
        fake.disconnect().await;
        fake.restore().await.unwrap();
        assert!(
            fake.wait_connected(WAIT).await,
            "no reconnection: {}",
            gw.stderr()
        );
        gw.llm.push(Reply::text("back"));
        let n = fake.sent_to(ANN).len();
        fake.dm("15550000501", "Ann", "still there?");
        until(&fake, ANN, "after the outage", |m| m.len() > n).await;
        assert_eq!(fake.sent_to(ANN)[n], "back");
        assert!(!fake.sent_to(ANN).iter().any(|t| t.contains("too late")));
        let (connections, most, refused) = fake.connections();
        assert_eq!((connections, most, refused), (2, 1, 0));
    }

    #[tokio::test]
    async fn a_bridge_that_wants_another_token_refuses_the_channel() {
        let fake = WhatsAppBridgeFake::start("15559990000", Some("bridge-secret")).await;
        let gw = Gateway::start(
            tempfile::tempdir().unwrap(),
            ScriptedLlm::start().await.unwrap(),
            &format!(
                r#"channels: {{ whatsapp: {{ bridge_url: "{}" }} }},"#,
                fake.url()
            ),
            &[("WHATSAPP_BRIDGE_TOKEN", "wrong")],
        )
        .await;
        assert!(fake.wait_refused(WAIT).await, "{}", gw.stderr());
        assert!(!fake.connected());
        assert!(!gw.stderr().contains("wrong\""));
    }
}

mod zalo {
    use super::*;
    use ferroclaw_testkit::zalo::ZaloFake;

    const TOKEN: &str = "1459232241454765289:fake-zalo-secret";

    async fn until(fake: &ZaloFake, chat: &str, what: &str, pred: impl Fn(&[String]) -> bool) {
        let ok = fake.wait_sent(chat, WAIT, pred).await;
        assert!(ok, "{what}: {:?}", fake.sent_to(chat));
    }

    #[tokio::test]
    async fn a_zalo_user_pairs_then_talks_and_polling_survives_an_outage() {
        let fake = ZaloFake::start(TOKEN).await;
        let gw = Gateway::start(
            tempfile::tempdir().unwrap(),
            ScriptedLlm::start().await.unwrap(),
            &format!(
                r#"channels: {{ zalo: {{ api_base_url: "{}", poll_timeout_seconds: 1 }} }},"#,
                fake.base_url()
            ),
            &[("ZALO_BOT_TOKEN", TOKEN)],
        )
        .await;

        fake.dm("u501", "Ann", "xin chào");
        fake.dm("u501", "Ann", "again");
        fake.dm("u502", "Bob", "me too");
        until(&fake, "u502", "bob's code", |m| m.len() == 1).await;
        until(&fake, "u501", "ann's code", |m| m.len() == 1).await;
        let code = code_in(&fake.sent_to("u501")[0]);
        assert!(pairing_cli(&gw, &["approve", &code]).status.success());

        // Plain text (Zalo shows no markup), split under 2,000 characters.
        let long: String = (0..80)
            .map(|i| format!("Part {i}: **bold {i}** words to read.\n\n"))
            .collect();
        gw.llm.push(Reply::text(long));
        fake.dm("u501", "Ann", "tell me a lot");
        until(&fake, "u501", "the long answer", |m| {
            m.last().is_some_and(|t| t.contains("Part 79:"))
        })
        .await;
        let answer = &fake.sent_to("u501")[1..];
        assert!(answer.len() >= 2);
        for t in answer {
            assert!(
                t.chars().count() <= 2000 && !t.contains("**"),
                "{}",
                &t[..60]
            );
        }
        assert!(
            !fake.calls_to("sendChatAction").is_empty(),
            "no typing indicator"
        );

        // Another bot is never answered (nor given a code).
        fake.from_bot("u900", "beep");

        // A 429 is waited out for its retry_after.
        gw.llm.push(Reply::text("after the wait"));
        fake.fail_next("sendMessage", 429, Some(1));
        let n = fake.sent_to("u501").len();
        fake.dm("u501", "Ann", "quick");
        until(&fake, "u501", "after a 429", |m| m.len() > n).await;
        assert_eq!(fake.sent_to("u501")[n], "after the wait");
        let sends = fake.calls_to("sendMessage");
        let refused = sends
            .iter()
            .position(|c| c.error_code == Some(429))
            .unwrap();
        assert!(sends[refused + 1].at.duration_since(sends[refused].at) >= Duration::from_secs(1));

        // `/stop` ends an answer being written.
        gw.llm.push(
            Reply::text("The first part, and then something too late")
                .chunk_size(4)
                .hang_after(5),
        );
        let asked = gw.llm.requests().len();
        fake.dm("u501", "Ann", "think hard");
        let asked_again = tokio::time::timeout(WAIT, gw.llm.wait_for_requests(asked + 1)).await;
        assert!(asked_again.is_ok());
        let n = fake.sent_to("u501").len();
        fake.dm("u501", "Ann", "/stop");
        until(&fake, "u501", "stopped", |m| {
            m.len() > n && m[n].contains("Stopped 1")
        })
        .await;

        // The API goes away mid-poll and comes back: polling resumes, the message written
        // meanwhile is answered.
        fake.disconnect().await;
        gw.llm.push(Reply::text("back"));
        fake.dm("u501", "Ann", "still there?");
        let n = fake.sent_to("u501").len();
        fake.restore().await.unwrap();
        until(&fake, "u501", "after the outage", |m| m.len() > n).await;
        assert_eq!(fake.sent_to("u501")[n], "back");
        assert!(!fake.sent_to("u501").iter().any(|t| t.contains("too late")));
        assert!(fake.sent_to("u900").is_empty(), "a bot was answered");
    }
}

mod feishu {
    use super::*;
    use ferroclaw_testkit::feishu::{FeishuFake, Sent};

    const APP: &str = "cli_a1b2c3d4e5";
    const SECRET: &str = "fake-app-secret";
    const VERIFY: &str = "fake-verification-token";

    async fn until(fake: &FeishuFake, to: &str, what: &str, pred: impl Fn(&[Sent]) -> bool) {
        let ok = fake.wait_sent(to, WAIT, pred).await;
        assert!(ok, "{what}: {:?}", fake.sent_to(to));
    }

    fn settled(n: usize) -> impl Fn(&[Sent]) -> bool {
        move |m: &[Sent]| m.len() >= n && m.iter().all(|m| m.text != "Thinking…")
    }

    #[tokio::test]
    async fn feishu_events_are_verified_answered_in_cards_and_never_twice() {
        let fake = FeishuFake::start(APP, SECRET, VERIFY).await;
        let gw = Gateway::start(
            tempfile::tempdir().unwrap(),
            ScriptedLlm::start().await.unwrap(),
            &format!(
                r#"channels: {{ feishu: {{ app_id: "{APP}", api_base_url: "{}" }} }},"#,
                fake.api_base_url()
            ),
            &[
                ("FEISHU_APP_SECRET", SECRET),
                ("FEISHU_VERIFICATION_TOKEN", VERIFY),
            ],
        )
        .await;
        let url = format!("{}/channels/feishu/events", gw.base);

        // The URL check is answered with the challenge; a forged one is refused, and so
        // is an event with the wrong token, with the reason and without the gateway token.
        let deadline = Instant::now() + WAIT;
        let (status, answer) = loop {
            let (status, answer) = fake.url_check(&url, VERIFY, "c-42").await;
            if status != 503 || Instant::now() > deadline {
                break (status, answer);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        assert_eq!((status, answer), (200, json!({"challenge": "c-42"})));
        let (status, answer) = fake.url_check(&url, "forged", "c-43").await;
        assert_eq!(status, 401);
        assert!(
            answer.to_string().contains("wrong verification token"),
            "{answer}"
        );
        let mut forged = fake.event("om_forged", "ou_ann", None, "hi", false, "user");
        forged["header"]["token"] = json!("forged");
        assert_eq!(fake.post(&url, &forged).await.0, 401);
        let (status, answer) = fake.post(&url, &json!({"encrypt": "AAAA"})).await;
        assert_eq!(status, 400);
        assert!(answer.to_string().contains("Encrypt Key"), "{answer}");
        // Wait until the channel takes events (it first checks the app's credentials).
        let deadline = Instant::now() + WAIT;
        loop {
            let (status, _) = fake.deliver(&url, "ou_zed", None, "knock", false).await;
            if status == 200 {
                break;
            }
            assert!(Instant::now() < deadline, "events never taken: {status}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }

        // Pairing: one code per stranger; approval by the CLI.
        let ann_chat = "oc_p2p_ou_ann";
        fake.deliver(&url, "ou_ann", None, "hello?", false).await;
        fake.deliver(&url, "ou_ann", None, "hello again", false)
            .await;
        fake.deliver(&url, "ou_bob", None, "me too", false).await;
        until(&fake, "oc_p2p_ou_bob", "bob's code", |m| m.len() == 1).await;
        // Senders are handled side by side: ann's code may come after bob's.
        until(&fake, ann_chat, "ann's code", |m| m.len() == 1).await;
        let code = code_in(&fake.sent_to(ann_chat)[0].text);
        assert!(pairing_cli(&gw, &["approve", &code]).status.success());

        // An answer in Markdown cards: "Thinking…" first, updated into the answer, the
        // rest in further cards under 4,000 characters; a retried event is answered once.
        let long: String = (0..120)
            .map(|i| format!("Part {i}: **bold {i}** and more words.\n\n"))
            .collect();
        gw.llm.push(Reply::text(long));
        let (status, id) = fake
            .deliver(&url, "ou_ann", None, "tell me a lot", false)
            .await;
        assert_eq!(status, 200);
        let again = fake.event(&id, "ou_ann", None, "tell me a lot", false, "user");
        assert_eq!(fake.post(&url, &again).await.0, 200);
        until(&fake, ann_chat, "the long answer", |m| {
            m.last().is_some_and(|s| s.text.contains("Part 119:"))
        })
        .await;
        let answer: Vec<Sent> = fake.sent_to(ann_chat).into_iter().skip(1).collect();
        assert!(answer.len() >= 2);
        assert_eq!(answer[0].reply_to.as_deref(), Some(id.as_str()));
        assert!(
            answer[0].updates >= 1 && answer[0].text.starts_with("Part 0: **bold 0**"),
            "{:?}",
            answer[0]
        );
        for s in &answer {
            assert_eq!(s.tag, "markdown");
            assert!(s.text.encode_utf16().count() <= 4000);
        }
        assert_eq!(
            gw.llm.requests().len(),
            1,
            "the retried event was answered again"
        );

        // Rate limits are waited out; an expired tenant token is fetched again.
        gw.llm.push(Reply::text("after the wait"));
        fake.rate_limit_next(1);
        fake.expire_tokens();
        let n = fake.sent_to(ann_chat).len();
        fake.deliver(&url, "ou_ann", None, "quick", false).await;
        until(&fake, ann_chat, "after a 429", settled(n + 1)).await;
        assert_eq!(fake.sent_to(ann_chat)[n].text, "after the wait");
        let calls = fake.calls();
        let limited = calls.iter().position(|c| c.status == 429).unwrap();
        let next = calls[limited + 1..]
            .iter()
            .find(|c| c.what != "token")
            .unwrap();
        assert!(next.at.duration_since(calls[limited].at) >= Duration::from_secs(1));

        // Groups: unmentioned messages remembered, the bot's own (an app) ignored, the
        // mention answered with the context.
        let asked = gw.llm.requests().len();
        fake.deliver(
            &url,
            "ou_ann",
            Some("oc_group"),
            "we talk about apples",
            false,
        )
        .await;
        fake.deliver(&url, "ou_carl", Some("oc_group"), "and pears", false)
            .await;
        let own = fake.event(
            "om_own",
            fake.bot_open_id(),
            Some("oc_group"),
            "I am the bot",
            true,
            "app",
        );
        fake.post(&url, &own).await;
        gw.llm.push(Reply::text("Apples and pears."));
        fake.deliver(
            &url,
            "ou_ann",
            Some("oc_group"),
            "what was that about?",
            true,
        )
        .await;
        until(&fake, "oc_group", "the group answer", settled(1)).await;
        assert_eq!(fake.sent_to("oc_group")[0].text, "Apples and pears.");
        assert_eq!(gw.llm.requests().len(), asked + 1);
        let body = gw.llm.requests().last().unwrap().body.to_string();
        assert!(
            body.contains("apples") && body.contains("pears") && !body.contains("@_user_1"),
            "{body}"
        );

        // `/stop` ends an answer being written; the card says so.
        gw.llm.push(
            Reply::text("The first part of a long answer, and then something too late")
                .chunk_size(4)
                .hang_after(10),
        );
        let n = fake.sent_to(ann_chat).len();
        fake.deliver(&url, "ou_ann", None, "think hard", false)
            .await;
        until(&fake, ann_chat, "the draft", |m| {
            m.len() > n && m[n].text.starts_with("The first part")
        })
        .await;
        fake.deliver(&url, "ou_ann", None, "/stop", false).await;
        until(&fake, ann_chat, "stopped", |m| {
            m.len() > n + 1
                && m[n + 1].text.contains("Stopped 1")
                && m[n].text.ends_with("(stopped)")
        })
        .await;
    }
}
