//! Every WebSocket method, once: its name on the wire, the role it needs, and the
//! handler it reaches (`methods::dispatch` matches on [`Method`] exhaustively, so a
//! method in this table without a handler does not compile). The `hello-ok` list and
//! the role check are read from here too.

use crate::auth::Role;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Health,
    Status,
    ModelsList,
    AgentsList,
    Agent,
    AgentsCreate,
    AgentsUpdate,
    AgentsDelete,
    AgentsFilesList,
    AgentsFilesGet,
    AgentsFilesSet,
    SessionsList,
    SessionsPreview,
    SessionsSubscribe,
    SessionsUnsubscribe,
    IntegrityStatus,
    ChatSend,
    ChatHistory,
    ChatAbort,
    ChatInject,
    SessionsPatch,
    SessionsDelete,
    SessionsReset,
    ExecApprovalList,
    ExecApprovalApprove,
    ExecApprovalDeny,
    IntegrityScan,
    McpStatus,
    CronList,
    CronStatus,
    CronRuns,
    CronCreate,
    CronUpdate,
    CronDelete,
    CronToggle,
    CronRun,
    ChannelsList,
    ChannelsStatus,
    ChannelsToggle,
    Send,
    DevicePairList,
    DevicePairApprove,
    DevicePairRevoke,
    UsageGet,
    UsageSummary,
    ProvidersStatus,
    ConfigGet,
    DevicesList,
    DevicesRevoke,
}

/// (wire name, role needed, handler).
pub const METHODS: &[(&str, Role, Method)] = &[
    ("health", Role::Viewer, Method::Health),
    ("status", Role::Viewer, Method::Status),
    ("models.list", Role::Viewer, Method::ModelsList),
    ("agents.list", Role::Viewer, Method::AgentsList),
    ("agent", Role::Viewer, Method::Agent),
    // Users' agents: the runtime decides what each user may do with which agent.
    ("agents.create", Role::Operator, Method::AgentsCreate),
    ("agents.update", Role::Operator, Method::AgentsUpdate),
    ("agents.delete", Role::Operator, Method::AgentsDelete),
    ("agents.files.list", Role::Operator, Method::AgentsFilesList),
    ("agents.files.get", Role::Operator, Method::AgentsFilesGet),
    ("agents.files.set", Role::Operator, Method::AgentsFilesSet),
    ("sessions.list", Role::Viewer, Method::SessionsList),
    ("mcp.status", Role::Viewer, Method::McpStatus),
    // Scheduled jobs: a user sees and changes their own, the administrator all.
    ("cron.list", Role::Viewer, Method::CronList),
    ("cron.status", Role::Viewer, Method::CronStatus),
    ("cron.runs", Role::Viewer, Method::CronRuns),
    ("cron.create", Role::Operator, Method::CronCreate),
    ("cron.update", Role::Operator, Method::CronUpdate),
    ("cron.delete", Role::Operator, Method::CronDelete),
    ("cron.toggle", Role::Operator, Method::CronToggle),
    ("cron.run", Role::Operator, Method::CronRun),
    // Chat channels; who may talk to them is the administrator's decision.
    ("channels.list", Role::Viewer, Method::ChannelsList),
    ("channels.status", Role::Viewer, Method::ChannelsStatus),
    ("channels.toggle", Role::Admin, Method::ChannelsToggle),
    ("send", Role::Operator, Method::Send),
    ("device.pair.list", Role::Admin, Method::DevicePairList),
    (
        "device.pair.approve",
        Role::Admin,
        Method::DevicePairApprove,
    ),
    ("device.pair.revoke", Role::Admin, Method::DevicePairRevoke),
    ("sessions.preview", Role::Viewer, Method::SessionsPreview),
    ("usage.get", Role::Viewer, Method::UsageGet),
    ("usage.summary", Role::Viewer, Method::UsageSummary),
    ("providers.status", Role::Viewer, Method::ProvidersStatus),
    // The whole configuration, masked: the operator's own view.
    ("config.get", Role::Admin, Method::ConfigGet),
    // Devices paired through protocol 4 connects.
    ("devices.list", Role::Admin, Method::DevicesList),
    ("devices.revoke", Role::Admin, Method::DevicesRevoke),
    ("integrity.status", Role::Viewer, Method::IntegrityStatus),
    ("chat.send", Role::Operator, Method::ChatSend),
    ("chat.history", Role::Operator, Method::ChatHistory),
    // The events of a session's runs, wherever they execute.
    (
        "sessions.subscribe",
        Role::Operator,
        Method::SessionsSubscribe,
    ),
    (
        "sessions.unsubscribe",
        Role::Operator,
        Method::SessionsUnsubscribe,
    ),
    ("chat.abort", Role::Operator, Method::ChatAbort),
    ("chat.inject", Role::Operator, Method::ChatInject),
    ("sessions.patch", Role::Operator, Method::SessionsPatch),
    ("sessions.delete", Role::Operator, Method::SessionsDelete),
    ("sessions.reset", Role::Operator, Method::SessionsReset),
    (
        "exec.approval.list",
        Role::Operator,
        Method::ExecApprovalList,
    ),
    (
        "exec.approval.approve",
        Role::Operator,
        Method::ExecApprovalApprove,
    ),
    (
        "exec.approval.deny",
        Role::Operator,
        Method::ExecApprovalDeny,
    ),
    // Rewrites transcripts on disk.
    ("integrity.scan", Role::Admin, Method::IntegrityScan),
];

/// The method a wire name names, and the role it needs.
pub fn lookup(name: &str) -> Option<(Method, Role)> {
    METHODS
        .iter()
        .find(|(n, _, _)| *n == name)
        .map(|(_, role, m)| (*m, *role))
}

/// Every method name, as advertised in `hello-ok`.
pub fn names() -> Vec<&'static str> {
    METHODS.iter().map(|(n, _, _)| *n).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_and_names() {
        let role = |n| lookup(n).map(|(_, r)| r);
        assert_eq!(role("sessions.preview"), Some(Role::Viewer));
        assert_eq!(role("chat.send"), Some(Role::Operator));
        assert_eq!(role("no.such"), None);
        assert_eq!(role("integrity.status"), Some(Role::Viewer));
        assert_eq!(role("exec.approval.approve"), Some(Role::Operator));
        assert_eq!(role("integrity.scan"), Some(Role::Admin));
        let names = names();
        let unique: std::collections::BTreeSet<_> = names.iter().collect();
        assert_eq!(unique.len(), names.len(), "each method once");
    }
}
