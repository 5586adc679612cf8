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

/// Stands for a quoted whitespace character inside one word.
pub(crate) const SP: char = '\u{E000}';
/// Stands for a quoted `|`, `;`, `&`, `<` or `>` inside one word.
pub(crate) const META: char = '\u{E001}';

/// Deeper nesting than this is refused: no legitimate command needs it, and it bounds the work.
const MAX_DEPTH: usize = 8;

/// Commands longer than this are refused rather than analysed (bounded work per call).
pub(crate) const MAX_COMMAND_CHARS: usize = 100_000;

const SHELLS: &[&str] = &[
    "sh", "bash", "dash", "zsh", "ksh", "ash", "mksh", "fish", "csh", "tcsh", "rbash", "yash",
];

const INTERPRETERS: &[&str] = &[
    "python", "python2", "python3", "perl", "ruby", "node", "nodejs", "php", "lua",
];

#[derive(Debug, Clone, Default)]
pub(crate) struct Analysis {
    /// The top-level command line first, then every nested one.
    pub lines: Vec<LineView>,
    /// Nesting went deeper than [`MAX_DEPTH`].
    pub too_deep: bool,
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
}

#[derive(Debug, Clone, Default)]
struct Word {
    /// What the shell would pass as the argument (quotes removed, escapes applied).
    value: String,
    /// `value` with quoted syntax characters masked (see [`SP`], [`META`]).
    render: String,
    /// Some part of the word was quoted or escaped (brace expansion then does not apply).
    quoted: bool,
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
    /// Analyses one command line (recursively) and returns its rendered text.
    fn line(&mut self, src: &str, depth: usize) -> String {
        if depth > MAX_DEPTH {
            self.out.too_deep = true;
            return String::new();
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
        for t in toks {
            match t {
                Tok::Sep(op) => {
                    flush(self, &mut seg, &mut text);
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
        let chars: Vec<char> = src.chars().collect();
        let mut toks = Vec::new();
        let mut cur: Option<Word> = None;
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
                    let (inner, next) = matching_paren(&chars, i + 2);
                    let rendered = self.line(&inner, depth + 1);
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
                // Arithmetic: keep as text, it runs nothing.
                let (inner, next) = matching_paren(chars, i + 2);
                let w = cur.get_or_insert_with(Word::default);
                for ch in format!("$(({inner})").chars() {
                    w.push(ch, true);
                }
                next
            }
            Some('(') => {
                let (inner, next) = matching_paren(chars, i + 2);
                self.substitution(&inner, cur, depth);
                next
            }
            Some('{') => {
                let mut j = i + 2;
                let mut name = String::new();
                while j < chars.len() && chars[j] != '}' {
                    name.push(chars[j]);
                    j += 1;
                }
                self.variable(&name, in_dq, toks, cur, true);
                j + 1
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
            || (name.len() == 1 && name.chars().all(|c| c.is_ascii_digit() && c != '0'))
        {
            // Positional parameters are empty in `sh -c`: `r$@m` is `rm`.
            let _ = cur.get_or_insert_with(Word::default);
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
                )
            {
                start += 1;
            } else if is_assignment(v) {
                assigns.push(words[start].render.to_ascii_lowercase());
                start += 1;
            } else {
                break;
            }
        }
        let mut words: Vec<Word> = words.split_off(start.min(words.len()));
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
                            k += 1;
                        } else {
                            break;
                        }
                    }
                    Some(k)
                }
                "command" | "builtin" | "nohup" | "unbuffer" | "setsid" | "time" | "stdbuf"
                | "exec" | "nice" | "ionice" | "chrt" | "taskset" => Some(skip_options(
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
                "xargs" => Some(skip_options(
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
                        "--replace",
                    ],
                    false,
                )),
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
        if words.is_empty() && redirs.is_empty() && assigns.is_empty() {
            return None;
        }
        let program = words
            .first()
            .map(|w| {
                if w.quoted && w.render.contains(['$', '<', '>']) {
                    // A computed program (`$(…)`, `<(…)`): keep the rendering.
                    w.render.clone()
                } else {
                    mask_all(&program_name(&w.value))
                }
            })
            .unwrap_or_default();
        self.nested(&program, &words, &redirs, depth);

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
        Some(CommandView {
            program,
            text,
            assigns,
        })
    }

    /// Code that a command hands to a shell is analysed as a command line of its own.
    fn nested(
        &mut self,
        program: &str,
        words: &[Word],
        redirs: &[(&'static str, Option<Word>)],
        depth: usize,
    ) {
        let args = words.get(1..).unwrap_or_default();
        if SHELLS.contains(&program) || program == "su" {
            let mut k = 0;
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
                } else if is_c {
                    if let Some(script) = args.get(k + 1) {
                        self.line(&script.value, depth + 1);
                    }
                    break;
                }
                k += 1;
            }
            // `bash <<< 'cmd'`: a here-string fed to a shell is a command line.
            for (op, target) in redirs {
                if *op == "<<<" {
                    if let Some(t) = target {
                        self.line(&t.value, depth + 1);
                    }
                }
            }
        } else if program == "eval" {
            let script: Vec<&str> = args.iter().map(|w| w.value.as_str()).collect();
            self.line(&script.join(" "), depth + 1);
        } else if program == "find" {
            // `find … -exec cmd {} ;`
            let mut k = 0;
            while k < args.len() {
                if matches!(
                    args[k].value.as_str(),
                    "-exec" | "-execdir" | "-ok" | "-okdir"
                ) {
                    let mut cmd = Vec::new();
                    k += 1;
                    while k < args.len() && !matches!(args[k].value.as_str(), ";" | "+") {
                        cmd.push(args[k].value.clone());
                        k += 1;
                    }
                    self.line(&cmd.join(" "), depth + 1);
                }
                k += 1;
            }
        } else if INTERPRETERS
            .iter()
            .any(|i| program == *i || program.strip_prefix(i).is_some_and(is_version))
        {
            // Inline code that shells out: the string literals it contains are checked as
            // command lines (`os.system("rm -rf /")`).
            for (k, w) in args.iter().enumerate() {
                let is_code_flag = matches!(w.value.as_str(), "-c" | "-e" | "-E" | "-r")
                    || (w.value.starts_with('-') && w.value.ends_with('e') && w.value.len() <= 4);
                if !is_code_flag {
                    continue;
                }
                if let Some(code) = args.get(k + 1) {
                    let lower = code.value.to_ascii_lowercase();
                    if [
                        "system",
                        "popen",
                        "exec",
                        "spawn",
                        "subprocess",
                        "`",
                        "passthru",
                        "shell_exec",
                        "child_process",
                    ]
                    .iter()
                    .any(|s| lower.contains(s))
                    {
                        for lit in string_literals(&code.value) {
                            self.line(&lit, depth + 1);
                        }
                    }
                }
            }
        }
    }
}

fn is_version(s: &str) -> bool {
    !s.is_empty() && s.chars().all(|c| c.is_ascii_digit() || c == '.')
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
fn matching_paren(chars: &[char], start: usize) -> (String, usize) {
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
                return (chars[start..j].iter().collect(), j + 1);
            }
        }
        j += 1;
    }
    (
        chars[start.min(chars.len())..].iter().collect(),
        chars.len(),
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
        assert_eq!(top("xargs -n 1 busybox rm -rf /"), "rm -rf /");
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
