//! The deny patterns, grouped by category.
//!
//! Each pattern is one or more regexes that must ALL match (the `regex` crate has no
//! look-around, so "rm, a recursive flag, and a root-like target" is three regexes), minus
//! optional `unless` regexes. A pattern looks at one of:
//! - `Cmd`: each simple command, rendered `program arg … [op target]` (see `normalize`);
//! - `Line`: each command line with its separators (` | `, ` ; `, ` && `), for pipelines;
//! - `Raw`: each line's source with all whitespace removed (fork bombs, whose syntax the
//!   normaliser deliberately flattens);
//! - `Assign`: each `NAME=value` given to a command.
//!
//! All regexes are case-insensitive. Placeholders (`%A%`, `%SH%`, …) keep the table short.

use std::sync::LazyLock;

use regex::Regex;

use super::ExecCategory;
use ExecCategory::*;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scope {
    Cmd,
    Line,
    Raw,
    Assign,
}

pub(crate) struct Pattern {
    pub id: &'static str,
    pub category: ExecCategory,
    pub scope: Scope,
    all: Vec<Regex>,
    unless: Vec<Regex>,
}

impl Pattern {
    pub(crate) fn is_match(&self, text: &str) -> bool {
        self.all.iter().all(|r| r.is_match(text)) && !self.unless.iter().any(|r| r.is_match(text))
    }
}

/// Placeholders expanded in every regex below.
const PLACEHOLDERS: &[(&str, &str)] = &[
    // Start of an argument, or of a value after `=`, `@` or `:` (`of=/dev/sda`, `-d @file`).
    // Start of a word, optionally after an unmasked `name=`, `@` or `host:` prefix.
    ("%A%", r"(?:^|\s)(?:[^\s\x{E000}\x{E001}]*[=@:])?"),
    // Characters inside one word (masked quoted syntax excluded).
    ("%W%", r"[^\s\x{E000}\x{E001}]*"),
    // End of a word.
    ("%E%", r"(?:$|\s)"),
    // Start of a command inside a line.
    ("%C%", r"(?:^|[|;&(]\s*)"),
    (
        "%SH%",
        r"(?:sh|bash|rbash|dash|zsh|ksh|ash|mksh|yash|fish|csh|tcsh|busybox\s+sh)",
    ),
    (
        "%INTERP%",
        r"(?:python[0-9.]*|perl|ruby|node|nodejs|php|lua[0-9.]*)",
    ),
    (
        "%DL%",
        r"(?:curl|wget|fetch|aria2c|lwp-download|lwp-request|GET|http|https|xh)",
    ),
    (
        "%NET%",
        r"(?:nc|ncat|netcat|nc\.traditional|nc\.openbsd|socat|telnet|curl|wget|scp|sftp|ftp|rsync|ssh)",
    ),
    (
        "%DEV%",
        r"/dev/(?:sd[a-z]|hd[a-z]|vd[a-z]|xvd[a-z]|nvme\d|mmcblk\d|disk\d|dm-\d|md\d|loop\d|mapper/|root(?:$|\s)|mem(?:$|\s)|kmem|port(?:$|\s))",
    ),
    (
        "%ROOTISH%",
        r"(?:/|/\*|~[a-z0-9_.+-]*|~/\*|/[^/\s]*[*?\[][^/\s]*/?|/(?:bin|boot|dev|etc|home|lib|lib32|lib64|libx32|opt|root|sbin|srv|usr|var|sys|proc|snap|mnt|media|run|tmp)(?:/\*)?)(?:$|\s)",
    ),
    ("%SYS%", r"/(?:etc|boot|sys|proc)(?:/|$|\s)"),
    (
        "%SECRET%",
        r"(?:\.ssh/id_[a-z0-9_*?-]*(?:$|\s)|\.ssh/?(?:$|\s)|/etc/g?shadow|\.aws/credentials|\.aws/?(?:$|\s)|\.config/gcloud|\.azure/|\.kube/config|\.docker/config\.json|\.netrc|\.pgpass|\.git-credentials|\.gnupg|\.ferroclaw|/proc/[^/\s]+/environ|(?:^|/)\.env(?:\.[a-z0-9_]+)?(?:$|\s)|[a-z0-9_-]*\.pem(?:$|\s)|id_rsa)",
    ),
    ("%REDIR%", r"(?:^|\s)(?:>|>>|>\||<>|&>|&>>|>&)\s+"),
];

fn expand(re: &str) -> Regex {
    let mut s = re.to_string();
    for (k, v) in PLACEHOLDERS {
        s = s.replace(k, v);
    }
    // The table is static: an invalid regex is a programming error caught by the unit test.
    Regex::new(&format!("(?i){s}")).unwrap_or_else(|e| panic!("bad exec pattern {re}: {e}"))
}

fn p(category: ExecCategory, scope: Scope, id: &'static str, all: &[&str]) -> Pattern {
    Pattern {
        id,
        category,
        scope,
        all: all.iter().map(|r| expand(r)).collect(),
        unless: Vec::new(),
    }
}

fn unless(mut pat: Pattern, none: &[&str]) -> Pattern {
    pat.unless = none.iter().map(|r| expand(r)).collect();
    pat
}

use Scope::{Assign, Cmd, Line, Raw};

/// An argument whose value the guard cannot know, alone or followed by a root-like path
/// (`$d`, `"$d"/`, `${d%x}`, `$(cat f)`, xargs input), a destructive target in doubt.
const UNKNOWN_TARGET: &str = r"\s(?:\$\{[^}\s]*\}|\$[a-z_][a-z0-9_]*|\$\(\S*\))(?:%ROOTISH%|$|\s)";

pub(crate) static PATTERNS: LazyLock<Vec<Pattern>> = LazyLock::new(|| {
    let recursive = r"\s(?:-[a-z]*r[a-z]*|--recursive)(?:\s|$)";
    vec![
        // ---- fork bombs (first: their syntax confuses everything else) ----
        p(
            ForkBomb,
            Raw,
            "function that pipes into and backgrounds itself (:(){ :|:& };:)",
            &[r"\(\)\{[^}]*\|[^}]*&[^}]*\}"],
        ),
        p(
            ForkBomb,
            Raw,
            "function that backgrounds itself twice",
            &[r"\(\)\{[^}]*&[^}]*&[^}]*\}"],
        ),
        p(
            ForkBomb,
            Raw,
            "`function f { f | f & }` fork bomb",
            &[r"function[a-z0-9_:.]+(?:\(\))?\{[^}]*\|[^}]*&"],
        ),
        p(
            ForkBomb,
            Raw,
            "endless loop starting background jobs",
            &[r"while(?:true|:|1|\[1\]);?do[^;]*&(?:;)?done"],
        ),
        p(
            ForkBomb,
            Raw,
            "script re-running itself in the background ($0 & $0)",
            &[r"\$0[|&]\$0&?"],
        ),
        p(
            ForkBomb,
            Cmd,
            "perl fork loop",
            &[r"^perl\s", r"fork.*while|while.*fork"],
        ),
        p(
            ForkBomb,
            Cmd,
            "python os.fork() loop",
            &[r"^python[0-9.]*\s", r"os\.fork\s*\(", r"while|for\s"],
        ),
        p(
            ForkBomb,
            Cmd,
            "ruby fork loop",
            &[r"^ruby\s", r"loop.*fork|fork.*loop|while.*fork"],
        ),
        // ---- destructive file and disk operations ----
        p(
            Destructive,
            Cmd,
            "rm -r on /, ~ or a system directory",
            &[r"^rm\s", recursive, r"\s%ROOTISH%"],
        ),
        p(
            Destructive,
            Cmd,
            "rm --no-preserve-root",
            &[r"^rm\s.*--no-preserve-root"],
        ),
        p(
            Destructive,
            Cmd,
            "rm -r on a bare variable path ($DIR/ may be /)",
            &[
                r"^rm\s",
                recursive,
                r"\s\$\{?[a-z_][a-z0-9_]*\}?/\*?(?:$|\s)",
            ],
        ),
        // `read d; rm -rf "$d"`, `… | xargs rm -rf`: a target the guard cannot know may be
        // `/`. Values assigned in the same line are substituted before this is matched.
        p(
            Destructive,
            Cmd,
            "rm -r on a target the guard cannot know (variable, substitution, xargs input)",
            &[r"^rm\s", recursive, UNKNOWN_TARGET],
        ),
        p(
            Destructive,
            Cmd,
            "chown/chgrp/chmod -R/mv/shred on a target the guard cannot know",
            &[
                r"^(?:chown\s|chgrp\s|mv\s|shred\s|wipefs\s|chmod\s(?:.*\s)?(?:-[a-z]*r[a-z]*|--recursive)\s)",
                UNKNOWN_TARGET,
            ],
        ),
        p(
            Destructive,
            Cmd,
            "dd writing to a target the guard cannot know",
            &[r"^dd\s", r"\sof=(?:\$|\{\})"],
        ),
        p(
            Destructive,
            Cmd,
            "find deleting under a system directory or an unknown start point",
            &[
                r"^find\s(?:-[hlp]\s+)*(?:[^-\s]\S*\s+)*?(?:%ROOTISH%|\$[^/\s]*(?:%ROOTISH%|$|\s))",
                r"\s(?:-delete|-exec(?:dir)?\s+(?:rm|shred|unlink))(?:\s|$)",
            ],
        ),
        p(
            Destructive,
            Line,
            "cd / followed by rm -r",
            &[r"%C%cd\s+(?:/|~)\s*(?:;|&&|\|\|)\s*rm\s(?:.*\s)?-[a-z]*r"],
        ),
        p(
            Destructive,
            Cmd,
            "find on / or ~ deleting files",
            &[
                r"^find\s+(?:/|~)(?:\s|$)",
                r"\s(?:-delete|-exec\s+rm)(?:\s|$)",
            ],
        ),
        p(
            Destructive,
            Cmd,
            "mkfs (format a filesystem)",
            &[r"^mkfs(?:\.[a-z0-9]+)?(?:\s|$)"],
        ),
        p(
            Destructive,
            Cmd,
            "mke2fs / mkswap / wipefs",
            &[r"^(?:mke2fs|mkswap|wipefs|mkdosfs|mkntfs)(?:\s|$)"],
        ),
        p(
            Destructive,
            Cmd,
            "partition table editor",
            &[r"^(?:fdisk|sfdisk|cfdisk|gdisk|sgdisk|parted)(?:\s|$)"],
        ),
        p(
            Destructive,
            Cmd,
            "dd writing to a disk device",
            &[r"^dd\s", r"\sof=%DEV%"],
        ),
        p(
            Destructive,
            Cmd,
            "redirection into a disk device",
            &[r"%REDIR%%DEV%"],
        ),
        p(
            Destructive,
            Cmd,
            "copying onto a disk device",
            &[r"^(?:cp|mv|cat|tee|pv|install)\s", r"\s%DEV%"],
        ),
        p(
            Destructive,
            Cmd,
            "shred (irrecoverable deletion)",
            &[r"^shred(?:\s|$)"],
        ),
        p(
            Destructive,
            Cmd,
            "blkdiscard / secure erase",
            &[
                r"^(?:blkdiscard(?:\s|$)|hdparm\s.*--(?:security-erase|trim-sector|security-set-pass))",
            ],
        ),
        p(
            Destructive,
            Cmd,
            "volume or pool destruction",
            &[r"^(?:lvremove|vgremove|pvremove|zpool\s+destroy|zfs\s+destroy)(?:\s|$)"],
        ),
        p(
            Destructive,
            Cmd,
            "chmod on / or a system directory",
            &[r"^chmod\s", r"\s%ROOTISH%"],
        ),
        p(
            Destructive,
            Cmd,
            "chown/chgrp on / or a system directory",
            &[r"^(?:chown|chgrp)\s", r"\s%ROOTISH%"],
        ),
        p(
            Destructive,
            Cmd,
            "recursive chown/chgrp",
            &[r"^(?:chown|chgrp)\s", recursive],
        ),
        p(
            Destructive,
            Cmd,
            "mv of / , ~ or a system directory",
            &[r"^mv\s", r"\s%ROOTISH%"],
        ),
        p(
            Destructive,
            Cmd,
            "rsync --delete onto /",
            &[r"^rsync\s", r"--delete", r"\s/(?:$|\s)"],
        ),
        // ---- shutdown, reboot, killing the system ----
        p(
            Shutdown,
            Cmd,
            "shutdown / reboot / halt / poweroff",
            &[r"^(?:shutdown|reboot|halt|poweroff)(?:\s|$)"],
        ),
        p(
            Shutdown,
            Cmd,
            "init/telinit 0 or 6",
            &[r"^(?:init|telinit)\s+[06sS](?:\s|$)"],
        ),
        p(
            Shutdown,
            Cmd,
            "systemctl poweroff / reboot / halt / suspend",
            &[
                r"^systemctl\s+(?:.*\s)?(?:poweroff|reboot|halt|suspend|hibernate|hybrid-sleep|kexec|rescue|emergency|soft-reboot)(?:\s|$)",
            ],
        ),
        p(
            Shutdown,
            Cmd,
            "systemctl isolate to a stop target",
            &[
                r"^systemctl\s+(?:.*\s)?isolate\s+(?:reboot|poweroff|halt|rescue|emergency|runlevel[06])",
            ],
        ),
        p(
            Shutdown,
            Cmd,
            "loginctl poweroff / reboot",
            &[r"^loginctl\s+(?:poweroff|reboot|halt|suspend|hibernate)"],
        ),
        p(
            Shutdown,
            Cmd,
            "kill -1 / kill 1 (every process, or init)",
            &[r"^kill\s+(?:-\S+\s+)*(?:--\s+)?-?1(?:\s|$)"],
        ),
        p(
            Shutdown,
            Cmd,
            "killall5 / killing init, sshd or the gateway",
            &[
                r"^(?:killall5(?:\s|$)|(?:killall|pkill)\s(?:.*\s)?(?:systemd|init|sshd|ferroclaw)(?:\s|$))",
            ],
        ),
        p(
            Shutdown,
            Cmd,
            "killing the parent process (the gateway)",
            &[r"^(?:kill|pkill)\s.*\$\{?ppid\}?"],
        ),
        p(Shutdown, Cmd, "sysrq trigger", &[r"sysrq-trigger"]),
        // ---- download and run ----
        p(
            DownloadExec,
            Line,
            "download piped into a shell (curl | sh)",
            &[r"%C%%DL%\s[^;&]*\|\s*(?:sudo\s+)?%SH%(?:\s|$)"],
        ),
        p(
            DownloadExec,
            Line,
            "download piped into an interpreter (curl | python)",
            &[r"%C%%DL%\s[^;&]*\|\s*(?:sudo\s+)?%INTERP%(?:\s|$)"],
        ),
        p(
            DownloadExec,
            Line,
            "download sourced from stdin",
            &[r"%C%%DL%\s[^;&]*\|\s*(?:source|\.)(?:\s|$)"],
        ),
        p(
            DownloadExec,
            Cmd,
            "shell or source reading a download through <(…)",
            &[r"^(?:%SH%|%INTERP%|source|\.)\s(?:.*\s)?<\(%W%%DL%"],
        ),
        p(
            DownloadExec,
            Cmd,
            "download's output run as a command ($(curl …))",
            &[r"^\$\(%DL%"],
        ),
        p(
            DownloadExec,
            Cmd,
            "interpreter running downloaded code (python -c \"$(curl …)\")",
            &[r"^%INTERP%\s(?:.*\s)?-[a-z]*[cer]\s+\$\(%DL%"],
        ),
        p(
            DownloadExec,
            Cmd,
            "eval of a download",
            &[r"^eval\s.*\$\(%DL%"],
        ),
        p(
            DownloadExec,
            Line,
            "download, chmod +x and execute",
            &[r"%C%%DL%\s.*(?:;|&&)\s*chmod\s+(?:[ugoa]*\+)?[rw]*x\s.*(?:;|&&)\s*\S"],
        ),
        p(
            DownloadExec,
            Cmd,
            "PowerShell download-and-invoke",
            &[
                r"^(?:pwsh|powershell)(?:\.exe)?\s",
                r"(?:iex|invoke-expression|downloadstring)",
            ],
        ),
        // ---- reverse shells ----
        p(
            ReverseShell,
            Cmd,
            "netcat with -e/-c (spawns a shell)",
            &[
                r"^(?:nc|ncat|netcat)(?:\.\w+)?\s",
                r"\s(?:-[a-z]*[ec]|--exec|--sh-exec|--lua-exec)(?:\s|$)",
            ],
        ),
        p(
            ReverseShell,
            Cmd,
            "redirection to /dev/tcp or /dev/udp",
            &[r"(?:^|\s)(?:>|>>|<|>&|<&|&>|<>)\s+/dev/(?:tcp|udp)/"],
        ),
        p(
            ReverseShell,
            Cmd,
            "socat exec:/system:",
            &[r"^socat\s", r"(?:exec|system):"],
        ),
        p(
            ReverseShell,
            Cmd,
            "python socket connected to a shell",
            &[
                r"^python[0-9.]*\s",
                r"socket",
                r"(?:connect|subprocess|pty|dup2|spawn|os\.system)",
            ],
        ),
        p(
            ReverseShell,
            Cmd,
            "perl socket",
            &[r"^perl\s", r"socket|io::socket"],
        ),
        p(
            ReverseShell,
            Cmd,
            "php fsockopen / socket",
            &[
                r"^php\s",
                r"(?:fsockopen|pfsockopen|socket_create|stream_socket_client)",
            ],
        ),
        p(
            ReverseShell,
            Cmd,
            "ruby socket",
            &[r"^ruby\s", r"(?:tcpsocket|-rsocket|socket\.new)"],
        ),
        p(
            ReverseShell,
            Cmd,
            "node socket wired to a shell",
            &[
                r"^(?:node|nodejs)\s",
                r"(?:net\.socket|\.connect\s*\(|require\s*\x{E000}?\(?.net)",
                r"(?:child_process|spawn|/bin/(?:ba)?sh)",
            ],
        ),
        p(
            ReverseShell,
            Cmd,
            "lua socket",
            &[r"^lua[0-9.]*\s", r"socket"],
        ),
        p(
            ReverseShell,
            Cmd,
            "gawk /inet/tcp socket",
            &[r"/inet/(?:tcp|udp)/"],
        ),
        p(
            ReverseShell,
            Line,
            "named pipe wired to a network tool",
            &[
                r"%C%(?:mkfifo|mknod)\s",
                r"%C%(?:nc|ncat|netcat|telnet|socat|openssl)(?:\.\w+)?\s",
            ],
        ),
        p(
            ReverseShell,
            Line,
            "network input piped into a shell",
            &[r"%C%(?:nc|ncat|netcat|telnet|socat|openssl)(?:\.\w+)?\s[^;&]*\|\s*%SH%(?:\s|$)"],
        ),
        p(
            ReverseShell,
            Line,
            "interactive shell piped to a network tool",
            &[
                r"%C%%SH%\s+-i(?:\s|$)[^;&]*\|\s*(?:nc|ncat|netcat|telnet|socat|openssl)(?:\.\w+)?\s",
            ],
        ),
        p(
            ReverseShell,
            Cmd,
            "xterm displaying on a remote host",
            &[r"^xterm\s.*-display\s+\S+:\d"],
        ),
        // ---- eval / decode into a shell ----
        p(
            EvalDecode,
            Line,
            "base64-decoded text piped into a shell",
            &[
                r"%C%(?:base64|base32|basenc)\s(?:.*\s)?(?:-[a-z]*d|--decode)(?:\s|$)[^;&]*\|\s*(?:sudo\s+)?(?:%SH%|%INTERP%)(?:\s|$)",
            ],
        ),
        p(
            EvalDecode,
            Line,
            "xxd -r output piped into a shell",
            &[
                r"%C%xxd\s(?:.*\s)?(?:-[a-z]*r|-revert)(?:\s|$)[^;&]*\|\s*(?:sudo\s+)?(?:%SH%|%INTERP%)(?:\s|$)",
            ],
        ),
        p(
            EvalDecode,
            Line,
            "decoded or transformed text piped into a shell",
            &[
                r"%C%(?:openssl|uudecode|gunzip|zcat|bzcat|xzcat|rev|tr|od|printf|perl|python[0-9.]*)\s?[^;&]*\|\s*(?:sudo\s+)?%SH%(?:\s|$)",
            ],
        ),
        p(
            EvalDecode,
            Line,
            "escaped bytes piped into a shell",
            &[r"\\(?:x[0-9a-f]{2}|[0-7]{3})[^;&]*\|\s*%SH%(?:\s|$)"],
        ),
        p(
            EvalDecode,
            Cmd,
            "eval of command output",
            &[r"^eval\s(?:.*)?\$\("],
        ),
        p(
            EvalDecode,
            Cmd,
            "eval of decoded text",
            &[r"^eval\s", r"(?:base64|xxd|base32|\\x[0-9a-f]{2})"],
        ),
        p(
            EvalDecode,
            Cmd,
            "command name produced by a command substitution",
            &[r"^(?:\$\(|<\()"],
        ),
        // `a=r; b=m; $a$b -rf /`: the guard cannot know what a variable holds.
        p(
            EvalDecode,
            Cmd,
            "command name taken from a variable",
            &[r"^\$\{?[a-z_]"],
        ),
        p(
            EvalDecode,
            Cmd,
            "python exec/eval of decoded data",
            &[
                r"^python[0-9.]*\s",
                r"(?:exec|eval)\s*\(",
                r"(?:b64decode|base64|decode\s*\(|fromhex|\\x[0-9a-f]{2})",
            ],
        ),
        p(
            EvalDecode,
            Cmd,
            "perl eval of decoded data",
            &[
                r"^perl\s",
                r"eval",
                r"(?:decode_base64|base64|pack\s*\(|unpack)",
            ],
        ),
        p(
            EvalDecode,
            Cmd,
            "shell reading a script from a here-string of decoded text",
            &[r"^%SH%\s.*<<<\s+\S*(?:base64|xxd|\$\()"],
        ),
        p(
            EvalDecode,
            Line,
            "text piped into a shell interpreter",
            &[r"\|\s*(?:sudo\s+)?%SH%(?:\s+-[a-z]+)*(?:\s+--(?:\s+\S+)*)?\s*(?:$|[;&|)])"],
        ),
        // ---- exfiltration of sensitive files ----
        p(
            Exfiltration,
            Cmd,
            "SSH private key or ~/.ssh directory",
            &[r"%A%%W%\.ssh(?:/id_[a-z0-9_*?-]*|/?)(?:$|\s)"],
        ),
        p(
            Exfiltration,
            Cmd,
            "password hashes (/etc/shadow)",
            &[r"%A%/etc/(?:g?shadow|master\.passwd|security/opasswd)(?:-|$|\s)"],
        ),
        p(
            Exfiltration,
            Cmd,
            "cloud credentials (~/.aws, gcloud, azure, kube, docker)",
            &[
                r"%A%%W%(?:\.aws/(?:credentials|config)?|\.config/gcloud|\.azure|\.kube/config|\.docker/config\.json)(?:/|$|\s)",
            ],
        ),
        p(
            Exfiltration,
            Cmd,
            "credential stores (.netrc, .pgpass, .git-credentials, keyrings)",
            &[
                r"%A%%W%(?:\.netrc|\.pgpass|\.git-credentials|\.gnupg|\.password-store|\.local/share/keyrings)(?:/|$|\s)",
            ],
        ),
        p(
            Exfiltration,
            Cmd,
            "the gateway's own home (~/.ferroclaw)",
            &[r"%A%%W%\.ferroclaw(?:/|$|\s)"],
        ),
        p(
            Exfiltration,
            Cmd,
            "another process's environment (/proc/*/environ)",
            &[r"%A%/proc/[^/\s]+/(?:environ|mem)(?:$|\s)"],
        ),
        p(
            Exfiltration,
            Line,
            ".env or key file sent to a network tool",
            &[
                r"%A%%W%(?:\.env(?:\.[a-z0-9_]+)?|\.pem|\.key|credentials)(?:$|\s)",
                r"%C%%NET%\s",
            ],
        ),
        p(
            Exfiltration,
            Cmd,
            "curl uploading a secret file (-d @, --data-binary @, -F, -T)",
            &[
                r"^curl\s",
                r"\s(?:-d|--data[a-z-]*|-f|--form|-t|--upload-file)(?:\s+|=)\S*%SECRET%",
            ],
        ),
        p(
            Exfiltration,
            Cmd,
            "wget --post-file",
            &[r"^wget\s", r"--(?:post|body)-file"],
        ),
        p(
            Exfiltration,
            Cmd,
            "copying secrets to a remote host",
            &[
                r"^(?:scp|rsync|sftp|ftp|nc|ncat|netcat|socat)\s",
                r"%SECRET%",
            ],
        ),
        p(
            Exfiltration,
            Line,
            "environment dump sent to a network tool",
            &[
                r"%C%(?:env|printenv|set|export\s+-p|declare\s+-x)(?:\s[^|;&]*)?\|\s*[^;&]*\b%NET%\s",
            ],
        ),
        p(
            Exfiltration,
            Cmd,
            "raw disk or memory read (dd if=/dev/…)",
            &[r"^(?:dd|cat|strings|xxd|od)\s", r"(?:if=|\s)%DEV%"],
        ),
        // ---- privilege escalation ----
        p(
            PrivilegeEscalation,
            Cmd,
            "sudo",
            &[r"^(?:sudo|sudoedit)(?:\s|$)"],
        ),
        p(
            PrivilegeEscalation,
            Cmd,
            "su (switch user)",
            &[r"^su(?:\s|$)"],
        ),
        p(PrivilegeEscalation, Cmd, "doas", &[r"^doas(?:\s|$)"]),
        p(PrivilegeEscalation, Cmd, "pkexec", &[r"^pkexec(?:\s|$)"]),
        p(
            PrivilegeEscalation,
            Cmd,
            "runuser / setpriv / capsh",
            &[r"^(?:runuser|setpriv|capsh)(?:\s|$)"],
        ),
        p(
            PrivilegeEscalation,
            Cmd,
            "chmod setuid/setgid bit",
            &[
                r"^chmod\s",
                r"\s(?:[ugoa]*[+=][rwxXt]*s[rwxXt]*|[0-7]?[2-7][0-7]{3})(?:\s|$)",
            ],
        ),
        p(
            PrivilegeEscalation,
            Cmd,
            "setcap (file capabilities)",
            &[r"^setcap(?:\s|$)"],
        ),
        p(
            PrivilegeEscalation,
            Cmd,
            "chown to root",
            &[r"^chown\s", r"\sroot(?::|\s|$)"],
        ),
        p(
            PrivilegeEscalation,
            Cmd,
            "user or group account changes",
            &[
                r"^(?:useradd|usermod|userdel|adduser|deluser|groupadd|groupmod|groupdel|gpasswd|newgrp|chsh|chfn)(?:\s|$)",
            ],
        ),
        p(
            PrivilegeEscalation,
            Cmd,
            "password or sudoers editing",
            &[r"^(?:passwd|chpasswd|visudo|vipw|vigr)(?:\s|$)"],
        ),
        p(
            PrivilegeEscalation,
            Cmd,
            "privileged container or host mount",
            &[
                r"^(?:docker|podman|nerdctl)\s",
                r"(?:--privileged|(?:-v|--volume|--mount)[=\s]+(?:type=bind,\s*)?(?:source=)?/:|--pid[=\s]+host|--cap-add[=\s]+(?:all|sys_admin))",
            ],
        ),
        p(
            PrivilegeEscalation,
            Cmd,
            "nsenter / chroot / unshare",
            &[r"^(?:nsenter|chroot|unshare)(?:\s|$)"],
        ),
        p(
            PrivilegeEscalation,
            Cmd,
            "kernel module loading",
            &[r"^(?:insmod|rmmod|modprobe)(?:\s|$)"],
        ),
        p(
            PrivilegeEscalation,
            Assign,
            "LD_PRELOAD / LD_AUDIT injection",
            &[r"^(?:ld_preload|ld_audit)="],
        ),
        p(
            PrivilegeEscalation,
            Cmd,
            "exporting LD_PRELOAD",
            &[r"^(?:export|declare|typeset)\s.*\bld_(?:preload|audit)="],
        ),
        // ---- persistence ----
        // `crontab -l` only lists.
        unless(
            p(Persistence, Cmd, "crontab changes", &[r"^crontab(?:\s|$)"]),
            &[r"^crontab\s+(?:-u\s+\S+\s+)?-l(?:\s+[<>&].*)?$"],
        ),
        p(
            Persistence,
            Cmd,
            "cron directories",
            &[r"%A%/(?:etc/cron|var/spool/cron|etc/anacrontab)"],
        ),
        p(
            Persistence,
            Cmd,
            "at / batch scheduling",
            &[r"^(?:at|batch)(?:\s|$)"],
        ),
        p(
            Persistence,
            Cmd,
            "writing shell start-up files",
            &[
                r"(?:%REDIR%|^(?:tee|cp|mv|ln|install|sed)\s.*\s)(?:~|/root|/home/[^/\s]+)/\.(?:bashrc|bash_profile|bash_login|profile|zshrc|zprofile|zshenv|zlogin|config/fish/config\.fish)(?:$|\s)",
            ],
        ),
        p(
            Persistence,
            Cmd,
            "writing ssh authorized_keys",
            &[
                r"(?:%REDIR%|^(?:tee|cp|mv|ln|install|sed|echo|printf)\s.*)\S*\.ssh/authorized_keys2?(?:$|\s)",
                r"(?:>|^tee|^cp|^mv|^ln|^install|^sed)",
            ],
        ),
        p(
            Persistence,
            Cmd,
            "systemd unit installation",
            &[
                r"(?:%REDIR%|^(?:tee|cp|mv|ln|install)\s.*\s)\S*(?:/etc/systemd/|\.config/systemd/|/lib/systemd/system/)",
            ],
        ),
        p(
            Persistence,
            Cmd,
            "systemctl enable / edit / set-default",
            &[
                r"^systemctl\s+(?:.*\s)?(?:enable|reenable|link|preset|edit|set-default|daemon-reload)(?:\s|$)",
            ],
        ),
        p(
            Persistence,
            Cmd,
            "launchctl load",
            &[r"^launchctl\s+(?:load|bootstrap|submit|enable)(?:\s|$)"],
        ),
        // ---- anti-forensics ----
        p(
            AntiForensics,
            Cmd,
            "history clearing",
            &[r"^history\s+-[a-z]*[cdw]"],
        ),
        p(
            AntiForensics,
            Cmd,
            "disabling shell history",
            &[r"^(?:unset|export|declare|typeset)\s.*\bhist(?:file|size|filesize|control)\b"],
        ),
        p(
            AntiForensics,
            Assign,
            "HISTFILE/HISTSIZE override",
            &[r"^hist(?:file|size|filesize)="],
        ),
        p(
            AntiForensics,
            Cmd,
            "set +o history",
            &[r"^set\s+\+o\s+history"],
        ),
        p(
            AntiForensics,
            Cmd,
            "deleting or truncating history files or logs",
            &[
                r"(?:%REDIR%|^(?:rm|shred|truncate|unlink|ln|cp|mv)\s.*)%W%(?:_history|\.zhistory|/var/log/)",
            ],
        ),
        p(
            AntiForensics,
            Cmd,
            "journal vacuum / rotation",
            &[r"^journalctl\s.*--(?:vacuum|rotate|flush)"],
        ),
        // ---- writes to /etc, /boot, /sys, /proc ----
        p(
            SystemWrite,
            Cmd,
            "redirection into /etc, /boot, /sys or /proc",
            &[r"%REDIR%%SYS%"],
        ),
        p(
            SystemWrite,
            Cmd,
            "tee into /etc, /boot, /sys or /proc",
            &[r"^tee\s", r"\s%SYS%"],
        ),
        p(
            SystemWrite,
            Cmd,
            "copy, move or link into /etc, /boot, /sys or /proc",
            &[
                r"^(?:cp|mv|install|ln|rsync|dd)\s",
                r"(?:\s/(?:etc|boot|sys|proc)(?:/\S*)?$|\s(?:-t|--target-directory)[=\s]+%SYS%|\sof=%SYS%)",
            ],
        ),
        p(
            SystemWrite,
            Cmd,
            "in-place edit of a file in /etc, /boot, /sys or /proc",
            &[r"^(?:sed|perl|ruby)\s", r"\s-[a-z]*i", r"\s%SYS%"],
        ),
        p(
            SystemWrite,
            Cmd,
            "changing files in /etc, /boot, /sys or /proc",
            &[
                r"^(?:truncate|touch|rm|unlink|chmod|chown|chgrp|chattr|mkdir|rmdir|setfacl|mknod|mkfifo)\s",
                r"\s%SYS%",
            ],
        ),
        p(
            SystemWrite,
            Cmd,
            "sysctl write",
            &[r"^sysctl\s", r"(?:\s-w|--write|\s-p|--load|\s\S+=\S*)"],
        ),
        p(
            SystemWrite,
            Cmd,
            "mount / umount / swapoff",
            &[r"^(?:mount|umount|swapoff|swapon)\s+\S"],
        ),
        p(
            SystemWrite,
            Cmd,
            "firewall changes",
            &[r"^(?:iptables|ip6tables|nft|ufw|firewall-cmd)\s+\S"],
        ),
        p(
            SystemWrite,
            Cmd,
            "stopping or disabling system services",
            &[r"^(?:systemctl\s+(?:.*\s)?(?:stop|disable|mask|kill)|service\s+\S+\s+stop)(?:\s|$)"],
        ),
        p(
            SystemWrite,
            Cmd,
            "kernel or bootloader changes",
            &[r"^(?:grub-install|update-grub|grub2?-mkconfig|efibootmgr|kexec)(?:\s|$)"],
        ),
    ]
});

#[cfg(test)]
mod tests {
    #[test]
    fn table_compiles_and_is_large_enough() {
        let n = super::PATTERNS.len();
        assert!(n >= 80, "only {n} patterns");
        let mut ids = std::collections::HashSet::new();
        for p in super::PATTERNS.iter() {
            assert!(ids.insert(p.id), "duplicate id {}", p.id);
        }
    }
}
