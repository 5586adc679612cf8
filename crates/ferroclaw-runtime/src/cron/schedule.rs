//! When a job runs: once (`at`), at a fixed interval (`every`), or on a 5-field cron
//! expression in a time zone (`cron`), evaluated by `croner` in that zone so a daily
//! 09:00 stays 09:00 local across daylight-saving changes (a time skipped by the change
//! runs at the first instant after it; a repeated hour runs once).

use std::str::FromStr;

use chrono::TimeZone;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The shortest interval an `every` job may have.
pub const MIN_EVERY_MS: i64 = 1_000;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum Schedule {
    #[serde(rename_all = "camelCase")]
    At { at_ms: i64 },
    #[serde(rename_all = "camelCase")]
    Every { every_ms: i64, anchor_ms: i64 },
    #[serde(rename_all = "camelCase")]
    Cron { expr: String, tz: String },
}

/// What clients send: `{kind:"at", atMs | at:"2026-11-25T09:00:00+01:00"}`,
/// `{kind:"every", everyMs | every:"15m", anchorMs?}`, `{kind:"cron", expr, tz?}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawSchedule {
    kind: String,
    at_ms: Option<i64>,
    at: Option<String>,
    every_ms: Option<i64>,
    every: Option<String>,
    anchor_ms: Option<i64>,
    expr: Option<String>,
    tz: Option<String>,
}

impl Schedule {
    /// Parses and checks a schedule from its JSON; `now` anchors an `every` job that
    /// names no anchor. Errors say what is wrong in words a client can act on.
    pub fn from_json(v: &Value, now: i64) -> Result<Schedule, String> {
        let raw: RawSchedule =
            serde_json::from_value(v.clone()).map_err(|e| format!("schedule: {e}"))?;
        match raw.kind.as_str() {
            "at" => {
                let at_ms = match (raw.at_ms, raw.at.as_deref()) {
                    (Some(ms), None) => ms,
                    (None, Some(text)) => chrono::DateTime::parse_from_rfc3339(text)
                        .map_err(|e| format!("schedule.at `{text}` is not an RFC 3339 time ({e})"))?
                        .timestamp_millis(),
                    _ => return Err("schedule of kind `at` needs `atMs` or `at`".into()),
                };
                Ok(Schedule::At { at_ms })
            }
            "every" => {
                let every_ms = match (raw.every_ms, raw.every.as_deref()) {
                    (Some(ms), None) => ms,
                    (None, Some(text)) => humantime::parse_duration(text)
                        .map_err(|e| format!("schedule.every `{text}`: {e}"))?
                        .as_millis()
                        .min(i64::MAX as u128) as i64,
                    _ => return Err("schedule of kind `every` needs `everyMs` or `every`".into()),
                };
                if every_ms < MIN_EVERY_MS {
                    return Err(format!(
                        "schedule.every must be at least {} s",
                        MIN_EVERY_MS / 1000
                    ));
                }
                Ok(Schedule::Every {
                    every_ms,
                    anchor_ms: raw.anchor_ms.unwrap_or(now),
                })
            }
            "cron" => {
                let expr = raw
                    .expr
                    .ok_or("schedule of kind `cron` needs `expr`")?
                    .trim()
                    .to_string();
                if expr.split_whitespace().count() != 5 {
                    return Err(format!(
                        "schedule.expr `{expr}` must have 5 fields (minute hour day-of-month month day-of-week)"
                    ));
                }
                parse_cron(&expr)?;
                let tz = raw.tz.unwrap_or_else(|| "UTC".into());
                parse_tz(&tz)?;
                Ok(Schedule::Cron { expr, tz })
            }
            other => Err(format!(
                "schedule.kind `{other}` is not one of at, every, cron"
            )),
        }
    }

    /// The first run strictly after `after` (epoch ms); `None` when there is none (a
    /// one-time job whose time has passed, an expression that never matches again).
    pub fn next_after(&self, after: i64) -> Option<i64> {
        match self {
            Schedule::At { at_ms } => (*at_ms > after).then_some(*at_ms),
            Schedule::Every {
                every_ms,
                anchor_ms,
            } => {
                if after < *anchor_ms {
                    return Some(*anchor_ms);
                }
                let periods = (after - anchor_ms) / every_ms + 1;
                anchor_ms.checked_add(periods.checked_mul(*every_ms)?)
            }
            Schedule::Cron { expr, tz } => {
                let cron = parse_cron(expr).ok()?;
                let tz = parse_tz(tz).ok()?;
                let start = tz.timestamp_millis_opt(after).single()?;
                cron.find_next_occurrence(&start, false)
                    .ok()
                    .map(|t| t.timestamp_millis())
            }
        }
    }

    /// When the job is first due, created at `now`: an `at` time in the past is due at
    /// once (the client asked for it), an interval one period from its anchor (now
    /// unless given), a cron expression at its next match.
    pub fn first_run(&self, now: i64) -> Option<i64> {
        match self {
            Schedule::At { at_ms } => Some(*at_ms),
            Schedule::Every { anchor_ms, .. } if *anchor_ms > now => Some(*anchor_ms),
            _ => self.next_after(now),
        }
    }

    pub fn is_one_time(&self) -> bool {
        matches!(self, Schedule::At { .. })
    }
}

fn parse_cron(expr: &str) -> Result<croner::Cron, String> {
    croner::Cron::from_str(expr).map_err(|e| format!("schedule.expr `{expr}`: {e}"))
}

fn parse_tz(tz: &str) -> Result<chrono_tz::Tz, String> {
    tz.parse::<chrono_tz::Tz>()
        .map_err(|_| format!("schedule.tz `{tz}` is not an IANA time zone (e.g. Europe/Berlin)"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ms(rfc3339: &str) -> i64 {
        chrono::DateTime::parse_from_rfc3339(rfc3339)
            .map(|t| t.timestamp_millis())
            .unwrap_or_else(|e| panic!("{rfc3339}: {e}"))
    }

    fn parse(v: Value) -> Schedule {
        Schedule::from_json(&v, 0).unwrap_or_else(|e| panic!("{v}: {e}"))
    }

    #[test]
    fn each_kind_finds_its_next_time() {
        let at = parse(json!({"kind": "at", "at": "2026-03-01T10:00:00Z"}));
        assert_eq!(
            at.next_after(ms("2026-03-01T09:59:59Z")),
            Some(ms("2026-03-01T10:00:00Z"))
        );
        assert_eq!(at.next_after(ms("2026-03-01T10:00:00Z")), None);
        assert!(at.is_one_time());

        let every = Schedule::from_json(&json!({"kind": "every", "every": "15m"}), 1_000)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(every.next_after(1_000), Some(1_000 + 900_000));
        assert_eq!(every.next_after(1_000 + 900_000), Some(1_000 + 1_800_000));
        // Hours late: the next slot on the grid, not a burst of the missed ones.
        assert_eq!(
            every.next_after(1_000 + 10 * 900_000 + 5),
            Some(1_000 + 11 * 900_000)
        );

        let cron = parse(json!({"kind": "cron", "expr": "30 9 * * 1-5"}));
        // Friday 09:30 UTC, then Monday.
        assert_eq!(
            cron.next_after(ms("2026-11-27T09:00:00Z")),
            Some(ms("2026-11-27T09:30:00Z"))
        );
        assert_eq!(
            cron.next_after(ms("2026-11-27T09:30:00Z")),
            Some(ms("2026-11-30T09:30:00Z"))
        );
    }

    #[test]
    fn a_daily_job_keeps_its_local_time_across_daylight_saving_changes() {
        let daily = parse(json!({"kind": "cron", "expr": "0 9 * * *", "tz": "Europe/Berlin"}));
        // Spring forward in Berlin: 2026-03-29 02:00 CET -> 03:00 CEST.
        assert_eq!(
            daily.next_after(ms("2026-03-28T09:00:00+01:00")),
            Some(ms("2026-03-29T09:00:00+02:00"))
        );
        // Fall back: 2026-10-25 03:00 CEST -> 02:00 CET.
        assert_eq!(
            daily.next_after(ms("2026-10-24T09:00:00+02:00")),
            Some(ms("2026-10-25T09:00:00+01:00"))
        );
        // 02:30 does not exist on 2026-03-29: it runs at the first instant after the gap.
        let skipped = parse(json!({"kind": "cron", "expr": "30 2 * * *", "tz": "Europe/Berlin"}));
        assert_eq!(
            skipped.next_after(ms("2026-03-28T12:00:00+01:00")),
            Some(ms("2026-03-29T03:00:00+02:00"))
        );
        assert_eq!(
            skipped.next_after(ms("2026-03-29T03:00:00+02:00")),
            Some(ms("2026-03-30T02:30:00+02:00"))
        );
        // 02:30 happens twice on 2026-10-25: it runs once.
        let first = skipped
            .next_after(ms("2026-10-24T12:00:00+02:00"))
            .unwrap_or_default();
        assert_eq!(first, ms("2026-10-25T02:30:00+02:00"));
        assert_eq!(
            skipped.next_after(first),
            Some(ms("2026-10-26T02:30:00+01:00"))
        );
        // An hourly job does not lose or repeat hours in UTC terms.
        let hourly = parse(json!({"kind": "cron", "expr": "0 * * * *", "tz": "Europe/Berlin"}));
        let mut t = ms("2026-10-25T00:30:00+02:00");
        let mut hours = Vec::new();
        for _ in 0..4 {
            t = hourly.next_after(t).unwrap_or_default();
            hours.push(t);
        }
        for pair in hours.windows(2) {
            assert!(pair[1] - pair[0] <= 3_600_000, "{hours:?}");
        }
    }

    #[test]
    fn bad_schedules_are_refused_with_the_reason() {
        let err = |v: Value| Schedule::from_json(&v, 0).err().unwrap_or_default();
        assert!(err(json!({"kind": "cron", "expr": "61 * * * *"})).contains("schedule.expr"));
        assert!(err(json!({"kind": "cron", "expr": "0 0 * * * *"})).contains("5 fields"));
        assert!(
            err(json!({"kind": "cron", "expr": "0 9 * * *", "tz": "Mars/Olympus"}))
                .contains("IANA time zone")
        );
        assert!(err(json!({"kind": "every", "everyMs": 10})).contains("at least"));
        assert!(err(json!({"kind": "every", "every": "soon"})).contains("schedule.every"));
        assert!(err(json!({"kind": "at", "at": "tomorrow"})).contains("RFC 3339"));
        assert!(err(json!({"kind": "at"})).contains("needs `atMs` or `at`"));
        assert!(err(json!({"kind": "weekly"})).contains("not one of"));
        assert!(err(json!({"kind": "at", "atMs": 5, "when": 1})).contains("unknown field"));
    }
}
