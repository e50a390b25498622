//! Field-by-field comparison with the `kafka-protocol` crate.
//!
//! That crate's messages print themselves with `Debug` (newtypes such as topic names print as
//! their inner value). [`canonical_debug`] turns such output into the same canonical text that
//! [`kaas_net::protocol::inspect::Value`] renders: struct names dropped, fields sorted by name,
//! `Some(x)` as `x`, `None` as `null`, `unknown_tagged_fields` left out.

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    /// Identifiers, numbers, UUIDs.
    Word(String),
    /// A quoted string or byte string, verbatim.
    Quoted(String),
    Punct(char),
}

fn tokenize(text: &str) -> Vec<Tok> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c == '"' || (c == 'b' && chars.get(i + 1) == Some(&'"')) {
            let start = i;
            i += if c == 'b' { 2 } else { 1 };
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
            out.push(Tok::Quoted(
                chars[start..i.min(chars.len())].iter().collect(),
            ));
        } else if "{}()[],:".contains(c) {
            out.push(Tok::Punct(c));
            i += 1;
        } else {
            let start = i;
            while i < chars.len() && !chars[i].is_whitespace() && !"{}()[],:\"".contains(chars[i]) {
                i += 1;
            }
            out.push(Tok::Word(chars[start..i].iter().collect()));
        }
    }
    out
}

struct Parser {
    toks: Vec<Tok>,
    pos: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos)
    }
    fn next(&mut self) -> Tok {
        let tok = self.toks[self.pos].clone();
        self.pos += 1;
        tok
    }
    fn expect(&mut self, c: char) {
        let tok = self.next();
        assert_eq!(tok, Tok::Punct(c), "at token {}", self.pos);
    }
    fn eat(&mut self, c: char) -> bool {
        if self.peek() == Some(&Tok::Punct(c)) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    /// Parses one value; `None` means "a map that is skipped".
    fn value(&mut self) -> Option<String> {
        match self.next() {
            Tok::Quoted(text) => Some(text),
            Tok::Punct('[') => {
                let mut items = Vec::new();
                while !self.eat(']') {
                    items.push(self.value().unwrap_or_default());
                    self.eat(',');
                }
                Some(format!("[{}]", items.join(", ")))
            }
            Tok::Punct('{') => {
                // A map (unknown tagged fields): skip to the matching brace.
                let mut depth = 1;
                while depth > 0 {
                    match self.next() {
                        Tok::Punct('{') => depth += 1,
                        Tok::Punct('}') => depth -= 1,
                        _ => {}
                    }
                }
                None
            }
            Tok::Word(word) => {
                if self.eat('{') {
                    let mut fields = Vec::new();
                    while !self.eat('}') {
                        let Tok::Word(name) = self.next() else {
                            panic!("field name expected at {}", self.pos)
                        };
                        self.expect(':');
                        let value = self.value();
                        self.eat(',');
                        if name != "unknown_tagged_fields" {
                            fields.push((name, value.unwrap_or_default()));
                        }
                    }
                    fields.sort();
                    let body: Vec<String> = fields
                        .into_iter()
                        .map(|(n, v)| format!("{n}: {v}"))
                        .collect();
                    Some(format!("{{{}}}", body.join(", ")))
                } else if self.eat('(') {
                    let mut items = Vec::new();
                    while !self.eat(')') {
                        items.push(self.value().unwrap_or_default());
                        self.eat(',');
                    }
                    assert_eq!(items.len(), 1, "{word}(..) with {} values", items.len());
                    items.pop()
                } else if word == "None" {
                    Some("null".to_string())
                } else {
                    Some(word)
                }
            }
            Tok::Punct(c) => panic!("unexpected {c:?} at {}", self.pos),
        }
    }
}

/// Canonical text of a `kafka-protocol` value's `Debug` output.
pub fn canonical_debug<T: std::fmt::Debug>(value: &T) -> String {
    let text = format!("{value:?}");
    let mut parser = Parser {
        toks: tokenize(&text),
        pos: 0,
    };
    let out = parser.value().unwrap_or_default();
    assert_eq!(parser.pos, parser.toks.len(), "trailing tokens in {text}");
    out
}
