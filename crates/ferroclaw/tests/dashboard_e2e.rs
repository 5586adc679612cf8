//! The dashboard in a real browser (headless Chromium over the DevTools protocol): sign
//! in with the token, chat with a streamed answer and a tool call, approve the exec
//! approval it waits for from a second tab, open the run's trace, visit every page, and
//! check each with axe-core (labels, contrast, …) and by keyboard. A screenshot of each
//! page is saved under `target/artifacts/dashboard/` (`FERROCLAW_ARTIFACTS` moves it).

use std::path::PathBuf;
use std::time::Duration;

use ferroclaw_testkit::browser::{Browser, Tab};
use ferroclaw_testkit::Reply;
use serde_json::{json, Value};

use crate::gateway_e2e::Gateway;

fn artifacts() -> PathBuf {
    std::env::var_os("FERROCLAW_ARTIFACTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/artifacts"))
        .join("dashboard")
}

fn axe_source() -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../.ci/mcp/node_modules/axe-core/axe.min.js");
    std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{} is missing ({e}): run `npm install --prefix .ci/mcp` (what .ci/run does)",
            path.display()
        )
    })
}

/// axe-core's WCAG 2 A/AA rules on the page as it is now: no violations allowed.
async fn accessible(b: &mut Browser, tab: &Tab, axe: &str, page: &str) {
    if b.eval(tab, "typeof window.axe").await != json!("object") {
        b.eval(tab, axe).await;
    }
    let found = b
        .eval(
            tab,
            "axe.run(document, {runOnly: {type: 'tag', values: ['wcag2a', 'wcag2aa']}})
               .then(r => r.violations.map(v => ({id: v.id, impact: v.impact,
                 nodes: v.nodes.slice(0, 3).map(n => n.target.join(' ') + ': ' + n.failureSummary)})))",
        )
        .await;
    assert_eq!(found, json!([]), "{page}: accessibility violations");
}

async fn shot(b: &mut Browser, tab: &Tab, name: &str) {
    b.screenshot(tab, &artifacts().join(format!("{name}.png")))
        .await;
}

/// The description of the focused element.
async fn focused(b: &mut Browser, tab: &Tab) -> Value {
    b.eval(
        tab,
        "(() => { const e = document.activeElement; const s = getComputedStyle(e);
           return {tag: e.tagName, id: e.id, text: (e.textContent || '').trim().slice(0, 40),
                   outline: s.outlineStyle}; })()",
    )
    .await
}

async fn go(b: &mut Browser, tab: &Tab, hash: &str, ready: &str) {
    b.eval(tab, &format!("location.hash = '{hash}'")).await;
    b.wait_for(tab, ready).await;
}

#[tokio::test]
async fn the_dashboard_signs_in_chats_approves_and_shows_the_run() {
    let gw = Gateway::start_with(
        "",
        r#"tools: { exec: { approval: "always", approval_timeout_seconds: 60 } },"#,
        "",
        &[],
    )
    .await;
    let axe = axe_source();
    let mut b = Browser::launch().await.expect("chromium");
    let tab = b.tab(&gw.base, 1280, 860, false).await;

    // Sign-in: labelled, reachable by keyboard, a wrong token is refused in words.
    b.wait_for(
        &tab,
        "document.querySelector('#login') && !document.querySelector('#login').hidden",
    )
    .await;
    accessible(&mut b, &tab, &axe, "sign-in").await;
    shot(&mut b, &tab, "01-sign-in").await;
    assert_eq!(focused(&mut b, &tab).await["id"], "token");
    b.type_text(&tab, "not-the-token").await;
    b.key(&tab, "Enter", false).await;
    b.wait_for(
        &tab,
        "document.querySelector('#login-error').textContent.includes('not valid')",
    )
    .await;
    b.eval(&tab, "document.querySelector('#token').value = ''")
        .await;
    b.eval(&tab, "document.querySelector('#token').focus()")
        .await;
    b.type_text(&tab, &gw.token).await;
    b.key(&tab, "Tab", false).await;
    let f = focused(&mut b, &tab).await;
    assert_eq!(
        f["tag"], "BUTTON",
        "Tab moves from the token to Sign in: {f}"
    );
    assert_ne!(f["outline"], "none", "the focused control shows it: {f}");
    b.key(&tab, "Enter", false).await;
    b.wait_for(&tab, "document.querySelector('#chat-input')")
        .await;

    // The page keeps the token in this tab only: no cookie.
    assert_eq!(b.eval(&tab, "document.cookie").await, json!(""));

    // Chat: the model asks for a command; it waits for a person's approval.
    gw.llm.push(
        Reply::tool_call("c1", "exec", json!({"command": "echo from-the-dashboard"}))
            .with_usage(420, 35),
    );
    gw.llm.push(
        Reply::text("The command printed from-the-dashboard, as asked.")
            .chunk_size(6)
            .pace(Duration::from_millis(20))
            .with_usage(510, 60),
    );
    b.eval(&tab, "document.querySelector('#chat-input').focus()")
        .await;
    b.type_text(&tab, "run the echo please").await;
    b.eval(&tab, "document.querySelector('#chat-send').click()")
        .await;
    b.wait_for(&tab, "[...document.querySelectorAll('.tool-call summary')].some(s => s.textContent.includes('exec'))")
        .await;
    b.wait_for(&tab, "!document.querySelector('#approval-count').hidden")
        .await;
    assert_eq!(
        b.eval(&tab, "document.querySelector('#chat-stop').disabled")
            .await,
        json!(false),
        "a running turn can be stopped"
    );
    shot(&mut b, &tab, "02-chat-waiting-for-approval").await;

    // A second tab, signed in by the URL the gateway prints (token in the fragment),
    // approves the command while the first keeps streaming.
    let approvals = b
        .tab(
            &format!("{}/#token={}", gw.base, gw.token),
            1280,
            860,
            false,
        )
        .await;
    b.wait_for(&approvals, "document.querySelector('#chat-input')")
        .await;
    assert!(
        !b.eval(&approvals, "location.href")
            .await
            .to_string()
            .contains(&gw.token),
        "the token is taken out of the address bar"
    );
    go(&mut b, &approvals, "#/approvals", "[...document.querySelectorAll('#approvals button')].some(x => x.textContent === 'Approve')").await;
    assert!(b
        .eval(
            &approvals,
            "document.querySelector('#approvals').textContent"
        )
        .await
        .to_string()
        .contains("echo from-the-dashboard"));
    accessible(&mut b, &approvals, &axe, "approvals").await;
    shot(&mut b, &approvals, "03-approvals").await;
    b.eval(&approvals, "[...document.querySelectorAll('#approvals button')].find(x => x.textContent === 'Approve').click()").await;
    b.wait_for(
        &approvals,
        "document.querySelector('#approvals').textContent.includes('Nothing is waiting')",
    )
    .await;

    // Back in the first tab: the tool call finished and the answer streamed in.
    b.wait_for(&tab, "document.querySelector('.live .answer, .answer') && [...document.querySelectorAll('.answer')].some(a => a.textContent.includes('as asked.'))")
        .await;
    b.wait_for(&tab, "[...document.querySelectorAll('.tool-call summary')].some(s => s.textContent.includes('done'))")
        .await;
    b.wait_for(&tab, "!document.querySelector('#chat-send').disabled")
        .await;
    accessible(&mut b, &tab, &axe, "chat").await;
    shot(&mut b, &tab, "04-chat").await;

    // The run's trace: a waterfall with the model calls and the tool call.
    go(
        &mut b,
        &tab,
        "#/traces",
        "document.querySelector('main table a')",
    )
    .await;
    accessible(&mut b, &tab, &axe, "runs").await;
    shot(&mut b, &tab, "05-runs").await;
    b.eval(&tab, "document.querySelector('main table a').click()")
        .await;
    b.wait_for(&tab, "document.querySelector('#waterfall .bar.tool') && document.querySelectorAll('#waterfall .bar.llm').length === 2")
        .await;
    accessible(&mut b, &tab, &axe, "trace").await;
    shot(&mut b, &tab, "06-trace").await;

    // Every other page renders, passes the accessibility rules and is screenshotted.
    for (hash, ready, name) in [
        ("#/sessions", "document.querySelector('main table code')", "07-sessions"),
        ("#/agents", "document.querySelector('main table code')", "08-agents"),
        ("#/usage", "document.querySelector('main svg.chart rect')", "09-usage"),
        ("#/system", "[...document.querySelectorAll('main h2')].some(h => h.textContent === 'Scheduled jobs')", "10-system"),
    ] {
        go(&mut b, &tab, hash, ready).await;
        accessible(&mut b, &tab, &axe, name).await;
        shot(&mut b, &tab, name).await;
    }
    // System: the provider answers, and the operator sees the configuration masked.
    go(
        &mut b,
        &tab,
        "#/system",
        "document.querySelector('#config-view')",
    )
    .await;
    let system = b
        .eval(&tab, "document.querySelector('main').innerText")
        .await;
    let system = system.as_str().unwrap_or_default();
    assert!(
        system.contains("reachable") && !system.contains("unreachable"),
        "{system}"
    );

    // Agents: make one, rename it, share it.
    go(
        &mut b,
        &tab,
        "#/agents",
        "document.querySelector('#new-agent')",
    )
    .await;
    b.eval(&tab, "document.querySelector('#new-agent-id').focus()")
        .await;
    b.type_text(&tab, "notes").await;
    b.eval(&tab, "document.querySelector('#new-agent-name').focus()")
        .await;
    b.type_text(&tab, "Notes").await;
    b.eval(&tab, "document.querySelector('#new-agent button').click()")
        .await;
    b.wait_for(
        &tab,
        "[...document.querySelectorAll('main table code')].some(c => c.textContent === 'notes')",
    )
    .await;
    b.eval(&tab, "[...document.querySelectorAll('main table tr')].find(r => r.textContent.startsWith('notes')).querySelector('button').click()").await;
    b.wait_for(&tab, "[...document.querySelectorAll('#agent-detail h2')].some(h => h.textContent === 'Edit notes')")
        .await;
    accessible(&mut b, &tab, &axe, "agents, editing").await;
    b.eval(&tab, "const i = document.querySelector('#agent-detail form input'); i.value = 'Notes v2'; i.form.querySelector('button').click()").await;
    b.wait_for(
        &tab,
        "[...document.querySelectorAll('main table td')].some(c => c.textContent === 'Notes v2')",
    )
    .await;
    b.eval(&tab, "[...document.querySelectorAll('main table tr')].find(r => r.textContent.startsWith('notes')).querySelector('button').click()").await;
    b.wait_for(
        &tab,
        "document.querySelectorAll('#agent-detail form').length === 2",
    )
    .await;
    b.eval(&tab, "const f = document.querySelectorAll('#agent-detail form')[1]; f.querySelector('input').value = 'bob'; f.querySelector('button').click()").await;
    b.wait_for(
        &tab,
        "document.querySelector('#status-line').textContent === 'Shared notes with bob'",
    )
    .await;

    // A session's history shows the tool call folded.
    go(
        &mut b,
        &tab,
        "#/sessions",
        "document.querySelector('main table button')",
    )
    .await;
    b.eval(&tab, "[...document.querySelectorAll('main table button')].find(x => x.textContent === 'History').click()").await;
    b.wait_for(&tab, "[...document.querySelectorAll('main details summary')].some(s => s.textContent.startsWith('Tool call: exec'))")
        .await;

    // Keyboard: on a fresh load (signed in again from this tab's storage) the first Tab
    // reaches the skip link, the next ones the pages.
    b.eval(&tab, "window.beforeReload = true; location.reload()")
        .await;
    b.wait_for(
        &tab,
        "!window.beforeReload && document.querySelector('main table code')",
    )
    .await;
    b.key(&tab, "Tab", false).await;
    assert_eq!(focused(&mut b, &tab).await["text"], "Skip to content");
    b.key(&tab, "Tab", false).await;
    let f = focused(&mut b, &tab).await;
    assert_eq!(
        (f["tag"].as_str(), f["text"].as_str()),
        (Some("A"), Some("Chat")),
        "{f}"
    );
    assert_ne!(f["outline"], "none");

    // Dark, and a phone.
    b.eval(&tab, "document.querySelector('#theme').click()")
        .await;
    let theme = b.eval(&tab, "document.documentElement.dataset.theme").await;
    // The history, read back after the second tab read it mid-run, holds the whole
    // turn: the tool's result and the answer.
    go(
        &mut b,
        &tab,
        "#/chat",
        "[...document.querySelectorAll('.msg.assistant .body')].some(x => x.textContent.includes('as asked.'))",
    )
    .await;
    let results = b
        .eval(
            &tab,
            "[...document.querySelectorAll('.msg.tool summary')].map(s => s.textContent).join()",
        )
        .await;
    assert_eq!(
        results,
        json!("Tool result: exec"),
        "one result, not an error"
    );
    accessible(&mut b, &tab, &axe, "chat, other theme").await;
    shot(
        &mut b,
        &tab,
        &format!("11-chat-{}", theme.as_str().unwrap_or("theme")),
    )
    .await;
    b.viewport(&tab, 390, 844, true).await;
    go(
        &mut b,
        &tab,
        "#/traces",
        "document.querySelector('main table a')",
    )
    .await;
    let overflow = b
        .eval(
            &tab,
            "document.documentElement.scrollWidth <= window.innerWidth + 1",
        )
        .await;
    assert_eq!(overflow, json!(true), "nothing wider than a phone's screen");
    shot(&mut b, &tab, "12-runs-phone").await;

    // Signing out forgets the token.
    b.eval(&tab, "document.querySelector('#logout').click()")
        .await;
    b.wait_for(&tab, "!document.querySelector('#login').hidden")
        .await;
    assert_eq!(
        b.eval(&tab, "sessionStorage.getItem('ferroclaw.token')")
            .await,
        Value::Null
    );
}

/// A message sent before the conversation's history has loaded is sent once the history
/// is there, not lost to the browser submitting the form and reloading the page. The
/// page's history request is held back until the test lets it go.
#[tokio::test]
async fn a_message_sent_while_the_history_loads_is_sent() {
    let gw = Gateway::start_with("", "", "", &[]).await;
    let mut b = Browser::launch().await.expect("chromium");
    let tab = b.tab(&gw.base, 1024, 768, false).await;
    b.wait_for(
        &tab,
        "document.querySelector('#login') && !document.querySelector('#login').hidden",
    )
    .await;
    b.eval(
        &tab,
        r#"(() => {
          window.kept = true;
          window.held = [];
          const send = WebSocket.prototype.send;
          WebSocket.prototype.send = function (d) {
            if (String(d).includes('"chat.history"') && !window.released) {
              window.held.push(() => send.call(this, d));
              return;
            }
            return send.call(this, d);
          };
          window.release = () => { window.released = true; window.held.splice(0).forEach(f => f()); };
        })()"#,
    )
    .await;
    b.eval(&tab, "document.querySelector('#token').focus()")
        .await;
    b.type_text(&tab, &gw.token).await;
    b.key(&tab, "Enter", false).await;
    b.wait_for(
        &tab,
        "document.querySelector('#chat-input') && window.held.length === 1",
    )
    .await;

    gw.llm.push(Reply::text("Sent after all."));
    b.eval(&tab, "document.querySelector('#chat-input').focus()")
        .await;
    b.type_text(&tab, "are you there").await;
    b.eval(&tab, "document.querySelector('#chat-send').click()")
        .await;
    // Still the same page, the message taken, nothing sent yet.
    assert_eq!(
        b.eval(
            &tab,
            "[window.kept === true, document.querySelector('#chat-input').value, window.held.length]"
        )
        .await,
        json!([true, "", 1])
    );
    assert!(gw.llm.requests().is_empty());
    b.eval(&tab, "window.release()").await;
    b.wait_for(
        &tab,
        "document.querySelector('#messages').textContent.includes('Sent after all.')",
    )
    .await;
    assert!(b
        .eval(&tab, "document.querySelector('#messages').textContent")
        .await
        .as_str()
        .is_some_and(|t| t.contains("are you there")));
    assert_eq!(gw.llm.requests().len(), 1);
}

/// The page's own defences: a strict content policy, never framed, and the API still
/// refuses other sites even though the dashboard is served without a token.
#[tokio::test]
async fn the_dashboard_is_served_with_a_strict_policy_and_opens_no_door() {
    let gw = Gateway::start_with("", "", "", &[]).await;
    let http = reqwest::Client::new();
    for path in ["/", "/ui/app.js", "/ui/app.css"] {
        let resp = http.get(format!("{}{path}", gw.base)).send().await.unwrap();
        assert_eq!(resp.status(), 200, "{path}");
        let h = resp.headers();
        let csp = h["content-security-policy"].to_str().unwrap();
        assert!(
            csp.contains("script-src 'self'") && !csp.contains("unsafe"),
            "{csp}"
        );
        assert!(csp.contains("frame-ancestors 'none'"));
        assert_eq!(h["x-frame-options"], "DENY");
        assert_eq!(h["x-content-type-options"], "nosniff");
    }
    let page = http
        .get(&gw.base)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(!page.contains(&gw.token), "the page carries no token");
    assert!(!page.contains("<script>"), "no inline script");
    // A foreign page cannot use the data routes through the browser.
    let resp = http
        .get(format!("{}/v1/traces", gw.base))
        .header("Origin", "https://evil.example")
        .bearer_auth(&gw.token)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 403);
    // Nor is there anything behind the dashboard's paths without a token.
    let resp = http
        .get(format!("{}/v1/traces", gw.base))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 401);
    let resp = http
        .get(format!("{}/ui/secrets", gw.base))
        .send()
        .await
        .unwrap();
    assert!(
        resp.status() == 404 || resp.status() == 401,
        "{}",
        resp.status()
    );
}
