//! A real headless Chromium for the dashboard's tests, driven over the DevTools protocol
//! (CDP) with the WebSocket client the tests already have: tabs, script evaluation,
//! keyboard input, screenshots. The browser is Debian's `chromium` (`.ci/run` installs
//! it); without it the tests fail and say what to install.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use base64::Engine as _;
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

const WAIT: Duration = Duration::from_secs(60);

pub struct Browser {
    child: tokio::process::Child,
    ws: WebSocketStream<MaybeTlsStream<TcpStream>>,
    next_id: u64,
    _profile: tempfile::TempDir,
}

/// One tab, addressed by its CDP session.
#[derive(Debug, Clone)]
pub struct Tab {
    session: String,
}

fn chromium() -> Result<PathBuf, String> {
    for name in ["chromium", "chromium-browser", "google-chrome"] {
        if let Some(dir) = std::env::var_os("PATH") {
            for d in std::env::split_paths(&dir) {
                let p = d.join(name);
                if p.is_file() {
                    return Ok(p);
                }
            }
        }
    }
    Err("the dashboard tests need Chromium: apt-get install -y chromium (what .ci/run does)".into())
}

impl Browser {
    pub async fn launch() -> Result<Browser, String> {
        let exe = chromium()?;
        let profile = tempfile::tempdir().map_err(|e| e.to_string())?;
        let mut child = tokio::process::Command::new(exe)
            .args([
                "--headless=new",
                "--disable-gpu",
                // CI runs as root, where Chromium's own sandbox cannot start; the browser
                // only ever loads the gateway under test.
                "--no-sandbox",
                "--no-first-run",
                "--no-default-browser-check",
                "--disable-extensions",
                "--disable-dev-shm-usage",
                "--remote-debugging-port=0",
                "--hide-scrollbars",
                "--force-color-profile=srgb",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg("about:blank")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("cannot start chromium: {e}"))?;
        let stderr = child.stderr.take().ok_or("no stderr")?;
        let mut lines = BufReader::new(stderr).lines();
        let url = tokio::time::timeout(WAIT, async {
            while let Ok(Some(line)) = lines.next_line().await {
                if let Some(at) = line.find("ws://") {
                    return Some(line[at..].trim().to_string());
                }
            }
            None
        })
        .await
        .map_err(|_| "chromium did not start in time".to_string())?
        .ok_or("chromium exited before listening")?;
        // Keep reading so Chromium never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        let (ws, _) = tokio_tungstenite::connect_async(url.as_str())
            .await
            .map_err(|e| format!("cannot reach chromium's DevTools: {e}"))?;
        Ok(Browser {
            child,
            ws,
            next_id: 0,
            _profile: profile,
        })
    }

    async fn send(&mut self, session: Option<&str>, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let mut frame = json!({"id": id, "method": method, "params": params});
        if let Some(s) = session {
            frame["sessionId"] = json!(s);
        }
        self.ws
            .send(Message::text(frame.to_string()))
            .await
            .expect("send to chromium");
        loop {
            let msg = tokio::time::timeout(WAIT, self.ws.next())
                .await
                .unwrap_or_else(|_| panic!("chromium did not answer {method}"))
                .expect("chromium closed the connection")
                .expect("read from chromium");
            let Message::Text(text) = msg else { continue };
            let v: Value = serde_json::from_str(text.as_str()).expect("CDP json");
            if v["id"] == id {
                if let Some(e) = v.get("error") {
                    panic!("{method}: {e}");
                }
                return v["result"].clone();
            }
        }
    }

    /// A new tab at `url`, `width`×`height` CSS pixels (`mobile`: a phone's viewport).
    pub async fn tab(&mut self, url: &str, width: u32, height: u32, mobile: bool) -> Tab {
        let target = self
            .send(None, "Target.createTarget", json!({"url": "about:blank"}))
            .await;
        let attached = self
            .send(
                None,
                "Target.attachToTarget",
                json!({"targetId": target["targetId"], "flatten": true}),
            )
            .await;
        let tab = Tab {
            session: attached["sessionId"]
                .as_str()
                .expect("session id")
                .to_string(),
        };
        self.viewport(&tab, width, height, mobile).await;
        self.send(Some(&tab.session), "Page.enable", json!({}))
            .await;
        self.send(Some(&tab.session), "Page.navigate", json!({"url": url}))
            .await;
        tab
    }

    pub async fn viewport(&mut self, tab: &Tab, width: u32, height: u32, mobile: bool) {
        self.send(
            Some(&tab.session),
            "Emulation.setDeviceMetricsOverride",
            json!({"width": width, "height": height, "deviceScaleFactor": 1, "mobile": mobile}),
        )
        .await;
    }

    /// Evaluates `expr` in the page (awaiting a promise) and returns its value; a thrown
    /// exception fails the test with its text.
    pub async fn eval(&mut self, tab: &Tab, expr: &str) -> Value {
        let r = self
            .send(
                Some(&tab.session),
                "Runtime.evaluate",
                json!({"expression": expr, "awaitPromise": true, "returnByValue": true}),
            )
            .await;
        if let Some(e) = r.get("exceptionDetails") {
            panic!("script failed: {expr}\n{e}");
        }
        r["result"]["value"].clone()
    }

    /// Waits until `expr` is true in the page.
    pub async fn wait_for(&mut self, tab: &Tab, expr: &str) {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            if self.eval(tab, &format!("!!({expr})")).await == json!(true) {
                return;
            }
            if tokio::time::Instant::now() > deadline {
                let body = self
                    .eval(tab, "document.body ? document.body.innerText : ''")
                    .await;
                panic!("never true in the page: {expr}\npage text: {body}");
            }
            // Polling the page is how a DevTools client waits for its state.
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Presses a key (`Tab`, `Enter`, …) as a keyboard would.
    pub async fn key(&mut self, tab: &Tab, key: &str, shift: bool) {
        let (code, vk) = match key {
            "Tab" => ("Tab", 9),
            "Enter" => ("Enter", 13),
            "Escape" => ("Escape", 27),
            " " => ("Space", 32),
            other => panic!("no key code for {other}"),
        };
        let text = match key {
            "Enter" => "\r",
            " " => " ",
            _ => "",
        };
        for kind in ["rawKeyDown", "char", "keyUp"] {
            if kind == "char" && text.is_empty() {
                continue;
            }
            self.send(
                Some(&tab.session),
                "Input.dispatchKeyEvent",
                json!({"type": kind, "key": key, "code": code, "windowsVirtualKeyCode": vk,
                       "text": if kind == "char" { text } else { "" },
                       "modifiers": if shift { 8 } else { 0 }}),
            )
            .await;
        }
    }

    /// Types `text` into the focused element.
    pub async fn type_text(&mut self, tab: &Tab, text: &str) {
        self.send(
            Some(&tab.session),
            "Input.insertText",
            json!({"text": text}),
        )
        .await;
    }

    /// A PNG of the tab's whole page, written to `path`.
    pub async fn screenshot(&mut self, tab: &Tab, path: &Path) {
        // A tab in the background may not paint: bring it to the front first.
        self.send(Some(&tab.session), "Page.bringToFront", json!({}))
            .await;
        let r = self
            .send(
                Some(&tab.session),
                "Page.captureScreenshot",
                json!({"format": "png", "captureBeyondViewport": true}),
            )
            .await;
        let data = base64::engine::general_purpose::STANDARD
            .decode(r["data"].as_str().unwrap_or_default())
            .expect("png");
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).expect("artifact dir");
        }
        std::fs::write(path, data).expect("write screenshot");
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}
