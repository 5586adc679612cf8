//! Turns a shell command into the normalised form the deny patterns are matched on.
//!
//! This is not a shell: it is a conservative reader that undoes the usual ways of hiding a
//! command from a text match. Quotes and backslashes are removed (`r''m`, `r\m`, `"rm"` all
//! read `rm`), `$IFS` splits words, `$'\x72'` is decoded, `{rm,-rf,/}` brace lists are
//! expanded, program paths are reduced to their name (`/bin/rm` → `rm`) and lowercased,
//! wrappers (`env`, `command`, `nohup`, `xargs`, `busybox`, …) are looked through, and code
//! handed to another shell (`sh -c '…'`, `eval`, `$(…)`, backticks, `<(…)`, `find -exec`) is
//! read again as a command line of its own, recursively.
//!
//! Every command line found this way becomes a [`LineView`]; each simple command in it
//! (split on `;`, `&&`, `||`, `|`, `&`, newlines, parentheses) becomes a [`CommandView`]
//! whose `text` is `program arg … [redirections]`, single-spaced. Characters that were
//! quoted or escaped and would otherwise look like syntax (whitespace, `|;&<>`) are replaced
//! by private-use characters in the rendered text, so `echo "curl x | sh"` never looks like
//! a pipe into a shell while `rm -rf "/"` still reads `rm -rf /`.
//!
//! Beyond single commands, the reader follows what a line sets up for later in the same
//! line: variables (`d=/usr; rm -rf $d` reads `rm -rf /usr`; a value it cannot know stays
//! `$d`, which the patterns treat as a destructive target in doubt), `${x:-$(…)}` and
//! `$((…))` contents, aliases and functions (expanded where called, with their arguments as
//! `$1…`), here-documents and files written by redirections (read when a shell or an
//! interpreter runs them), the arguments xargs, find -exec and wrappers pass on, and
//! per-program options that name a command (git, tar, rsync, ssh, sed `e`). What a regex on
//! the rendering cannot express is reported as a [`Finding`]; `FindingScope::Allowlist`
//! findings (an expansion the reader does not understand, inline code with dangerous calls,
//! a file written then run) refuse only in allowlist mode.

/// Stands for a quoted whitespace character inside one word.
pub(crate) const SP: char = '\u{E000}';
/// Stands for a quoted `|`, `;`, `&`, `<` or `>` inside one word.
pub(crate) const META: char = '\u{E001}';

/// Deeper nesting than this is refused: no legitimate command needs it, and it bounds the work.
const MAX_DEPTH: usize = 8;

use std::collections::{HashMap, HashSet};
use std::sync::LazyLock;

use regex::Regex;

use super::ExecCategory;

/// Characters the reader lexes for one command, expansions included: bounds the work
/// when values, aliases or functions are expanded many times.
pub(crate) const MAX_WORK: usize = 1_000_000;

/// Commands longer than this are refused rather than analysed (bounded work per call).
pub(crate) const MAX_COMMAND_CHARS: usize = 100_000;

const SHELLS: &[&str] = &[
    "sh", "bash", "dash", "zsh", "ksh", "ash", "mksh", "fish", "csh", "tcsh", "rbash", "yash",
];

#[derive(Debug, Clone, Default)]
pub(crate) struct Analysis {
    /// The top-level command line first, then every nested one.
    pub lines: Vec<LineView>,
    /// Nesting went deeper than [`MAX_DEPTH`].
    pub too_deep: bool,
    /// Expanding variables, aliases and functions read more than [`MAX_WORK`] characters.
    pub too_large: bool,
    /// Decisions the reader takes itself, where a regex on the rendered text cannot see the
    /// danger (git options, inline code, files written then run).
    pub findings: Vec<Finding>,
}

/// When a [`Finding`] refuses the command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FindingScope {
    /// In `deny` and `allowlist` mode.
    Always,
    /// Only in `allowlist` mode, where anything the guard cannot vouch for is refused.
    Allowlist,
}

#[derive(Debug, Clone)]
pub(crate) struct Finding {
    pub scope: FindingScope,
    pub category: ExecCategory,
    pub rule: &'static str,
    pub message: String,
}

#[derive(Debug, Clone)]
pub(crate) struct LineView {
    /// The source text of this line, as it would be parsed by a shell.
    pub raw: String,
    /// Commands rendered and joined with their separators (` | `, ` ; `, ` && ` …).
    pub text: String,
    pub commands: Vec<CommandView>,
}

#[derive(Debug, Clone)]
pub(crate) struct CommandView {
    /// Lowercased base name of the program after unwrapping (`""` for a bare redirection).
    pub program: String,
    /// `program arg … [op target …]`, single-spaced.
    pub text: String,
    /// Leading `NAME=value` assignments (including those given to `env`).
    pub assigns: Vec<String>,
    /// The program is a function or alias defined in the analysed text: its body is
    /// analysed where it is called, the name itself runs nothing.
    pub local: bool,
}

pub(crate) fn analyze(command: &str) -> Analysis {
    let mut a = Analyzer::default();
    a.line(command, 0);
    // `line` pushes nested lines before their parent; present the top level first.
    a.out.lines.reverse();
    a.out
}

#[derive(Default)]
struct Analyzer {
    out: Analysis,
    /// Every value each variable is given anywhere in the analysed text (see `collect_vars`).
    vars: HashMap<String, Vec<String>>,
    /// The variable collection pass: lex only, recurse into nothing, record no finding.
    shallow: bool,
    aliases: HashMap<String, String>,
    /// Function name → body source.
    functions: HashMap<String, String>,
    /// Functions and aliases being expanded (a recursive one is expanded once).
    expanding: Vec<String>,
    /// Positional parameters of the code being read (`sh -c '…' a b`, a function call).
    positional: Vec<Vec<String>>,
    /// Files written by redirections in the analysed text: path → content when known.
    written: HashMap<String, Option<String>>,
    /// What the previous command of a pipeline writes, when it is literal text.
    pipe_in: Option<String>,
    last_stdout: Option<String>,
    /// Files among `written` that a download tool wrote.
    downloaded: HashSet<String>,
    /// `<(…)` as written → what it outputs, when that is literal text.
    procsub: HashMap<String, Option<String>>,
    /// Positional parameters set by `set -- …` at the top level.
    set_args: Option<Vec<String>>,
    /// Characters lexed so far (see [`MAX_WORK`]).
    work: usize,
}

#[derive(Debug, Clone, Default)]
struct Word {
    /// What the shell would pass as the argument (quotes removed, escapes applied).
    value: String,
    /// `value` with quoted syntax characters masked (see [`SP`], [`META`]).
    render: String,
    /// Some part of the word was quoted or escaped (brace expansion then does not apply).
    quoted: bool,
    /// A variable the reader resolved was expanded into this word.
    from_var: bool,
}

impl Word {
    fn push(&mut self, c: char, quoted: bool) {
        self.value.push(c);
        self.render.push(mask(c, quoted));
        self.quoted |= quoted;
    }
}

fn mask(c: char, quoted: bool) -> char {
    if !quoted {
        c
    } else if c.is_whitespace() {
        SP
    } else if matches!(c, '|' | ';' | '&' | '<' | '>') {
        META
    } else {
        c
    }
}

/// Masks a nested rendering so that it stays one word of the outer line.
fn mask_all(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            c if c.is_whitespace() => SP,
            '|' | ';' | '&' | '<' | '>' => META,
            c => c,
        })
        .collect()
}

#[derive(Debug, Clone)]
enum Tok {
    Word(Word),
    Sep(&'static str),
    Redir(&'static str),
}

impl Analyzer {
    /// Analyses code run with the positional parameters `args` (`sh -c '…' _ a`, `f a`).
    fn line_with_args(&mut self, src: &str, depth: usize, args: Vec<String>) -> String {
        self.positional.push(args);
        let r = self.line(src, depth);
        self.positional.pop();
        r
    }

    fn finding(
        &mut self,
        scope: FindingScope,
        category: ExecCategory,
        rule: &'static str,
        message: String,
    ) {
        if !self.shallow {
            self.out.findings.push(Finding {
                scope,
                category,
                rule,
                message,
            });
        }
    }

    fn unparsed(&mut self, what: &str) {
        self.finding(
            FindingScope::Allowlist,
            ExecCategory::Obfuscation,
            "expansion the guard does not read",
            format!("{what}: the guard cannot tell what it runs, and allowlist mode refuses it"),
        );
    }

    /// Records the values given to variables anywhere in `src` (`d=/usr`, `export d=…`,
    /// `for d in …`), so that `rm -rf $d` reads `rm -rf /usr`. A variable given several
    /// values stands for all of them. Chains (`a=/; b=$a`) resolve over a few passes.
    fn collect_vars(&mut self, src: &str, depth: usize) {
        let saved_findings = self.out.findings.len();
        for _ in 0..3 {
            self.shallow = true;
            let toks = self.lex(src, depth);
            self.shallow = false;
            let before = self.vars.clone();
            let mut seg: Vec<&Word> = Vec::new();
            let mut segs: Vec<Vec<&Word>> = Vec::new();
            let mut prev_redir = false;
            for t in &toks {
                match t {
                    Tok::Word(w) if !prev_redir => seg.push(w),
                    Tok::Sep(_) => segs.push(std::mem::take(&mut seg)),
                    _ => {}
                }
                prev_redir = matches!(t, Tok::Redir(_));
            }
            segs.push(seg);
            for seg in segs {
                let mut k = 0;
                let mut decl = false;
                while k < seg.len() {
                    let v = seg[k].value.as_str();
                    if k == 0 && !seg[k].quoted && v == "set" {
                        let args: Vec<String> = seg
                            .iter()
                            .skip(1)
                            .skip_while(|w| w.value.starts_with(['-', '+']) && w.value != "--")
                            .skip_while(|w| w.value == "--")
                            .map(|w| w.value.clone())
                            .collect();
                        if !args.is_empty() || seg.iter().any(|w| w.value == "--") {
                            self.set_args = Some(args);
                        }
                        break;
                    }
                    if k == 0 && !seg[k].quoted && v == "for" {
                        if let Some(name) = seg.get(1).map(|w| w.value.clone()) {
                            let vals: Vec<String> = seg
                                .iter()
                                .skip(3)
                                .take_while(|w| w.value != "do" || w.quoted)
                                .map(|w| w.value.clone())
                                .collect();
                            for v in vals {
                                self.add_var(&name, v);
                            }
                        }
                        break;
                    }
                    if is_assignment(v) {
                        if let Some((name, value)) = v.split_once('=') {
                            let name = name.trim_end_matches('+').to_string();
                            self.add_var(&name, value.to_string());
                        }
                    } else if matches!(v, "export" | "declare" | "typeset" | "local" | "readonly")
                        || (decl && v.starts_with('-'))
                    {
                        decl = true;
                    } else if !decl {
                        break;
                    }
                    k += 1;
                }
            }
            if self.vars == before {
                break;
            }
        }
        self.out.findings.truncate(saved_findings);
    }

    fn add_var(&mut self, name: &str, value: String) {
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return;
        }
        let vals = self.vars.entry(name.to_string()).or_default();
        if !vals.contains(&value) && vals.len() < 32 {
            vals.push(value);
        }
    }

    /// Analyses one command line (recursively) and returns its rendered text.
    fn line(&mut self, src: &str, depth: usize) -> String {
        if depth > MAX_DEPTH {
            self.out.too_deep = true;
            return String::new();
        }
        if self.shallow {
            return String::new();
        }
        self.collect_vars(src, depth);
        for (name, body) in find_functions(src) {
            self.functions.insert(name, body);
        }
        let toks = self.lex(src, depth);
        let mut text = String::new();
        let mut commands = Vec::new();
        let mut seg: Vec<Tok> = Vec::new();
        let mut flush = |this: &mut Self, seg: &mut Vec<Tok>, text: &mut String| {
            if seg.is_empty() {
                return;
            }
            if let Some(c) = this.command(std::mem::take(seg), depth) {
                if !text.is_empty() && !text.ends_with(' ') {
                    text.push(' ');
                }
                text.push_str(&c.text);
                commands.push(c);
            }
        };
        self.pipe_in = None;
        self.last_stdout = None;
        for t in toks {
            match t {
                Tok::Sep(op) => {
                    flush(self, &mut seg, &mut text);
                    // What a command writes reaches the next one only through a pipe.
                    self.pipe_in = if op == "|" {
                        self.last_stdout.take()
                    } else {
                        None
                    };
                    self.last_stdout = None;
                    let op = if op == "\n" { ";" } else { op };
                    text.push(' ');
                    text.push_str(op);
                    text.push(' ');
                }
                other => seg.push(other),
            }
        }
        flush(self, &mut seg, &mut text);
        let text = text
            .split(' ')
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join(" ");
        self.out.lines.push(LineView {
            raw: src.to_string(),
            text: text.clone(),
            commands,
        });
        text
    }

    fn lex(&mut self, src: &str, depth: usize) -> Vec<Tok> {
        self.work += src.len();
        if self.work > MAX_WORK {
            self.out.too_large = true;
            return Vec::new();
        }
        let chars: Vec<char> = src.chars().collect();
        let mut toks = Vec::new();
        let mut cur: Option<Word> = None;
        // Pending here-documents: token index of the body, delimiter, `<<-`, quoted.
        let mut heredocs: Vec<(usize, String, bool, bool)> = Vec::new();
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            match c {
                ' ' | '\t' | '\r' | '\u{b}' | '\u{c}' => {
                    flush_word(&mut toks, &mut cur);
                    i += 1;
                }
                '\n' => {
                    flush_word(&mut toks, &mut cur);
                    toks.push(Tok::Sep("\n"));
                    i += 1;
                    // Here-document bodies start on the next line: they are data for the
                    // command, not commands of this line.
                    for (idx, delim, strip, quoted) in std::mem::take(&mut heredocs) {
                        let mut body = String::new();
                        loop {
                            if i >= chars.len() {
                                break;
                            }
                            let end = chars[i..]
                                .iter()
                                .position(|c| *c == '\n')
                                .map_or(chars.len(), |p| i + p);
                            let line: String = chars[i..end].iter().collect();
                            i = (end + 1).min(chars.len());
                            let cmp = if strip {
                                line.trim_start_matches('\t')
                            } else {
                                line.as_str()
                            };
                            if cmp == delim {
                                break;
                            }
                            body.push_str(cmp);
                            body.push('\n');
                        }
                        if !quoted {
                            self.expansions_only(&body, depth);
                        }
                        if let Some(Tok::Word(w)) = toks.get_mut(idx) {
                            w.render = mask_all(&body);
                            w.value = body;
                            w.quoted = true;
                        }
                    }
                }
                '\\' => {
                    match chars.get(i + 1) {
                        Some('\n') => {}
                        Some(&n) => cur.get_or_insert_with(Word::default).push(n, true),
                        None => {}
                    }
                    i += 2;
                }
                '\'' => {
                    let w = cur.get_or_insert_with(Word::default);
                    w.quoted = true;
                    i += 1;
                    while i < chars.len() && chars[i] != '\'' {
                        w.push(chars[i], true);
                        i += 1;
                    }
                    i += 1;
                }
                '"' => {
                    cur.get_or_insert_with(Word::default).quoted = true;
                    i += 1;
                    while i < chars.len() && chars[i] != '"' {
                        match chars[i] {
                            '\\' => {
                                match chars.get(i + 1) {
                                    Some('\n') => {}
                                    Some(&n @ ('$' | '`' | '"' | '\\')) => {
                                        cur.get_or_insert_with(Word::default).push(n, true)
                                    }
                                    Some(&n) => {
                                        let w = cur.get_or_insert_with(Word::default);
                                        w.push('\\', true);
                                        w.push(n, true);
                                    }
                                    None => {}
                                }
                                i += 2;
                            }
                            '$' => i = self.dollar(&chars, i, true, &mut toks, &mut cur, depth),
                            '`' => i = self.backtick(&chars, i, &mut cur, depth),
                            ch => {
                                cur.get_or_insert_with(Word::default).push(ch, true);
                                i += 1;
                            }
                        }
                    }
                    i += 1;
                }
                '$' => i = self.dollar(&chars, i, false, &mut toks, &mut cur, depth),
                '`' => i = self.backtick(&chars, i, &mut cur, depth),
                '#' if cur.is_none() => {
                    while i < chars.len() && chars[i] != '\n' {
                        i += 1;
                    }
                }
                ';' => {
                    flush_word(&mut toks, &mut cur);
                    i += if chars.get(i + 1) == Some(&';') { 2 } else { 1 };
                    toks.push(Tok::Sep(";"));
                }
                '&' => {
                    flush_word(&mut toks, &mut cur);
                    match (chars.get(i + 1), chars.get(i + 2)) {
                        (Some('&'), _) => {
                            toks.push(Tok::Sep("&&"));
                            i += 2;
                        }
                        (Some('>'), Some('>')) => {
                            toks.push(Tok::Redir("&>>"));
                            i += 3;
                        }
                        (Some('>'), _) => {
                            toks.push(Tok::Redir("&>"));
                            i += 2;
                        }
                        _ => {
                            toks.push(Tok::Sep("&"));
                            i += 1;
                        }
                    }
                }
                '|' => {
                    flush_word(&mut toks, &mut cur);
                    match chars.get(i + 1) {
                        Some('|') => {
                            toks.push(Tok::Sep("||"));
                            i += 2;
                        }
                        Some('&') => {
                            toks.push(Tok::Sep("|"));
                            i += 2;
                        }
                        _ => {
                            toks.push(Tok::Sep("|"));
                            i += 1;
                        }
                    }
                }
                '(' | ')' => {
                    flush_word(&mut toks, &mut cur);
                    toks.push(Tok::Sep(if c == '(' { "(" } else { ")" }));
                    i += 1;
                }
                '<' | '>' if chars.get(i + 1) == Some(&'(') => {
                    // Process substitution: its output (or input) is another command line.
                    let (inner, next, closed) = matching_paren(&chars, i + 2);
                    if !closed {
                        self.unparsed("an unterminated process substitution");
                    }
                    let rendered = self.line(&inner, depth + 1);
                    let out = self.last_stdout.take();
                    self.procsub.insert(format!("{c}({inner})"), out);
                    let w = cur.get_or_insert_with(Word::default);
                    w.value.push(c);
                    w.value.push('(');
                    w.value.push_str(&inner);
                    w.value.push(')');
                    w.render.push(c);
                    w.render.push('(');
                    w.render.push_str(&mask_all(&rendered));
                    w.render.push(')');
                    w.quoted = true;
                    i = next;
                }
                '<' | '>' => {
                    // `2>file`: the digits name a descriptor, they are not a word.
                    match &cur {
                        Some(w) if !w.quoted && w.value.chars().all(|d| d.is_ascii_digit()) => {
                            cur = None
                        }
                        _ => flush_word(&mut toks, &mut cur),
                    }
                    let rest: String = chars[i..chars.len().min(i + 3)].iter().collect();
                    let op: &'static str = if c == '>' {
                        if rest.starts_with(">>") {
                            ">>"
                        } else if rest.starts_with(">|") {
                            ">|"
                        } else if rest.starts_with(">&") {
                            ">&"
                        } else {
                            ">"
                        }
                    } else if rest.starts_with("<<<") {
                        "<<<"
                    } else if rest.starts_with("<<-") {
                        "<<-"
                    } else if rest.starts_with("<<") {
                        "<<"
                    } else if rest.starts_with("<>") {
                        "<>"
                    } else if rest.starts_with("<&") {
                        "<&"
                    } else {
                        "<"
                    };
                    toks.push(Tok::Redir(op));
                    i += op.chars().count();
                    if op == "<<" || op == "<<-" {
                        while i < chars.len() && matches!(chars[i], ' ' | '\t') {
                            i += 1;
                        }
                        let mut delim = String::new();
                        let mut quoted = false;
                        while i < chars.len()
                            && !chars[i].is_whitespace()
                            && !matches!(chars[i], ';' | '|' | '&' | '<' | '>' | '(' | ')')
                        {
                            match chars[i] {
                                '\'' | '"' => quoted = true,
                                '\\' => quoted = true,
                                c => delim.push(c),
                            }
                            i += 1;
                        }
                        heredocs.push((toks.len(), delim, op == "<<-", quoted));
                        toks.push(Tok::Word(Word::default()));
                    }
                }
                _ => {
                    cur.get_or_insert_with(Word::default).push(c, false);
                    i += 1;
                }
            }
        }
        flush_word(&mut toks, &mut cur);
        toks
    }

    /// Handles `$…` at `chars[i]`; returns the index after it.
    fn dollar(
        &mut self,
        chars: &[char],
        i: usize,
        in_dq: bool,
        toks: &mut Vec<Tok>,
        cur: &mut Option<Word>,
        depth: usize,
    ) -> usize {
        match chars.get(i + 1) {
            Some('(') if chars.get(i + 2) == Some(&'(') => {
                // Arithmetic runs nothing itself, but `$(…)` inside it does, and so does an
                // array subscript in the value of a variable it names (`x='a[$(id)]'`).
                let (inner, next, closed) = matching_paren(chars, i + 2);
                if !closed {
                    self.unparsed("an unterminated $((…))");
                }
                self.arithmetic(&inner, depth);
                let w = cur.get_or_insert_with(Word::default);
                for ch in format!("$(({inner})").chars() {
                    w.push(ch, true);
                }
                next
            }
            Some('(') => {
                let (inner, next, closed) = matching_paren(chars, i + 2);
                if !closed {
                    self.unparsed("an unterminated $(…)");
                }
                self.substitution(&inner, cur, depth);
                next
            }
            Some('[') => {
                // `$[…]`: the old arithmetic syntax.
                let mut j = i + 2;
                let mut level = 1;
                while j < chars.len() {
                    match chars[j] {
                        '[' => level += 1,
                        ']' => {
                            level -= 1;
                            if level == 0 {
                                break;
                            }
                        }
                        _ => {}
                    }
                    j += 1;
                }
                let inner: String = chars[i + 2..j.min(chars.len())].iter().collect();
                if j >= chars.len() {
                    self.unparsed("an unterminated $[…]");
                }
                self.arithmetic(&inner, depth);
                let w = cur.get_or_insert_with(Word::default);
                for ch in format!("$[{inner}]").chars() {
                    w.push(ch, true);
                }
                j + 1
            }
            Some('{') => {
                let (inner, next, closed) = matching_brace(chars, i + 2);
                if !closed {
                    self.unparsed("an unterminated ${…}");
                }
                self.braced(&inner, in_dq, toks, cur, depth);
                next
            }
            Some('\'') if !in_dq => {
                // ANSI-C quoting: `$'\x72\x6d'` is `rm`.
                let mut j = i + 2;
                let mut raw = String::new();
                while j < chars.len() && chars[j] != '\'' {
                    if chars[j] == '\\' && j + 1 < chars.len() {
                        raw.push('\\');
                        raw.push(chars[j + 1]);
                        j += 2;
                    } else {
                        raw.push(chars[j]);
                        j += 1;
                    }
                }
                let w = cur.get_or_insert_with(Word::default);
                w.quoted = true;
                for ch in decode_ansi_c(&raw).chars() {
                    w.push(ch, true);
                }
                j + 1
            }
            Some('"') if !in_dq => i + 1,
            Some(&c) if c.is_ascii_alphabetic() || c == '_' => {
                let mut j = i + 1;
                let mut name = String::new();
                while j < chars.len() && (chars[j].is_ascii_alphanumeric() || chars[j] == '_') {
                    name.push(chars[j]);
                    j += 1;
                }
                self.variable(&name, in_dq, toks, cur, false);
                j
            }
            Some(&c) if c.is_ascii_digit() || c == '@' || c == '*' => {
                self.variable(&c.to_string(), in_dq, toks, cur, false);
                i + 2
            }
            _ => {
                cur.get_or_insert_with(Word::default).push('$', in_dq);
                i + 1
            }
        }
    }

    /// Command substitutions inside arithmetic text, and inside the values of the
    /// variables it names (bash evaluates those recursively, subscripts included).
    fn arithmetic(&mut self, inner: &str, depth: usize) {
        self.expansions_only(inner, depth);
        let names: Vec<String> = inner
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .filter(|n| {
                n.chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            })
            .map(str::to_string)
            .collect();
        for n in names {
            for v in self.vars.get(&n).cloned().unwrap_or_default() {
                if v.contains("$(") || v.contains('`') {
                    self.expansions_only(&v, depth);
                }
            }
        }
    }

    /// Analyses the substitutions in `text` as a shell would expand them inside double
    /// quotes (a here-document body, arithmetic), ignoring everything else.
    fn expansions_only(&mut self, text: &str, depth: usize) {
        let chars: Vec<char> = text.chars().collect();
        let mut toks = Vec::new();
        let mut cur: Option<Word> = None;
        let mut i = 0;
        while i < chars.len() {
            match chars[i] {
                '\\' => i += 2,
                '$' => i = self.dollar(&chars, i, true, &mut toks, &mut cur, depth),
                '`' => i = self.backtick(&chars, i, &mut cur, depth),
                _ => i += 1,
            }
        }
    }

    /// `${…}`: the forms a shell script commonly uses are read; the word of `${x:-word}`
    /// and the patterns of `${x/a/b}` are analysed for substitutions; anything else is
    /// rendered as it stands (and refused in allowlist mode).
    fn braced(
        &mut self,
        inner: &str,
        in_dq: bool,
        toks: &mut Vec<Tok>,
        cur: &mut Option<Word>,
        depth: usize,
    ) {
        let raw_text = |cur: &mut Option<Word>| {
            let w = cur.get_or_insert_with(Word::default);
            for ch in format!("${{{inner}}}").chars() {
                w.push(ch, in_dq);
            }
        };
        let body = inner
            .strip_prefix('#')
            .filter(|r| !r.is_empty())
            .unwrap_or(inner);
        let name: String = if body.starts_with(|c: char| c.is_ascii_digit()) {
            body.chars().take_while(|c| c.is_ascii_digit()).collect()
        } else if body.starts_with(['@', '*', '?', '$', '!', '-', '#']) && body.len() == 1 {
            body.to_string()
        } else {
            body.chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect()
        };
        let rest = &body[name.len()..];
        if name.is_empty() {
            // `${!name}` (indirection), `${}`: the value comes from somewhere unread.
            self.unparsed(&format!("the expansion ${{{inner}}}"));
            raw_text(cur);
            return;
        }
        if inner.starts_with('#') && body != inner {
            // `${#x}`: a length.
            if !rest.is_empty() {
                self.unparsed(&format!("the expansion ${{{inner}}}"));
            }
            raw_text(cur);
            return;
        }
        if rest.is_empty() {
            self.variable(&name, in_dq, toks, cur, true);
            return;
        }
        if let Some(op) = rest.strip_prefix('@') {
            if op.starts_with('P') {
                // Prompt expansion runs the command substitutions held in the value.
                self.finding(
                    FindingScope::Always,
                    ExecCategory::EvalDecode,
                    "prompt expansion ${x@P}",
                    "${…@P} runs the command substitutions stored in a variable".into(),
                );
            } else if !matches!(op, "Q" | "U" | "u" | "L" | "a" | "K" | "k") {
                self.unparsed(&format!("the expansion ${{{inner}}}"));
            }
            raw_text(cur);
            return;
        }
        let default_ops = [":-", ":=", ":+", ":?", "-", "=", "+", "?"];
        if let Some(op) = default_ops.iter().find(|op| rest.starts_with(**op)) {
            let word = &rest[op.len()..];
            let known = self.vars.contains_key(&name) || name == "HOME";
            if matches!(*op, ":?" | "?") {
                self.expansions_only(word, depth);
                if known {
                    self.variable(&name, in_dq, toks, cur, true);
                } else {
                    raw_text(cur);
                }
                return;
            }
            if known && !matches!(*op, ":+" | "+") {
                self.expansions_only(word, depth);
                self.variable(&name, in_dq, toks, cur, true);
                return;
            }
            // The word is what the expansion gives when the variable is unset (or, for
            // `:+`, set): read it as part of this word.
            let sub = self.lex(word, depth);
            let mut first = true;
            for t in sub {
                if let Tok::Word(sw) = t {
                    if !first {
                        if in_dq {
                            cur.get_or_insert_with(Word::default).push(' ', true);
                        } else {
                            flush_word(toks, cur);
                        }
                    }
                    first = false;
                    let w = cur.get_or_insert_with(Word::default);
                    w.value.push_str(&sw.value);
                    w.render.push_str(&sw.render);
                    w.quoted |= sw.quoted || in_dq;
                    w.from_var |= sw.from_var;
                }
            }
            let _ = cur.get_or_insert_with(Word::default);
            return;
        }
        let pattern_ops = [
            "##", "#", "%%", "%", "//", "/#", "/%", "/", "^^", "^", ",,", ",", ":", "[",
        ];
        if pattern_ops.iter().any(|op| rest.starts_with(op)) {
            // Patterns, offsets and subscripts are expanded (and subscripts evaluated).
            self.expansions_only(rest, depth);
            raw_text(cur);
            return;
        }
        self.unparsed(&format!("the expansion ${{{inner}}}"));
        raw_text(cur);
    }

    /// Expands the variables that matter for obfuscation; others stay as `$NAME` text.
    fn variable(
        &mut self,
        expr: &str,
        in_dq: bool,
        toks: &mut Vec<Tok>,
        cur: &mut Option<Word>,
        braced: bool,
    ) {
        let name: String = expr
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '@' || *c == '*')
            .collect();
        if name == "IFS" {
            // Unquoted, `$IFS` expands to whitespace that splits words.
            if in_dq {
                cur.get_or_insert_with(Word::default).push(' ', true);
            } else {
                flush_word(toks, cur);
            }
        } else if name == "HOME" {
            cur.get_or_insert_with(Word::default).push('~', false);
        } else if name == "@"
            || name == "*"
            || (!name.is_empty() && name.chars().all(|c| c.is_ascii_digit()) && name != "0")
        {
            // Positional parameters: those of a function call or `sh -c '…' _ a` being
            // read; otherwise empty, as in `sh -c` (`r$@m` is `rm`).
            let args = self
                .positional
                .last()
                .cloned()
                .or_else(|| self.set_args.clone())
                .unwrap_or_default();
            let vals: Vec<String> = match name.as_str() {
                "@" | "*" => args,
                n => n
                    .parse::<usize>()
                    .ok()
                    .and_then(|k| args.get(k.wrapping_sub(1)).cloned())
                    .into_iter()
                    .collect(),
            };
            self.expand_values(&vals, in_dq, toks, cur);
        } else if let Some(vals) = self.vars.get(&name).cloned() {
            self.expand_values(&vals, in_dq, toks, cur);
            if let Some(w) = cur.as_mut() {
                w.from_var = true;
            }
        } else {
            let text = if braced {
                format!("${{{expr}}}")
            } else {
                format!("${expr}")
            };
            let w = cur.get_or_insert_with(Word::default);
            for ch in text.chars() {
                w.push(ch, in_dq);
            }
        }
    }

    /// Puts the values of an expansion into the word being read: one value keeps the
    /// quoting of the expansion; several (a variable given several values, `$@`) become
    /// separate words so that each is seen where it lands.
    fn expand_values(
        &mut self,
        vals: &[String],
        in_dq: bool,
        toks: &mut Vec<Tok>,
        cur: &mut Option<Word>,
    ) {
        let _ = cur.get_or_insert_with(Word::default);
        if let [one] = vals {
            if in_dq {
                let w = cur.get_or_insert_with(Word::default);
                for ch in one.chars() {
                    w.push(ch, true);
                }
                return;
            }
        }
        let size: usize = vals.iter().map(String::len).sum();
        self.work += size;
        if self.work > MAX_WORK {
            self.out.too_large = true;
            return;
        }
        let mut first = true;
        for v in vals {
            if v.contains("$(") || v.contains('`') {
                // The output of a command: unknown to the guard.
                if !first {
                    flush_word(toks, cur);
                }
                first = false;
                let w = cur.get_or_insert_with(Word::default);
                for ch in "${subst}".chars() {
                    w.push(ch, false);
                }
                continue;
            }
            for part in v.split_whitespace() {
                if !first {
                    flush_word(toks, cur);
                }
                first = false;
                let w = cur.get_or_insert_with(Word::default);
                for ch in part.chars() {
                    w.push(ch, false);
                }
            }
        }
    }

    fn backtick(
        &mut self,
        chars: &[char],
        i: usize,
        cur: &mut Option<Word>,
        depth: usize,
    ) -> usize {
        let mut j = i + 1;
        let mut inner = String::new();
        while j < chars.len() && chars[j] != '`' {
            if chars[j] == '\\' && j + 1 < chars.len() {
                inner.push(chars[j + 1]);
                j += 2;
            } else {
                inner.push(chars[j]);
                j += 1;
            }
        }
        if j >= chars.len() {
            self.unparsed("an unterminated backtick");
        }
        self.substitution(&inner, cur, depth);
        j + 1
    }

    /// A command substitution: analysed as its own line and kept in the word as `$(…)`.
    fn substitution(&mut self, inner: &str, cur: &mut Option<Word>, depth: usize) {
        let rendered = self.line(inner, depth + 1);
        let w = cur.get_or_insert_with(Word::default);
        w.value.push_str("$(");
        w.value.push_str(inner);
        w.value.push(')');
        w.render.push_str("$(");
        w.render.push_str(&mask_all(&rendered));
        w.render.push(')');
        w.quoted = true;
    }

    /// Builds the view of one simple command, unwrapping wrappers and recursing into code
    /// handed to another shell.
    fn command(&mut self, toks: Vec<Tok>, depth: usize) -> Option<CommandView> {
        let piped = self.pipe_in.take();
        let mut xargs_input: Option<Option<String>> = None;
        let mut words: Vec<Word> = Vec::new();
        let mut redirs: Vec<(&'static str, Option<Word>)> = Vec::new();
        let mut it = toks.into_iter().peekable();
        while let Some(t) = it.next() {
            match t {
                Tok::Word(w) => words.push(w),
                Tok::Redir(op) => {
                    let target = match it.peek() {
                        Some(Tok::Word(_)) => match it.next() {
                            Some(Tok::Word(w)) => Some(w),
                            _ => None,
                        },
                        _ => None,
                    };
                    redirs.push((op, target));
                }
                Tok::Sep(_) => {}
            }
        }
        let mut assigns = Vec::new();
        let mut raw_assigns: Vec<String> = Vec::new();
        let mut start = 0;
        // Keywords and assignments before the program.
        while start < words.len() {
            let v = &words[start].value;
            if !words[start].quoted
                && matches!(
                    v.as_str(),
                    "{" | "}"
                        | "!"
                        | "if"
                        | "then"
                        | "else"
                        | "elif"
                        | "fi"
                        | "do"
                        | "done"
                        | "while"
                        | "until"
                        | "time"
                        | "coproc"
                        | "esac"
                )
            {
                start += 1;
            } else if is_assignment(v) {
                assigns.push(words[start].render.to_ascii_lowercase());
                raw_assigns.push(v.clone());
                start += 1;
            } else {
                break;
            }
        }
        let mut words: Vec<Word> = words.split_off(start.min(words.len()));
        // `for x in …`, `select x in …`, `case x in`: a header, not a program (its
        // substitutions were analysed while reading the words).
        if words
            .first()
            .is_some_and(|w| !w.quoted && matches!(w.value.as_str(), "for" | "select" | "case"))
        {
            words.clear();
        }
        // Look through wrappers that run their arguments as a command.
        while let Some(first) = words.first() {
            let prog = program_name(&first.value);
            let skip = match prog.as_str() {
                "env" => {
                    let mut k = 1;
                    while k < words.len() {
                        let v = words[k].value.as_str();
                        if v == "-S" || v == "--split-string" || v.starts_with("--split-string=") {
                            // `env -S 'cmd args'`: the string is a command line.
                            let script = if let Some(s) = v.strip_prefix("--split-string=") {
                                s.to_string()
                            } else {
                                k += 1;
                                words.get(k).map(|w| w.value.clone()).unwrap_or_default()
                            };
                            self.line(&script, depth + 1);
                            k += 1;
                        } else if matches!(v, "-u" | "--unset" | "-C" | "--chdir") {
                            k += 2;
                        } else if v.starts_with('-') {
                            k += 1;
                        } else if is_assignment(v) {
                            assigns.push(words[k].render.to_ascii_lowercase());
                            raw_assigns.push(v.to_string());
                            k += 1;
                        } else {
                            break;
                        }
                    }
                    Some(k)
                }
                "command" | "builtin" => Some(skip_options(&words, 1, &[], false)),
                "exec" => Some(skip_options(&words, 1, &["-a"], false)),
                "nohup" | "unbuffer" | "setsid" | "time" | "stdbuf" | "nice" | "ionice"
                | "chrt" | "taskset" => Some(skip_options(
                    &words,
                    1,
                    &[
                        "-a",
                        "-n",
                        "-c",
                        "-i",
                        "-o",
                        "-e",
                        "-p",
                        "--adjustment",
                        "--class",
                    ],
                    prog == "chrt" || prog == "taskset",
                )),
                "timeout" => {
                    let k =
                        skip_options(&words, 1, &["-s", "--signal", "-k", "--kill-after"], false);
                    Some(k + 1)
                }
                "xargs" => {
                    // The arguments come from stdin: the guard cannot know them.
                    let k = skip_options(
                        &words,
                        1,
                        &[
                            "-I",
                            "-n",
                            "-P",
                            "-L",
                            "-d",
                            "-E",
                            "-s",
                            "-a",
                            "--max-args",
                            "--max-procs",
                            "--max-lines",
                            "--delimiter",
                            "--arg-file",
                            "--eof",
                            "--max-chars",
                        ],
                        false,
                    );
                    let mut repl = None;
                    for (j, w) in words.iter().enumerate().take(k).skip(1) {
                        let v = w.value.as_str();
                        if v == "-I" {
                            repl = words.get(j + 1).map(|w| w.value.clone());
                        } else if let Some(r) = v.strip_prefix("-I") {
                            repl = Some(r.to_string());
                        } else if v == "-i" || v == "--replace" {
                            repl = Some("{}".into());
                        } else if let Some(r) = v.strip_prefix("--replace=") {
                            repl = Some(r.to_string());
                        } else if let Some(r) = v.strip_prefix("-i") {
                            repl = Some(r.to_string());
                        }
                    }
                    xargs_input = Some(repl.filter(|r| !r.is_empty()));
                    Some(k)
                }
                "parallel" => {
                    let k = skip_options(&words, 1, &["-j", "--jobs", "-S", "--sshlogin"], false);
                    xargs_input = Some(Some("{}".into()));
                    Some(k)
                }
                "strace" | "ltrace" | "fakeroot" | "eatmydata" | "firejail" | "torsocks"
                | "proxychains" | "proxychains4" | "tsocks" | "chronic" | "ifne" | "xvfb-run"
                | "dbus-run-session" | "catchsegv" | "valgrind" | "nocache" | "systemd-run" => {
                    Some(skip_options(
                        &words,
                        1,
                        &["-o", "-e", "-p", "-s", "-u", "-E", "-a"],
                        false,
                    ))
                }
                "busybox" | "toybox" => {
                    if words.get(1).is_some_and(|w| w.value.starts_with('-')) {
                        None
                    } else {
                        Some(1)
                    }
                }
                _ => None,
            };
            match skip {
                Some(k) if k < words.len() => {
                    words.drain(..k);
                }
                Some(_) => {
                    // Nothing left to run: the wrapper itself is the program (`env` alone).
                    words.truncate(1);
                    break;
                }
                None => break,
            }
        }
        if let Some(repl) = xargs_input {
            if words.len() > 1
                || !matches!(words.first(), Some(w) if program_name(&w.value) == "xargs")
            {
                let unknown = "${xargs}";
                match repl {
                    Some(r) => {
                        for w in words.iter_mut().skip(1) {
                            if w.value.contains(&r) {
                                w.value = w.value.replace(&r, unknown);
                                w.render = w.render.replace(&r, unknown);
                            }
                        }
                        // `parallel cmd ::: a b`: the arguments are given after `:::`.
                        if let Some(pos) = words.iter().position(|w| w.value == ":::") {
                            let tail: Vec<Word> = words.split_off(pos);
                            words.extend(tail.into_iter().skip(1).filter(|w| w.value != ":::"));
                        } else if !words.iter().any(|w| w.value.contains(unknown)) {
                            words.push(Word {
                                value: unknown.into(),
                                render: unknown.into(),
                                quoted: true,
                                from_var: false,
                            });
                        }
                    }
                    None => words.push(Word {
                        value: unknown.into(),
                        render: unknown.into(),
                        quoted: true,
                        from_var: false,
                    }),
                }
            }
        }
        if words.is_empty() && redirs.is_empty() && assigns.is_empty() {
            return None;
        }
        let program = words
            .first()
            .map(|w| {
                if w.from_var {
                    // A command name held in a variable stays visibly computed, whatever
                    // value the reader found for it.
                    format!("${}", mask_all(&program_name(&w.value)))
                } else if w.quoted && w.render.contains(['$', '<', '>']) {
                    // A computed program (`$(…)`, `<(…)`): keep the rendering.
                    w.render.clone()
                } else {
                    mask_all(&program_name(&w.value))
                }
            })
            .unwrap_or_default();
        self.nested(&program, &words, &redirs, depth, piped.as_deref());
        self.track_writes(&program, &words, &redirs, piped.as_deref());
        if matches!(
            program.as_str(),
            "export" | "declare" | "typeset" | "local" | "readonly"
        ) {
            raw_assigns.extend(
                words
                    .iter()
                    .skip(1)
                    .filter(|w| is_assignment(&w.value))
                    .map(|w| w.value.clone()),
            );
        }
        self.command_assigns(&raw_assigns, depth);

        let mut parts: Vec<String> = Vec::new();
        if !program.is_empty() {
            parts.push(program.clone());
        }
        for w in words.iter().skip(1) {
            parts.push(normalize_path(&w.render));
        }
        for (op, target) in &redirs {
            parts.push((*op).to_string());
            if let Some(t) = target {
                parts.push(normalize_path(&t.render));
            }
        }
        let text = parts.join(" ");
        self.last_stdout = literal_stdout(&program, &words, &redirs);
        let local = words.first().is_some_and(|w| {
            self.functions.contains_key(&w.value) || self.aliases.contains_key(&w.value)
        });
        Some(CommandView {
            program,
            text,
            assigns,
            local,
        })
    }

    /// Code that a command hands to something else to run (a shell, an interpreter, git,
    /// `find -exec`, an alias or function of the same line, a file written earlier in the
    /// line) is analysed as a command line of its own.
    fn nested(
        &mut self,
        program: &str,
        words: &[Word],
        redirs: &[(&'static str, Option<Word>)],
        depth: usize,
        piped: Option<&str>,
    ) {
        let args = words.get(1..).unwrap_or_default();
        let vals: Vec<String> = args.iter().map(|w| w.value.clone()).collect();
        // What the command reads on stdin, when the guard can know it.
        let mut stdin: Option<String> = piped.map(str::to_string);
        for (op, t) in redirs {
            match (*op, t) {
                ("<<<" | "<<" | "<<-", Some(t)) => stdin = Some(t.value.clone()),
                ("<", Some(t)) => {
                    if let Some(c) = self.written_content(&t.value) {
                        stdin = c;
                    }
                }
                _ => {}
            }
        }

        if let Some(first) = words.first() {
            let name = first.value.clone();
            if !self.expanding.contains(&name) {
                if let Some(body) = self.functions.get(&name).cloned() {
                    self.expanding.push(name.clone());
                    self.line_with_args(&body, depth + 1, vals.clone());
                    self.expanding.pop();
                } else if !first.quoted {
                    if let Some(value) = self.aliases.get(&name).cloned() {
                        self.expanding.push(name.clone());
                        let mut src = value;
                        for v in &vals {
                            src.push(' ');
                            src.push_str(&shell_quote(v));
                        }
                        self.line(&src, depth + 1);
                        self.expanding.pop();
                    }
                }
            }
            // `./x.sh`, `/tmp/x`: a file run directly.
            if first.value.contains('/') && !first.from_var {
                self.run_file(&first.value, None, vals.clone(), depth);
            }
        }

        if SHELLS.contains(&program) || program == "su" {
            let mut k = 0;
            let mut had_script = false;
            while k < args.len() {
                let v = args[k].value.as_str();
                let is_c = v == "-c"
                    || v == "--command"
                    || (v.starts_with('-')
                        && !v.starts_with("--")
                        && v.len() > 1
                        && v[1..].chars().all(|c| c.is_ascii_alphabetic())
                        && v.contains('c'));
                if let Some(script) = v.strip_prefix("--command=") {
                    self.line(script, depth + 1);
                    had_script = true;
                } else if is_c {
                    if let Some(script) = args.get(k + 1) {
                        // `sh -c 'script' $0 $1 …`
                        let pos = vals.get(k + 3..).unwrap_or_default().to_vec();
                        self.line_with_args(&script.value, depth + 1, pos);
                    }
                    had_script = true;
                    break;
                } else if program != "su" && !v.starts_with(['-', '+']) {
                    // `sh file args`: a script file.
                    let pos = vals.get(k + 1..).unwrap_or_default().to_vec();
                    self.run_file(v, Some("sh"), pos, depth);
                    had_script = true;
                    break;
                } else if matches!(v, "-o" | "+o" | "-O" | "+O") {
                    k += 1;
                }
                k += 1;
            }
            if !had_script {
                // `… | sh`, `sh <<EOF`, `bash <<< 'cmd'`, `sh < x.sh`: stdin is the script.
                let from_procsub = redirs.iter().find_map(|(op, t)| match (*op, t) {
                    ("<", Some(t)) if t.value.starts_with("<(") => Some(t.value.clone()),
                    _ => None,
                });
                if let Some(p) = from_procsub {
                    self.run_file(&p, Some("sh"), Vec::new(), depth);
                } else if let Some(code) = stdin {
                    self.line(&code, depth + 1);
                }
            }
        } else if program == "eval" {
            self.line(&vals.join(" "), depth + 1);
        } else if program == "source" || program == "." {
            if let Some(f) = vals.first() {
                let pos = vals.get(1..).unwrap_or_default().to_vec();
                if matches!(f.as_str(), "/dev/stdin" | "/dev/fd/0") {
                    // `source /dev/stdin <<< …`: the script is stdin.
                    if let Some(code) = stdin.clone() {
                        self.line(&code, depth + 1);
                    }
                } else {
                    self.run_file(f, Some("sh"), pos, depth);
                }
            }
        } else if program == "find" {
            self.find(args, depth);
        } else if let Some(interp) = interpreter(program) {
            self.interpreter(interp, args, stdin, depth);
        } else if matches!(program, "awk" | "gawk" | "mawk" | "nawk") {
            self.awk(args, depth);
        } else if program == "git" {
            self.git(args, depth);
        } else if program == "sed" || program == "gsed" {
            self.sed(&vals, depth);
        } else if let Some(opts) = COMMAND_OPTIONS
            .iter()
            .find(|(p, _)| *p == program)
            .map(|(_, o)| *o)
        {
            // Options whose value is a command the program runs.
            for (j, v) in vals.iter().enumerate() {
                for opt in opts {
                    let value = if v == opt {
                        vals.get(j + 1).cloned()
                    } else if let Some(r) = v.strip_prefix(opt) {
                        if opt.starts_with("--") || opt.ends_with('=') {
                            r.strip_prefix('=').or(Some(r)).map(str::to_string)
                        } else {
                            None
                        }
                    } else {
                        None
                    };
                    if let Some(cmd) = value.filter(|c| !c.is_empty()) {
                        let cmd = cmd.strip_prefix("exec=").unwrap_or(&cmd).to_string();
                        self.line(&cmd, depth + 1);
                    }
                }
                // `ssh -o ProxyCommand=…`, `-oLocalCommand=…`
                let o = if v == "-o" {
                    vals.get(j + 1).cloned()
                } else {
                    v.strip_prefix("-o").map(str::to_string)
                };
                if let Some((key, cmd)) = o.as_deref().and_then(|o| o.split_once(['=', ' '])) {
                    if matches!(
                        key.to_ascii_lowercase().as_str(),
                        "proxycommand" | "localcommand" | "knownhostscommand" | "remotecommand"
                    ) {
                        self.line(cmd, depth + 1);
                    }
                }
            }
        } else if program == "alias" {
            for v in &vals {
                if let Some((name, value)) = v.split_once('=') {
                    self.aliases.insert(name.to_string(), value.to_string());
                }
            }
        } else if program == "trap" {
            if let Some(code) = vals.first().filter(|v| !v.starts_with('-')) {
                self.line(code, depth + 1);
            }
        } else if matches!(
            program,
            "sudo" | "doas" | "pkexec" | "runuser" | "chroot" | "nsenter" | "unshare" | "sg"
        ) {
            let k = skip_options(
                args,
                0,
                &[
                    "-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U", "-l", "-c",
                ],
                false,
            );
            let k = if program == "chroot" || program == "sg" {
                k + 1
            } else {
                k
            };
            if let Some(rest) = vals.get(k..).filter(|r| !r.is_empty()) {
                self.line(&shell_join(rest), depth + 1);
            }
        } else if program == "watch" {
            let k = skip_options(args, 0, &["-n", "--interval", "-q", "--equexit"], false);
            if let Some(rest) = vals.get(k..).filter(|r| !r.is_empty()) {
                // watch hands its arguments, joined, to `sh -c`.
                self.line(&rest.join(" "), depth + 1);
            }
        } else if program == "flock" {
            let k = skip_options(args, 0, &["-w", "--wait", "--timeout", "-E"], false) + 1;
            match vals.get(k).map(String::as_str) {
                Some("-c" | "--command") => {
                    if let Some(c) = vals.get(k + 1) {
                        self.line(c, depth + 1);
                    }
                }
                Some(_) => {
                    self.line(&shell_join(&vals[k..]), depth + 1);
                }
                None => {}
            }
        } else if program == "script" {
            for (j, v) in vals.iter().enumerate() {
                if v == "-c" || v == "--command" {
                    if let Some(c) = vals.get(j + 1) {
                        self.line(c, depth + 1);
                    }
                } else if let Some(c) = v.strip_prefix("--command=") {
                    self.line(c, depth + 1);
                }
            }
        } else if matches!(
            program,
            "let"
                | "declare"
                | "typeset"
                | "local"
                | "export"
                | "readonly"
                | "unset"
                | "printf"
                | "test"
                | "["
                | "[["
                | "read"
                | "mapfile"
                | "readarray"
        ) {
            // Array subscripts in these arguments are evaluated as arithmetic, which runs
            // the command substitutions they hold, even from quoted text.
            for v in &vals {
                if v.contains('[') && (v.contains("$(") || v.contains('`')) {
                    self.expansions_only(v, depth);
                }
            }
        }
    }

    /// The content of a file written earlier in the analysed text: `None` when it was not
    /// written here, `Some(None)` when it was but its content is unknown.
    fn written_content(&self, path: &str) -> Option<Option<String>> {
        self.written.get(file_key(path)).cloned()
    }

    /// A file run by a shell (`sh x`), an interpreter or directly (`./x`): if this same
    /// command line wrote it, its content is analysed, and allowlist mode refuses it.
    fn run_file(&mut self, path: &str, runner: Option<&str>, args: Vec<String>, depth: usize) {
        if path.starts_with("<(") {
            // `bash <(…)`, `. <(…)`: the script is a command's output.
            match self.procsub.get(path).cloned().flatten() {
                Some(code) => match runner.and_then(interpreter) {
                    Some(i) => self.inline_code(i, &code, &args, depth),
                    None => {
                        self.line_with_args(&code, depth + 1, args);
                    }
                },
                None => self.finding(
                    FindingScope::Always,
                    ExecCategory::EvalDecode,
                    "script read from a command's output",
                    "runs as a script the output of a command the guard cannot predict".into(),
                ),
            }
            return;
        }
        let Some(content) = self.written_content(path) else {
            return;
        };
        self.finding(
            FindingScope::Allowlist,
            ExecCategory::NotAllowlisted,
            "file written then run",
            format!("runs {path}, a file this same command writes"),
        );
        let Some(code) = content else {
            let download = self.downloaded.contains(file_key(path));
            self.finding(
                FindingScope::Always,
                if download {
                    ExecCategory::DownloadExec
                } else {
                    ExecCategory::EvalDecode
                },
                "file written then run",
                format!("runs {path}, which this same command writes with content the guard cannot read"),
            );
            return;
        };
        let shebang = code
            .lines()
            .next()
            .filter(|l| l.starts_with("#!"))
            .and_then(|l| {
                l.split_whitespace()
                    .map(program_name)
                    .find_map(|p| interpreter(&p.replace("#!", "")))
            });
        match (runner, shebang) {
            (Some(r), _) if interpreter(r).is_some() => {
                self.inline_code(r, &code, &args, depth);
            }
            (None, Some(i)) => self.inline_code(i, &code, &args, depth),
            _ => {
                self.line_with_args(&code, depth + 1, args);
            }
        }
    }

    /// GNU sed runs commands: the `e` command and the `e` flag of `s` (the pattern space,
    /// i.e. the replacement, is run).
    fn sed(&mut self, vals: &[String], depth: usize) {
        let mut scripts = Vec::new();
        let mut k = 0;
        while k < vals.len() {
            let v = vals[k].as_str();
            if v == "-e" || v == "--expression" {
                if let Some(s) = vals.get(k + 1) {
                    scripts.push(s.clone());
                }
                k += 2;
                continue;
            }
            if let Some(s) = v.strip_prefix("--expression=") {
                scripts.push(s.to_string());
            } else if v == "-f" || v == "--file" {
                k += 1;
            } else if !v.starts_with('-') && scripts.is_empty() {
                scripts.push(v.to_string());
                break;
            }
            k += 1;
        }
        for script in scripts {
            for cmd in script.split([';', '\n']) {
                let c = strip_sed_address(cmd.trim());
                let run = if let Some(rest) = c.strip_prefix('e') {
                    (rest.is_empty() || rest.starts_with(char::is_whitespace))
                        .then(|| rest.trim().to_string())
                } else if c.starts_with('s') && c.len() > 1 {
                    sed_substitution_command(c)
                } else {
                    None
                };
                if let Some(run) = run {
                    if !run.is_empty() {
                        self.line(&run, depth + 1);
                    }
                    self.finding(
                        FindingScope::Allowlist,
                        ExecCategory::NotAllowlisted,
                        "sed running a command",
                        "sed code runs a command (the e command or flag), which the allowlist cannot vouch for".into(),
                    );
                }
            }
        }
    }

    fn find(&mut self, args: &[Word], depth: usize) {
        let mut k = 0;
        while k < args.len() && matches!(args[k].value.as_str(), "-H" | "-L" | "-P") {
            k += 1;
        }
        let mut starts = Vec::new();
        while k < args.len() {
            let v = &args[k].value;
            if v.starts_with('-') || v == "(" || v == "!" {
                break;
            }
            starts.push(v.clone());
            k += 1;
        }
        if starts.is_empty() {
            starts.push(".".into());
        }
        // `find … -exec cmd {} ;`: `{}` is each path found, so it stands for the start
        // points (a path under `/` is as bad as `/` for `rm -rf`).
        while k < args.len() {
            if matches!(
                args[k].value.as_str(),
                "-fprint" | "-fprint0" | "-fls" | "-fprintf"
            ) {
                // These create (truncate) their file even when nothing is found.
                if let Some(f) = args.get(k + 1) {
                    let n = normalize_path(&f.value);
                    if ["/etc", "/boot", "/sys", "/proc"]
                        .iter()
                        .any(|d| n == *d || n.starts_with(&format!("{d}/")))
                    {
                        self.finding(
                            FindingScope::Always,
                            ExecCategory::SystemWrite,
                            "find -fprint into /etc, /boot, /sys or /proc",
                            format!("find writes {n}"),
                        );
                    }
                    self.record_write(&f.value, None, false);
                }
            }
            if matches!(
                args[k].value.as_str(),
                "-exec" | "-execdir" | "-ok" | "-okdir"
            ) {
                let mut cmd = Vec::new();
                k += 1;
                while k < args.len() && !matches!(args[k].value.as_str(), ";" | "+") {
                    let v = &args[k].value;
                    if v == "{}" {
                        cmd.extend(starts.iter().cloned());
                    } else {
                        cmd.push(v.replace("{}", &starts[0]));
                    }
                    k += 1;
                }
                self.line(&shell_join(&cmd), depth + 1);
            }
            k += 1;
        }
    }

    fn interpreter(&mut self, interp: &str, args: &[Word], stdin: Option<String>, depth: usize) {
        let mut k = 0;
        let mut code: Vec<String> = Vec::new();
        while k < args.len() {
            let v = args[k].value.as_str();
            if let Some(c) = v
                .strip_prefix("--eval=")
                .or_else(|| v.strip_prefix("--print="))
            {
                code.push(c.to_string());
                k += 1;
                continue;
            }
            let short = v.starts_with('-') && !v.starts_with("--") && v.len() > 1;
            let is_code = match interp {
                "python" => short && v.ends_with('c'),
                "perl" => short && (v.ends_with('e') || v.ends_with('E')),
                "node" => {
                    matches!(v, "--eval" | "--print")
                        || (short && (v.ends_with('e') || v.ends_with('p')))
                }
                "php" => matches!(v, "-r" | "-B" | "-R" | "-E" | "-F"),
                _ => v == "-e",
            };
            if is_code {
                if let Some(c) = args.get(k + 1) {
                    code.push(c.value.clone());
                }
                k += 2;
                if interp == "python" {
                    break;
                }
                continue;
            }
            if v == "-m" || v == "--" {
                k += if v == "-m" { 2 } else { 1 };
                break;
            }
            if !v.starts_with('-') {
                break;
            }
            k += 1;
        }
        let extra: Vec<String> = args
            .get(k..)
            .unwrap_or_default()
            .iter()
            .map(|w| w.value.clone())
            .collect();
        if !code.is_empty() {
            self.inline_code(interp, &code.join("\n"), &extra, depth);
        } else if let Some(file) = extra.first() {
            let pos = extra.get(1..).unwrap_or_default().to_vec();
            self.run_file(file, Some(interp), pos, depth);
        } else if let Some(code) = stdin {
            // `python3 <<EOF`, `… | node`: stdin is the program.
            self.inline_code(interp, &code, &[], depth);
        }
    }

    /// Inline code: string literals of code that runs commands are analysed as command
    /// lines (joined too: `["rm","-rf","/"]`, `"r"+"m -rf /"`); deletions of system
    /// directories and evaluated downloads are refused; allowlist mode refuses any call
    /// the guard cannot vouch for.
    fn inline_code(&mut self, interp: &str, code: &str, extra: &[String], depth: usize) {
        let lower = code.to_ascii_lowercase();
        if code.contains("$(") || code.contains("${subst}") || code.contains("${xargs}") {
            self.unparsed(&format!("inline {interp} code produced by a command"));
        }
        let literals = string_literals(code);
        if RUN_MARKERS.iter().any(|m| lower.contains(m)) {
            for lit in &literals {
                self.line(lit, depth + 1);
            }
            if literals.len() > 1 {
                self.line(&literals.concat(), depth + 1);
                self.line(&literals.join(" "), depth + 1);
            }
            for e in extra {
                self.line(e, depth + 1);
            }
            if OBFUSCATION_MARKERS.iter().any(|m| lower.contains(m)) {
                self.finding(
                    FindingScope::Always,
                    ExecCategory::EvalDecode,
                    "inline code building the command it runs",
                    format!("inline {interp} code runs a command it builds from encoded or computed text"),
                );
            }
        }
        if let Some(m) = DELETE_MARKERS.iter().find(|m| lower.contains(*m)) {
            let computed_home = ["expanduser", "environ", "getenv", "env[", "homedir", "home"]
                .iter()
                .any(|h| lower.contains(h));
            let rootish = literals.iter().chain(extra).any(|l| is_rootish(l));
            if rootish || computed_home || (literals.is_empty() && extra.is_empty()) {
                self.finding(
                    FindingScope::Always,
                    ExecCategory::Destructive,
                    "inline code deleting a system or unknown directory",
                    format!("inline {interp} code calls {m} on /, ~, a system directory or a path it computes"),
                );
            }
        }
        if DYNAMIC_RE.is_match(&lower) && NETWORK_RE.is_match(&lower) {
            self.finding(
                FindingScope::Always,
                ExecCategory::DownloadExec,
                "inline code evaluating a download",
                format!("inline {interp} code evaluates code it fetches from the network"),
            );
        }
        if let Some(m) = ALLOWLIST_DANGER_RE.find(&lower) {
            let call = m.as_str().to_string();
            self.finding(
                FindingScope::Allowlist,
                ExecCategory::NotAllowlisted,
                "inline code with a dangerous call",
                format!("inline {interp} code calls {call}, which the allowlist cannot vouch for"),
            );
        }
    }

    fn awk(&mut self, args: &[Word], depth: usize) {
        let mut k = 0;
        let mut code = None;
        while k < args.len() {
            let v = args[k].value.as_str();
            if matches!(v, "-e" | "--source") {
                code = args.get(k + 1).map(|w| w.value.clone());
                break;
            }
            if matches!(
                v,
                "-F" | "-v" | "-f" | "--file" | "--assign" | "--field-separator"
            ) {
                k += 2;
                continue;
            }
            if !v.starts_with('-') {
                code = Some(v.to_string());
                break;
            }
            k += 1;
        }
        let Some(code) = code else { return };
        let lower = code.to_ascii_lowercase();
        if AWK_RUN_RE.is_match(&lower) {
            for lit in string_literals(&code) {
                self.line(&lit, depth + 1);
            }
            self.finding(
                FindingScope::Allowlist,
                ExecCategory::NotAllowlisted,
                "awk running a command",
                "awk code runs a command (system, getline or a pipe), which the allowlist cannot vouch for".into(),
            );
        }
    }

    fn git(&mut self, args: &[Word], depth: usize) {
        let mut k = 0;
        while k < args.len() {
            let v = args[k].value.as_str();
            let kv = if v == "-c" || v == "--config-env" {
                k += 1;
                args.get(k).map(|w| w.value.clone())
            } else if let Some(r) = v.strip_prefix("--config-env=") {
                Some(r.to_string())
            } else {
                v.strip_prefix("-c")
                    .filter(|r| !r.is_empty())
                    .map(str::to_string)
            };
            if let Some(kv) = kv {
                self.git_config(&kv, depth);
                k += 1;
                continue;
            }
            if v.starts_with("--exec-path=") || v == "--exec-path" && args.len() > k + 1 {
                self.git_injection(
                    "--exec-path",
                    "git --exec-path runs git commands from a directory of the caller's choice",
                );
            }
            if matches!(
                v,
                "-C" | "--git-dir" | "--work-tree" | "--namespace" | "--super-prefix"
            ) {
                k += 2;
                continue;
            }
            if !v.starts_with('-') {
                break;
            }
            k += 1;
        }
        let sub = args
            .get(k)
            .map(|w| w.value.to_ascii_lowercase())
            .unwrap_or_default();
        let rest: Vec<String> = args
            .get(k + 1..)
            .unwrap_or_default()
            .iter()
            .map(|w| w.value.clone())
            .collect();
        let mut j = 0;
        while j < rest.len() {
            let v = rest[j].as_str();
            let next = rest.get(j + 1).cloned();
            let value_of = |opt: &str| -> Option<String> {
                if v == opt {
                    next.clone()
                } else {
                    v.strip_prefix(opt)
                        .and_then(|r| r.strip_prefix('='))
                        .map(str::to_string)
                }
            };
            if v.to_ascii_lowercase().starts_with("ext::")
                || v.to_ascii_lowercase().starts_with("fd::")
            {
                self.line(v.get(5..).unwrap_or_default(), depth + 1);
                self.git_injection("ext:: transport", "a git ext:: URL runs a command");
            }
            if v.starts_with("--upload-pack")
                || v.starts_with("--receive-pack")
                || (sub == "clone" && v == "-u")
                || (sub != "rebase" && v.starts_with("--exec") && !v.starts_with("--exec-path"))
            {
                self.git_injection(
                    "git --upload-pack/--receive-pack/--exec",
                    "the option names a program git runs",
                );
            }
            if v.starts_with("--template") || (sub == "clone" && v.starts_with("--config")) {
                if v.starts_with("--template") {
                    self.git_injection(
                        "git --template",
                        "a template directory installs hooks that git runs",
                    );
                } else if let Some(kv) = value_of("--config") {
                    self.git_config(&kv, depth);
                }
            }
            if sub == "clone" && v == "-c" {
                if let Some(kv) = next.clone() {
                    self.git_config(&kv, depth);
                }
            }
            if sub == "rebase" {
                if let Some(cmd) = value_of("--exec").or_else(|| value_of("-x")) {
                    self.line(&cmd, depth + 1);
                }
            }
            if sub == "difftool" {
                if let Some(cmd) = value_of("--extcmd").or_else(|| value_of("-x")) {
                    self.line(&cmd, depth + 1);
                }
            }
            if sub == "grep" {
                if let Some(cmd) = value_of("--open-files-in-pager") {
                    self.line(&cmd, depth + 1);
                } else if let Some(cmd) = v.strip_prefix("-O").filter(|c| !c.is_empty()) {
                    self.line(cmd, depth + 1);
                }
            }
            if sub == "filter-branch" && v.starts_with("--") && v.ends_with("-filter") {
                if let Some(cmd) = next.clone() {
                    self.line(&cmd, depth + 1);
                }
            }
            j += 1;
        }
        match sub.as_str() {
            "bisect" if rest.first().map(String::as_str) == Some("run") => {
                self.line(&shell_join(&rest[1..]), depth + 1);
            }
            "submodule" => {
                if let Some(p) = rest.iter().position(|r| r == "foreach") {
                    let cmd: Vec<String> = rest[p + 1..]
                        .iter()
                        .filter(|r| !r.starts_with("--"))
                        .cloned()
                        .collect();
                    self.line(&cmd.join(" "), depth + 1);
                }
            }
            "config" => {
                let reading = rest.iter().any(|r| {
                    r.starts_with("--get")
                        || r.starts_with("--list")
                        || r == "-l"
                        || r.starts_with("--unset")
                        || r.starts_with("--show")
                        || r == "--name-only"
                });
                let mut plain = rest.iter().filter(|r| !r.starts_with('-'));
                let mut key = plain.next().cloned();
                if matches!(key.as_deref(), Some("set")) {
                    key = plain.next().cloned();
                } else if matches!(key.as_deref(), Some("get" | "list" | "unset")) {
                    key = None;
                }
                if let (false, Some(key)) = (reading, key) {
                    if GIT_EXEC_KEY_RE.is_match(&key.to_ascii_lowercase()) {
                        self.git_injection(
                            "git config of a key that runs a program",
                            &format!("git config {key} makes git run a program"),
                        );
                    }
                }
            }
            _ => {}
        }
    }

    /// `key=value` given to git on the command line (or through the environment).
    fn git_config(&mut self, kv: &str, depth: usize) {
        let (key, value) = kv.split_once('=').unwrap_or((kv, ""));
        let key = key.to_ascii_lowercase();
        if GIT_EXEC_KEY_RE.is_match(&key) {
            let command = value.strip_prefix('!').unwrap_or(value);
            if !command.trim().is_empty() {
                self.line(command, depth + 1);
            }
            self.git_injection(
                "git -c with a key that runs a program",
                &format!("git configuration {key} set on the command line makes git run a program"),
            );
        }
    }

    fn git_injection(&mut self, rule: &'static str, message: &str) {
        self.finding(
            FindingScope::Always,
            ExecCategory::CommandInjection,
            rule,
            message.to_string(),
        );
    }

    /// `NAME=value` given to a command: variables whose value is a command another
    /// program runs (`GIT_SSH_COMMAND`, `PAGER`, …) are analysed as command lines.
    fn command_assigns(&mut self, assigns: &[String], depth: usize) {
        for a in assigns {
            let Some((name, value)) = a.split_once('=') else {
                continue;
            };
            let upper = name.to_ascii_uppercase();
            if COMMAND_VARS.contains(&upper.as_str()) {
                if !value.trim().is_empty() {
                    self.line(value, depth + 1);
                }
            } else if matches!(upper.as_str(), "PS1" | "PS2" | "PS4" | "PROMPT_COMMAND") {
                self.expansions_only(value, depth);
                if upper == "PROMPT_COMMAND" {
                    self.line(value, depth + 1);
                }
            } else if matches!(upper.as_str(), "BASH_ENV" | "ENV") {
                self.run_file(value, Some("sh"), Vec::new(), depth);
            } else if upper == "GIT_CONFIG_PARAMETERS" {
                for part in value.split_whitespace() {
                    self.git_config(&part.replace('\'', ""), depth);
                }
            } else if upper.starts_with("GIT_CONFIG_KEY_") {
                self.git_config(&format!("{value}="), depth);
            } else if matches!(
                upper.as_str(),
                "GIT_EXEC_PATH" | "GIT_TEMPLATE_DIR" | "GIT_CONFIG_GLOBAL" | "GIT_CONFIG_SYSTEM"
            ) {
                self.git_injection(
                    "git environment that runs programs",
                    &format!("{upper} makes git run programs or hooks of the caller's choice"),
                );
            }
        }
    }

    /// Remembers files this command writes (redirections, `tee`, downloads, copies).
    fn track_writes(
        &mut self,
        program: &str,
        words: &[Word],
        redirs: &[(&'static str, Option<Word>)],
        piped: Option<&str>,
    ) {
        let vals: Vec<String> = words.iter().skip(1).map(|w| w.value.clone()).collect();
        let stdin = redirs
            .iter()
            .find_map(|(op, t)| match (*op, t) {
                ("<<<" | "<<" | "<<-", Some(t)) => Some(t.value.clone()),
                _ => None,
            })
            .or_else(|| piped.map(str::to_string));
        let produced = literal_stdout(program, words, redirs).or_else(|| {
            if program == "cat" && vals.is_empty() {
                stdin.clone()
            } else {
                None
            }
        });
        for (op, t) in redirs {
            if matches!(*op, ">" | ">>" | ">|" | "&>" | "&>>" | "<>") {
                if let Some(t) = t {
                    self.record_write(&t.value, produced.clone(), *op == ">>");
                }
            }
        }
        let plain: Vec<&String> = vals.iter().filter(|v| !v.starts_with('-')).collect();
        match program {
            "tee" => {
                for f in &plain {
                    self.record_write(f, stdin.clone(), vals.iter().any(|v| v == "-a"));
                }
            }
            "cp" | "mv" | "install" | "ln" | "rsync" | "scp" => {
                if let Some(f) = plain.last() {
                    self.record_write(f, None, false);
                }
            }
            "dd" => {
                for v in &vals {
                    if let Some(f) = v.strip_prefix("of=") {
                        self.record_write(f, None, false);
                    }
                }
            }
            "curl" | "wget" => {
                for (j, v) in vals.iter().enumerate() {
                    let short = v.starts_with('-') && !v.starts_with("--");
                    let takes_file = if program == "curl" {
                        v == "--output" || (short && v.ends_with('o'))
                    } else {
                        v == "--output-document" || (short && v.ends_with('O'))
                    };
                    let out = if takes_file {
                        vals.get(j + 1).cloned()
                    } else {
                        v.strip_prefix("--output=")
                            .or_else(|| v.strip_prefix("--output-document="))
                            .map(str::to_string)
                    };
                    if let Some(f) = out {
                        self.record_write(&f, None, false);
                        self.downloaded.insert(file_key(&f).to_string());
                    }
                }
                if vals.iter().any(|v| v == "-O" || v == "--remote-name") || program == "wget" {
                    // The file is named after the URL: the last path segment.
                    for v in &vals {
                        if v.contains("://") {
                            if let Some(name) = v.rsplit('/').next().filter(|n| !n.is_empty()) {
                                self.record_write(name, None, false);
                                self.downloaded.insert(name.to_string());
                            }
                        }
                    }
                }
            }
            _ => {}
        }
    }

    fn record_write(&mut self, path: &str, content: Option<String>, append: bool) {
        let key = file_key(path).to_string();
        let lower = key.to_ascii_lowercase();
        if lower.contains(".git/hooks/")
            || lower.ends_with(".git/config")
            || lower.ends_with(".git/hooks")
        {
            self.git_injection(
                "write to a git hook or git config",
                &format!("writing {key} makes git run code of the caller's choice"),
            );
        }
        let merged = match (append, self.written.get(&key)) {
            (true, Some(Some(old))) => content.map(|c| format!("{old}{c}")),
            (true, Some(None)) => None,
            _ => content,
        };
        self.written.insert(key, merged);
    }
}

/// Inline code containing one of these runs other programs.
const RUN_MARKERS: &[&str] = &[
    "system",
    "popen",
    "exec",
    "spawn",
    "subprocess",
    "`",
    "passthru",
    "shell_exec",
    "child_process",
    "proc_open",
    "pty",
    "%x",
    "io.popen",
];

/// Signs that inline code computes the command it runs.
const OBFUSCATION_MARKERS: &[&str] = &[
    "chr(",
    "fromcharcode",
    "\\x",
    "\\u00",
    "b64decode",
    "base64",
    "decode(",
    "[::-1]",
    "reverse",
    "bytes.fromhex",
    "unhexlify",
    "pack(",
    "atob(",
    "buffer.from",
    "rot13",
];

/// Calls that delete directory trees or files.
const DELETE_MARKERS: &[&str] = &[
    "rmtree",
    "remove_tree",
    "rm_rf",
    "rm_r",
    "fileutils.rm",
    "rmsync",
    "rmdirsync",
    "fs.rm(",
    "fs.rmdir",
    "fs.promises.rm",
    "rimraf",
    "unlink",
    "os.remove",
    "os.rmdir",
    "removedirs",
    "rmdir(",
    "path.unlink",
    "deltree",
];

/// Options whose value is a command line the program runs.
const COMMAND_OPTIONS: &[(&str, &[&str])] = &[
    (
        "tar",
        &[
            "--checkpoint-action",
            "--to-command",
            "--use-compress-program",
            "-I",
            "--info-script",
            "--new-volume-script",
            "-F",
        ],
    ),
    ("zip", &["-TT", "--unzip-command"]),
    ("rsync", &["-e", "--rsh", "--rsync-path"]),
    ("ssh", &[]),
    ("scp", &["-S"]),
    ("sftp", &["-S"]),
    ("less", &[]),
    ("man", &["-P", "--pager"]),
    ("vim", &["-c", "--cmd"]),
    ("vi", &["-c", "--cmd"]),
    ("nvim", &["-c", "--cmd"]),
    ("script", &[]),
];

/// `1,5`, `$`, `/re/`, `/re/!`: the address before a sed command.
fn strip_sed_address(cmd: &str) -> &str {
    let mut c = cmd;
    for _ in 0..2 {
        c = c.trim_start();
        if let Some(r) = c.strip_prefix('/') {
            let mut esc = false;
            let mut end = None;
            for (i, ch) in r.char_indices() {
                if esc {
                    esc = false;
                } else if ch == '\\' {
                    esc = true;
                } else if ch == '/' {
                    end = Some(i);
                    break;
                }
            }
            c = match end {
                Some(i) => &r[i + 1..],
                None => r,
            };
        } else {
            c = c.trim_start_matches(|ch: char| ch.is_ascii_digit() || ch == '$' || ch == '~');
        }
        c = c.trim_start();
        if let Some(r) = c.strip_prefix(',') {
            c = r;
        } else {
            break;
        }
    }
    c.trim_start().trim_start_matches('!').trim_start()
}

/// `s/re/repl/flags` with the `e` flag: the replacement is run as a command.
fn sed_substitution_command(cmd: &str) -> Option<String> {
    let mut chars = cmd.chars();
    chars.next();
    let delim = chars.next()?;
    if delim.is_alphanumeric() || delim.is_whitespace() {
        return None;
    }
    let mut parts = vec![String::new()];
    let mut esc = false;
    for ch in chars {
        if esc {
            esc = false;
            if ch != delim {
                parts.last_mut()?.push('\\');
            }
            parts.last_mut()?.push(ch);
        } else if ch == '\\' {
            esc = true;
        } else if ch == delim && parts.len() < 3 {
            parts.push(String::new());
        } else {
            parts.last_mut()?.push(ch);
        }
    }
    let flags = parts.get(2)?;
    flags
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric())
        .any(|c| c == 'e')
        .then(|| parts[1].clone())
}

/// Variables whose value is a command line that some program runs.
const COMMAND_VARS: &[&str] = &[
    "GIT_SSH_COMMAND",
    "GIT_SSH",
    "GIT_PAGER",
    "PAGER",
    "GIT_EDITOR",
    "EDITOR",
    "VISUAL",
    "GIT_EXTERNAL_DIFF",
    "GIT_ASKPASS",
    "SSH_ASKPASS",
    "GIT_PROXY_COMMAND",
    "GIT_SEQUENCE_EDITOR",
    "LESSOPEN",
    "LESSCLOSE",
    "MANPAGER",
    "SYSTEMD_PAGER",
    "BROWSER",
];

static DYNAMIC_RE: LazyLock<Regex> = LazyLock::new(|| {
    regex(
        r"(?:\beval\b|\bexec\b|\bcompile\s*\(|new\s+function|\bfunction\s*\(|vm\.run|instance_eval|\bload\s*\(|\bloadstring\b|\brequire\s*\(\s*['\x22]https?:)",
    )
});

static NETWORK_RE: LazyLock<Regex> = LazyLock::new(|| {
    regex(
        r"(?:urlopen|urllib|requests\.|http\.client|httplib|\bfetch\s*\(|net::http|open-uri|uri\.open|lwp|\bhttps?://|file_get_contents\s*\(\s*['\x22]https?|curl_exec|socket|axios)",
    )
});

static ALLOWLIST_DANGER_RE: LazyLock<Regex> = LazyLock::new(|| {
    regex(
        r"(?:os\.system|\bsystem\b|popen|subprocess|\bspawn\w*|\bexec\w*|\beval\b|\bcompile\s*\(|__import__|importlib|child_process|\bpty\b|passthru|shell_exec|proc_open|pcntl_exec|`|%x|rmtree|remove_tree|rm_rf|rmsync|rmdirsync|unlink\w*|os\.remove|rmdir|removedirs|socket|urlopen|urllib|requests\.|http\.client|\bfetch\s*\(|net::http|open-uri|\blwp\b|ctypes|\bffi\b|setuid|os\.chmod|os\.chown|\bchmod\s*\(|\bchown\s*\(|os\.kill|process\.kill|getattr\s*\(|\bvm\.|new\s+function|\bfunction\s*\()",
    )
});

static AWK_RUN_RE: LazyLock<Regex> = LazyLock::new(|| {
    regex(
        r#"(?:\bsystem\s*\(|\|\s*getline|\|&|\|\s*"|\|\s*[a-z_]+\s*[;}]|\bgetline\s*<\s*"/dev/(?:tcp|udp))"#,
    )
});

/// Config keys that make git run a program or code of the caller's choice.
static GIT_EXEC_KEY_RE: LazyLock<Regex> = LazyLock::new(|| {
    regex(
        r"^(?:alias\..+|core\.(?:sshcommand|pager|editor|hookspath|fsmonitor|gitproxy|askpass|alternaterefscommand|worktree)|credential\..*helper|.+\.textconv|diff\.external|diff\..+\.command|filter\..+|merge\..+\.driver|sequence\.editor|gpg\.(?:.+\.)?program|pager\..+|uploadpack\.packobjectshook|protocol\..*allow|remote\..+\.(?:uploadpack|receivepack|vcs)|include\.path|includeif\..+|ssh\.variant|url\..+|.+\.cmd|.+\.path|interactive\.difffilter|web\.browser|sendemail\..+|receive\.procreceiverefs|init\.templatedir|hook\..+|.+\.hook|man\..+|difftool\..+|mergetool\..+)$",
    )
});

fn regex(re: &str) -> Regex {
    // Static tables: an invalid regex is a programming error caught by every unit test.
    Regex::new(re).unwrap_or_else(|e| panic!("bad exec guard regex {re}: {e}"))
}

/// Which interpreter (of those whose inline code the guard reads) `program` is.
fn interpreter(program: &str) -> Option<&'static str> {
    let base = program.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
    match base {
        "python" | "pypy" => Some("python"),
        "perl" => Some("perl"),
        "ruby" | "irb" => Some("ruby"),
        "node" | "nodejs" | "deno" | "bun" => Some("node"),
        "php" => Some("php"),
        "lua" | "luajit" => Some("lua"),
        _ => None,
    }
}

fn file_key(path: &str) -> &str {
    let mut p = path;
    while let Some(r) = p.strip_prefix("./") {
        p = r;
    }
    p
}

/// Quotes `v` for a shell unless it is made of harmless characters only.
fn shell_quote(v: &str) -> String {
    if !v.is_empty()
        && v.chars().all(|c| {
            c.is_ascii_alphanumeric()
                || matches!(
                    c,
                    '_' | '.' | '/' | '~' | '=' | ':' | ',' | '+' | '@' | '%' | '^' | '-'
                )
        })
    {
        v.to_string()
    } else {
        format!("'{}'", v.replace('\'', "'\\''"))
    }
}

fn shell_join(vals: &[String]) -> String {
    vals.iter()
        .map(|v| shell_quote(v))
        .collect::<Vec<_>>()
        .join(" ")
}

/// `/`, `~` or a top-level system directory (what `rm -rf` must never get).
fn is_rootish(path: &str) -> bool {
    let p = path.trim();
    let p = p.strip_suffix("/*").unwrap_or(p);
    let p = if p.is_empty() { "/" } else { p };
    if !(p.starts_with('/') || p.starts_with('~')) {
        return false;
    }
    let n = normalize_path(p);
    const TOP: &[&str] = &[
        "bin", "boot", "dev", "etc", "home", "lib", "lib32", "lib64", "libx32", "opt", "root",
        "sbin", "srv", "usr", "var", "sys", "proc", "snap", "mnt", "media", "run", "tmp",
    ];
    n == "/" || n == "~" || n.strip_prefix('/').is_some_and(|r| TOP.contains(&r))
}

/// What a command writes to stdout when that is literal text (`echo …`, `printf …`,
/// `cat <<EOF`), so that `echo 'rm -rf /' | sh` is read.
fn literal_stdout(
    program: &str,
    words: &[Word],
    redirs: &[(&'static str, Option<Word>)],
) -> Option<String> {
    let vals: Vec<&str> = words.iter().skip(1).map(|w| w.value.as_str()).collect();
    match program {
        "echo" => {
            let mut k = 0;
            let mut escapes = false;
            while k < vals.len() && matches!(vals[k], "-n" | "-e" | "-E" | "-ne" | "-en") {
                escapes |= vals[k].contains('e');
                k += 1;
            }
            let text = vals[k..].join(" ");
            Some(if escapes { decode_ansi_c(&text) } else { text } + "\n")
        }
        "printf" => {
            let (fmt, rest) = vals.split_first()?;
            let mut out = decode_ansi_c(fmt);
            for r in rest {
                out.push('\n');
                out.push_str(&decode_ansi_c(r));
            }
            Some(out)
        }
        "cat" if vals.is_empty() => redirs.iter().find_map(|(op, t)| match (*op, t) {
            ("<<<" | "<<" | "<<-", Some(t)) => Some(t.value.clone()),
            _ => None,
        }),
        _ => None,
    }
}

/// Function definitions in `src` (`f() { … }`, `function f { … }`): name → body. Quotes
/// are not honoured here: a look-alike in a string only adds analysis.
fn find_functions(src: &str) -> Vec<(String, String)> {
    static FN_RE: LazyLock<Regex> = LazyLock::new(|| {
        regex(
            r"(?:^|[\s;&|(){}])(?:function\s+([A-Za-z_:.][\w:.-]*)\s*(?:\(\s*\))?|([A-Za-z_:.][\w:.-]*)\s*\(\s*\))\s*([{(])",
        )
    });
    let chars: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    for c in FN_RE.captures_iter(src) {
        let Some(name) = c.get(1).or_else(|| c.get(2)) else {
            continue;
        };
        let Some(open) = c.get(3) else { continue };
        let start = src[..open.end()].chars().count();
        let body = if open.as_str() == "(" {
            matching_paren(&chars, start).0
        } else {
            let mut depth = 1;
            let mut j = start;
            let mut quote: Option<char> = None;
            while j < chars.len() {
                let ch = chars[j];
                match (quote, ch) {
                    (Some(q), c) if c == q => quote = None,
                    (Some(_), _) => {}
                    (None, '\'' | '"') => quote = Some(ch),
                    (None, '\\') => j += 1,
                    (None, '{') => depth += 1,
                    (None, '}') => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    _ => {}
                }
                j += 1;
            }
            chars[start..j.min(chars.len())].iter().collect()
        };
        out.push((name.as_str().to_string(), body));
    }
    out
}

/// Skips option words (and the values of `with_value` options) starting at `from`.
fn skip_options(words: &[Word], from: usize, with_value: &[&str], numeric_first: bool) -> usize {
    let mut k = from;
    while k < words.len() {
        let v = words[k].value.as_str();
        if v == "--" {
            return k + 1;
        }
        if !v.starts_with('-') || v == "-" {
            break;
        }
        k += if with_value.contains(&v) { 2 } else { 1 };
    }
    // `taskset 0x3 cmd`, `chrt 10 cmd`: a leading numeric argument.
    if numeric_first
        && words.get(k).is_some_and(|w| {
            w.value
                .chars()
                .all(|c| c.is_ascii_hexdigit() || c == 'x' || c == ',')
        })
    {
        k += 1;
    }
    k
}

fn flush_word(toks: &mut Vec<Tok>, cur: &mut Option<Word>) {
    if let Some(w) = cur.take() {
        // `{rm,-rf,/}` (unquoted, the whole word) is brace expansion: three words.
        let r = &w.value;
        if !w.quoted && r.len() > 2 && r.starts_with('{') && r.ends_with('}') && r.contains(',') {
            let inner = &r[1..r.len() - 1];
            if !inner.contains(['{', '}']) {
                for part in inner.split(',') {
                    toks.push(Tok::Word(Word {
                        value: part.to_string(),
                        render: part.to_string(),
                        quoted: false,
                        from_var: false,
                    }));
                }
                return;
            }
        }
        toks.push(Tok::Word(w));
    }
}

fn is_assignment(v: &str) -> bool {
    match v.split_once('=') {
        Some((name, _)) => {
            !name.is_empty()
                && name
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        }
        None => false,
    }
}

/// `/usr/bin/RM` → `rm`. A name that is only a path (`/`) stays as it is.
pub(crate) fn program_name(value: &str) -> String {
    let trimmed = value.trim_end_matches('/');
    let base = trimmed.rsplit('/').next().unwrap_or(trimmed);
    if base.is_empty() {
        value.to_lowercase()
    } else {
        base.to_lowercase()
    }
}

/// Finds the `)` that closes the parenthesis opened just before `start`, honouring quotes
/// and nesting. Returns the inner text and the index after the `)` (or the end).
fn matching_paren(chars: &[char], start: usize) -> (String, usize, bool) {
    let mut depth = 1;
    let mut j = start;
    let mut in_sq = false;
    let mut in_dq = false;
    while j < chars.len() {
        let c = chars[j];
        if in_sq {
            if c == '\'' {
                in_sq = false;
            }
        } else if c == '\\' {
            j += 1;
        } else if in_dq {
            if c == '"' {
                in_dq = false;
            }
        } else if c == '\'' {
            in_sq = true;
        } else if c == '"' {
            in_dq = true;
        } else if c == '(' {
            depth += 1;
        } else if c == ')' {
            depth -= 1;
            if depth == 0 {
                return (chars[start..j].iter().collect(), j + 1, true);
            }
        }
        j += 1;
    }
    (
        chars[start.min(chars.len())..].iter().collect(),
        chars.len(),
        false,
    )
}

/// Finds the `}` that closes a `${` opened just before `start`, honouring quotes and nested
/// `${…}`, `$(…)` and backticks. Returns the inner text, the index after the `}` and whether
/// it was closed.
fn matching_brace(chars: &[char], start: usize) -> (String, usize, bool) {
    let mut j = start;
    let mut depth = 1;
    let mut in_sq = false;
    let mut in_dq = false;
    while j < chars.len() {
        let c = chars[j];
        if in_sq {
            if c == '\'' {
                in_sq = false;
            }
        } else if c == '\\' {
            j += 1;
        } else if c == '$' && chars.get(j + 1) == Some(&'(') {
            let (_, next, _) = matching_paren(chars, j + 2);
            j = next;
            continue;
        } else if c == '`' {
            j += 1;
            while j < chars.len() && chars[j] != '`' {
                j += if chars[j] == '\\' { 2 } else { 1 };
            }
        } else if c == '"' {
            in_dq = !in_dq;
        } else if c == '\'' && !in_dq {
            in_sq = true;
        } else if c == '{' && j > 0 && chars[j - 1] == '$' {
            depth += 1;
        } else if c == '}' {
            depth -= 1;
            if depth == 0 {
                return (chars[start..j].iter().collect(), j + 1, true);
            }
        }
        j += 1;
    }
    (
        chars[start.min(chars.len())..].iter().collect(),
        chars.len(),
        false,
    )
}

fn decode_ansi_c(raw: &str) -> String {
    let chars: Vec<char> = raw.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        if chars[i] != '\\' || i + 1 >= chars.len() {
            out.push(chars[i]);
            i += 1;
            continue;
        }
        let n = chars[i + 1];
        i += 2;
        match n {
            'n' => out.push('\n'),
            't' => out.push('\t'),
            'r' => out.push('\r'),
            'x' | 'u' | 'U' => {
                let max = match n {
                    'x' => 2,
                    'u' => 4,
                    _ => 8,
                };
                let hex: String = chars[i..]
                    .iter()
                    .take(max)
                    .take_while(|c| c.is_ascii_hexdigit())
                    .collect();
                i += hex.len();
                match u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32) {
                    Some(c) => out.push(c),
                    None => out.push(n),
                }
            }
            '0'..='7' => {
                let mut oct = String::from(n);
                oct.extend(
                    chars[i..]
                        .iter()
                        .copied()
                        .take(2)
                        .take_while(|c| ('0'..='7').contains(c)),
                );
                i += oct.len() - 1;
                match u32::from_str_radix(&oct, 8).ok().and_then(char::from_u32) {
                    Some(c) => out.push(c),
                    None => out.push(n),
                }
            }
            other => out.push(other),
        }
    }
    out
}

/// Lexically tidies an absolute or home path (`//etc/./shadow` → `/etc/shadow`,
/// `~/` → `~`, `/etc/..` → `/`) so that spelling tricks do not dodge a path match.
fn normalize_path(word: &str) -> String {
    let (prefix, rest) = if let Some(r) = word.strip_prefix('~') {
        if !(r.is_empty() || r.starts_with('/')) {
            return word.to_string();
        }
        ("~", r)
    } else if word.starts_with('/') {
        ("/", word)
    } else {
        return word.to_string();
    };
    if rest.contains([SP, META]) {
        return word.to_string();
    }
    let mut parts: Vec<&str> = Vec::new();
    for p in rest.split('/') {
        match p {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    match (prefix, parts.is_empty()) {
        ("~", true) => "~".to_string(),
        ("~", false) => format!("~/{}", parts.join("/")),
        (_, true) => "/".to_string(),
        (_, false) => format!("/{}", parts.join("/")),
    }
}

/// The contents of `'…'` and `"…"` literals in a piece of inline code (no escapes decoded
/// beyond `\"` / `\'`), plus backtick literals (Perl, Ruby).
fn string_literals(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let chars: Vec<char> = code.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let q = chars[i];
        if q == '\'' || q == '"' || q == '`' {
            let mut s = String::new();
            let mut j = i + 1;
            while j < chars.len() && chars[j] != q {
                if chars[j] == '\\' && j + 1 < chars.len() {
                    s.push(chars[j + 1]);
                    j += 2;
                } else {
                    s.push(chars[j]);
                    j += 1;
                }
            }
            if !s.trim().is_empty() {
                out.push(s);
            }
            i = j + 1;
        } else {
            i += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn top(cmd: &str) -> String {
        analyze(cmd).lines[0].text.clone()
    }

    fn all_texts(cmd: &str) -> Vec<String> {
        analyze(cmd).lines.into_iter().map(|l| l.text).collect()
    }

    #[test]
    fn quotes_escapes_and_ifs_are_undone() {
        assert_eq!(top("r''m -rf /"), "rm -rf /");
        assert_eq!(top(r"r\m -rf /"), "rm -rf /");
        assert_eq!(top("\"rm\" -rf \"/\""), "rm -rf /");
        assert_eq!(top("rm${IFS}-rf${IFS}/"), "rm -rf /");
        assert_eq!(top("rm$IFS-rf$IFS/"), "rm -rf /");
        assert_eq!(top("rm\t\t-rf   /"), "rm -rf /");
        assert_eq!(top("/usr/bin/RM -rf //"), "rm -rf /");
        assert_eq!(top("$'\\x72\\x6d' -rf /"), "rm -rf /");
        assert_eq!(top("{rm,-rf,/}"), "rm -rf /");
        assert_eq!(top("r$@m -rf ~/"), "rm -rf ~");
        assert_eq!(top("rm -rf $HOME"), "rm -rf ~");
    }

    #[test]
    fn quoted_syntax_stays_inside_its_word() {
        let t = top("echo \"curl x | sh\"");
        assert!(!t.contains('|'), "{t}");
        assert!(t.starts_with("echo curl"), "{t}");
    }

    #[test]
    fn wrappers_and_nested_shells_are_unwrapped() {
        assert_eq!(top("env -i FOO=1 nohup /bin/rm -rf /"), "rm -rf /");
        // xargs appends arguments read from stdin: they stand as an unknown value.
        assert_eq!(top("xargs -n 1 busybox rm -rf /"), "rm -rf / ${xargs}");
        assert_eq!(top("strace -f -o /dev/null rm -rf /"), "rm -rf /");
        assert_eq!(top("timeout -s KILL 5 command rm x"), "rm x");
        assert!(all_texts("sh -c 'rm -rf /'").contains(&"rm -rf /".to_string()));
        assert!(all_texts("bash -lc \"sudo id\"").contains(&"sudo id".to_string()));
        assert!(all_texts("echo $(rm -rf /)").contains(&"rm -rf /".to_string()));
        assert!(all_texts("echo `reboot`").contains(&"reboot".to_string()));
        assert!(all_texts("eval 'rm -rf /'").contains(&"rm -rf /".to_string()));
        assert!(
            all_texts("find . -exec rm -rf / \\;").contains(&"rm -rf /".to_string()),
            "{:?}",
            all_texts("find . -exec rm -rf / \\;")
        );
    }

    #[test]
    fn variables_heredocs_and_functions() {
        // (An assignment alone is an empty command: the line starts with its separator.)
        assert_eq!(top("d=/usr; rm -rf $d"), "; rm -rf /usr");
        assert_eq!(top("d=/usr; rm -rf \"$d\""), "; rm -rf /usr");
        assert!(top("for d in a b; do echo $d; done").contains("echo a b"));
        assert_eq!(top("rm -rf ${d:-/}"), "rm -rf /");
        // A here-document is one word of data, not commands of the line.
        let a = analyze("cat > x <<EOF\nrm -rf /\nEOF\nbash x");
        assert_eq!(a.lines[0].commands.len(), 2, "{:?}", a.lines[0].text);
        let has = |cmd: &str, want: &str| all_texts(cmd).iter().any(|t| t.starts_with(want));
        assert!(has("cat > x <<EOF\nrm -rf /\nEOF\nbash x", "rm -rf /"));
        assert!(has("f() { rm -rf \"$1\"; }; f /usr", "rm -rf /usr"));
        assert!(has("echo ${x:-$(id)}", "id"));
    }

    #[test]
    fn separators_and_redirections() {
        assert_eq!(top("ls;rm -rf /&&reboot"), "ls ; rm -rf / && reboot");
        assert_eq!(
            top("echo x 2>/dev/null >> /etc/passwd"),
            "echo x > /dev/null >> /etc/passwd"
        );
        assert_eq!(top("cat <(curl x)"), "cat <(curl\u{E000}x)");
        assert_eq!(top("echo hi # rm -rf /"), "echo hi");
    }
}
