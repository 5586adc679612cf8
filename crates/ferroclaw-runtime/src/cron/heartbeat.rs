//! Heartbeats: a periodic turn per agent that follows its `HEARTBEAT.md`. Each is kept
//! as a job of the cron store (id `heartbeat-<agent>`, the administrator's), so it is
//! claimed, leased, run once across instances and logged like any job; what differs is
//! decided here: when it may run (active hours, a `HEARTBEAT.md` with something in it),
//! what it asks, and which answers are delivered (not `HEARTBEAT_OK`, not the same
//! content twice within a day).

use std::path::Path;

use chrono::{TimeZone, Timelike};
use ferroclaw_config::settings::HeartbeatSettings;
use ferroclaw_config::CatchUp;
use ferroclaw_store::CronJob;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{CronBook, CronError, Definition, Delivery, Schedule};

/// The reply that means "nothing needs attention".
pub const ACK_TOKEN: &str = "HEARTBEAT_OK";
/// Text around the token that still counts as a bare acknowledgement.
const ACK_SLACK_CHARS: usize = 300;
/// The same delivered content is not delivered again within this.
pub const DEDUP_WINDOW_MS: i64 = 24 * 3_600_000;

/// What a heartbeat job carries besides its schedule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct HeartbeatSpec {
    /// `[start, end)` minutes after midnight in `tz`; `end < start` wraps midnight.
    pub active_hours: Option<(u32, u32, String)>,
    pub deliver_to_last: bool,
}

pub(crate) fn job_id(agent_id: &str) -> String {
    format!("heartbeat-{agent_id}")
}

/// Whether `now` (epoch ms) is inside the active hours.
pub(crate) fn active_at(hours: &Option<(u32, u32, String)>, now: i64) -> Result<bool, String> {
    let Some((start, end, tz)) = hours else {
        return Ok(true);
    };
    let zone: chrono_tz::Tz = tz
        .parse()
        .map_err(|_| format!("heartbeat active hours: `{tz}` is not an IANA time zone"))?;
    let local = zone
        .timestamp_millis_opt(now)
        .single()
        .ok_or("heartbeat active hours: time out of range")?;
    let minute = local.hour() * 60 + local.minute();
    Ok(match start.cmp(end) {
        std::cmp::Ordering::Equal => true,
        std::cmp::Ordering::Less => (*start..*end).contains(&minute),
        std::cmp::Ordering::Greater => minute >= *start || minute < *end,
    })
}

/// `HEARTBEAT.md` with its headings, empty list items, comments and blank lines taken
/// out; `None` when nothing is left (nothing to do, so no turn is spent on it).
pub(crate) fn meaningful(content: &str) -> Option<String> {
    let mut without_comments = String::new();
    let mut rest = content;
    while let Some(start) = rest.find("<!--") {
        without_comments.push_str(&rest[..start]);
        rest = match rest[start..].find("-->") {
            Some(end) => &rest[start + end + 3..],
            None => "",
        };
    }
    without_comments.push_str(rest);
    let kept: Vec<&str> = without_comments
        .lines()
        .map(str::trim)
        .filter(|l| {
            let bare = l.trim_start_matches(['#', '-', '*', '+', '>', ' ', '[', ']', 'x']);
            !l.is_empty() && !l.starts_with('#') && !bare.trim().is_empty()
        })
        .collect();
    (!kept.is_empty()).then(|| content.trim().to_string())
}

/// A reply that only acknowledges: the token (bare, bold or in backticks) with at most
/// [`ACK_SLACK_CHARS`] of other text.
pub fn is_ack(reply: &str) -> bool {
    let mut found = false;
    let mut rest = String::with_capacity(reply.len());
    let mut text = reply;
    while let Some(pos) = text.find(ACK_TOKEN) {
        let after = &text[pos + ACK_TOKEN.len()..];
        // `HEARTBEAT_OKAY` is another word.
        if after
            .chars()
            .next()
            .is_some_and(|c| c.is_alphanumeric() || c == '_')
        {
            rest.push_str(&text[..pos + ACK_TOKEN.len()]);
            text = after;
            continue;
        }
        found = true;
        rest.push_str(&text[..pos]);
        text = after;
    }
    rest.push_str(text);
    let other = rest
        .chars()
        .filter(|c| !c.is_whitespace() && !matches!(c, '*' | '`' | '_'))
        .count();
    found && other <= ACK_SLACK_CHARS
}

/// The turn's message: the file, and how to answer when nothing needs doing.
pub(crate) fn message(file: &str) -> String {
    format!(
        "Heartbeat: a periodic check-in. Follow the instructions in HEARTBEAT.md below; do not repeat work already done in this conversation. If nothing needs attention, reply with {ACK_TOKEN} alone.\n\n--- HEARTBEAT.md ---\n{file}"
    )
}

pub(crate) async fn read_file(workspace: &Path) -> Option<String> {
    tokio::fs::read_to_string(workspace.join("HEARTBEAT.md"))
        .await
        .ok()
}

impl CronBook {
    /// Makes the heartbeat jobs match the agents' settings: one per agent with a
    /// heartbeat (its next time kept while its settings stay the same), none for the
    /// others. Several instances may do this at once; they write the same rows.
    pub async fn sync_heartbeats(
        &self,
        agents: &[(String, Option<HeartbeatSettings>)],
    ) -> Result<(), CronError> {
        let now = self.clock().now_ms();
        // Heartbeats of agents no longer configured go.
        for job in self.store().jobs(None).await? {
            let is_heartbeat = super::definition(&job).is_ok_and(|d| d.heartbeat.is_some());
            if is_heartbeat && !agents.iter().any(|(id, _)| job.id == job_id(id)) {
                self.store().delete_job(&job.id).await?;
            }
        }
        for (agent_id, settings) in agents {
            let id = job_id(agent_id);
            let existing = self.store().job(&id).await?;
            let Some(hb) = settings else {
                if existing.is_some() {
                    self.store().delete_job(&id).await?;
                }
                continue;
            };
            let every_ms = hb.every.as_millis().min(i64::MAX as u128) as i64;
            let spec = HeartbeatSpec {
                active_hours: hb.active_hours.clone(),
                deliver_to_last: hb.deliver_to_last,
            };
            let same = existing.as_ref().is_some_and(|j| {
                super::definition(j).is_ok_and(|d| {
                    d.heartbeat.as_ref() == Some(&spec)
                        && d.schedule["everyMs"].as_i64() == Some(every_ms)
                })
            });
            if same {
                continue;
            }
            let schedule = Schedule::Every {
                every_ms,
                anchor_ms: now,
            };
            let definition = Definition {
                name: format!("heartbeat of {agent_id}"),
                schedule: serde_json::to_value(&schedule).unwrap_or(Value::Null),
                message: String::new(),
                deliver: Delivery::None,
                // A heartbeat missed while down is not worth a burst at start.
                catch_up: CatchUp::Skip,
                heartbeat: Some(spec),
            };
            let job = CronJob {
                id,
                agent_id: agent_id.clone(),
                owner: None,
                spec: serde_json::to_value(&definition).unwrap_or(Value::Null),
                enabled: true,
                next_run_at: schedule.next_after(now),
                created_at: existing.as_ref().map_or(now, |j| j.created_at),
                updated_at: existing.as_ref().map_or(now, |j| now.max(j.updated_at + 1)),
                lease: None,
            };
            self.store().put_job(&job).await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acknowledgements_are_recognised_in_their_usual_dresses() {
        for ack in [
            "HEARTBEAT_OK",
            "  HEARTBEAT_OK\n",
            "**HEARTBEAT_OK**",
            "`HEARTBEAT_OK`",
            "All quiet. HEARTBEAT_OK",
            "HEARTBEAT_OK — nothing new in the inbox since this morning.",
        ] {
            assert!(is_ack(ack), "{ack:?}");
        }
        let long = format!("HEARTBEAT_OK {}", "x".repeat(301));
        for not_ack in [
            "",
            "The build failed: fix the tests.",
            "HEARTBEAT_OKAY then",
            "heartbeat ok",
            long.as_str(),
        ] {
            assert!(!is_ack(not_ack), "{not_ack:?}");
        }
        assert!(is_ack(&format!("HEARTBEAT_OK {}", "x".repeat(300))));
    }

    #[test]
    fn active_hours_may_wrap_midnight_in_the_agents_zone() {
        // 2026-07-01 in Berlin is UTC+2.
        let at = |hh: i64, mm: i64| 1_782_864_000_000 + (hh * 60 + mm) * 60_000 - 2 * 3_600_000;
        let night = Some((22 * 60, 6 * 60, "Europe/Berlin".to_string()));
        assert_eq!(active_at(&night, at(23, 30)), Ok(true));
        assert_eq!(active_at(&night, at(2, 0)), Ok(true));
        assert_eq!(active_at(&night, at(5, 59)), Ok(true));
        assert_eq!(active_at(&night, at(6, 0)), Ok(false));
        assert_eq!(active_at(&night, at(12, 0)), Ok(false));
        assert_eq!(active_at(&night, at(22, 0)), Ok(true));
        let day = Some((8 * 60, 18 * 60, "Europe/Berlin".to_string()));
        assert_eq!(active_at(&day, at(7, 59)), Ok(false));
        assert_eq!(active_at(&day, at(8, 0)), Ok(true));
        assert_eq!(active_at(&day, at(18, 0)), Ok(false));
        assert_eq!(active_at(&None, at(3, 0)), Ok(true));
        let bad = Some((0, 60, "Nowhere/Land".to_string()));
        assert!(active_at(&bad, at(0, 30)).is_err());
    }

    #[test]
    fn an_empty_or_template_only_heartbeat_file_means_nothing_to_do() {
        assert!(meaningful("").is_none());
        assert!(
            meaningful("# Heartbeat\n\n## Tasks\n- \n- [ ]\n<!-- add tasks here -->\n").is_none()
        );
        assert!(meaningful("# Heartbeat\n- check the inbox\n").is_some());
        assert!(meaningful("<!-- a comment\nover lines -->\nwater the plants").is_some());
    }
}
