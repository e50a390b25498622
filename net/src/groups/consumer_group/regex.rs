//! A small regular-expression matcher for topic subscriptions (a subset of the RE2 syntax
//! Kafka accepts): literals, `.`, classes `[a-z_]` and `[^...]`, `\d \w \s` and escaped
//! metacharacters, groups `(...)` / `(?:...)`, alternation `|`, and the quantifiers `*`, `+`,
//! `?`, `{n}`, `{n,}`, `{n,m}`. A pattern must match the whole topic name, as Kafka's
//! `matches()`. Matching is bounded, so a hostile pattern cannot stall the group.

use std::cell::Cell;

/// Longest pattern accepted.
const MAX_PATTERN: usize = 1024;
/// Most repetitions a `{n,m}` may ask for.
const MAX_REPEAT: u32 = 1000;
/// Matching steps before a match attempt gives up (as a non-match).
const STEP_BUDGET: usize = 200_000;

#[derive(Debug, Clone)]
enum Node {
    Char(char),
    Any,
    Class {
        negated: bool,
        ranges: Vec<(char, char)>,
    },
    Group(Vec<Vec<Node>>),
    Repeat {
        node: Box<Node>,
        min: u32,
        max: Option<u32>,
    },
}

/// A compiled pattern.
#[derive(Debug, Clone)]
pub struct Regex {
    alternatives: Vec<Vec<Node>>,
}

impl Regex {
    /// Compiles `pattern`, or says why it cannot.
    pub fn new(pattern: &str) -> Result<Regex, String> {
        if pattern.len() > MAX_PATTERN {
            return Err("pattern too long".to_owned());
        }
        let chars: Vec<char> = pattern.chars().collect();
        let mut parser = Parser {
            chars: &chars,
            pos: 0,
        };
        let alternatives = parser.alternation()?;
        if parser.pos != chars.len() {
            return Err(format!("unexpected `{}`", chars[parser.pos]));
        }
        Ok(Regex { alternatives })
    }

    /// Whether the whole of `text` matches.
    pub fn is_match(&self, text: &str) -> bool {
        let chars: Vec<char> = text.chars().collect();
        let steps = Cell::new(0);
        let group = Node::Group(self.alternatives.clone());
        match_seq(
            std::slice::from_ref(&group),
            &chars,
            0,
            &steps,
            &mut |end| end == chars.len(),
        )
    }
}

struct Parser<'a> {
    chars: &'a [char],
    pos: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn alternation(&mut self) -> Result<Vec<Vec<Node>>, String> {
        let mut alternatives = vec![self.sequence()?];
        while self.peek() == Some('|') {
            self.pos += 1;
            alternatives.push(self.sequence()?);
        }
        Ok(alternatives)
    }

    fn sequence(&mut self) -> Result<Vec<Node>, String> {
        let mut nodes = Vec::new();
        while let Some(c) = self.peek() {
            let atom = match c {
                '|' | ')' => break,
                '^' if self.pos == 0 => {
                    self.pos += 1;
                    continue;
                }
                '$' if self.pos + 1 == self.chars.len() => {
                    self.pos += 1;
                    continue;
                }
                '*' | '+' | '?' | '{' => {
                    return Err(format!("missing argument to repetition operator `{c}`"))
                }
                _ => self.atom()?,
            };
            nodes.push(self.quantified(atom)?);
        }
        Ok(nodes)
    }

    fn atom(&mut self) -> Result<Node, String> {
        let Some(c) = self.peek() else {
            return Err("unexpected end".to_owned());
        };
        self.pos += 1;
        match c {
            '.' => Ok(Node::Any),
            '(' => {
                if self.chars.get(self.pos..self.pos + 2) == Some(&['?', ':']) {
                    self.pos += 2;
                }
                let inner = self.alternation()?;
                if self.peek() != Some(')') {
                    return Err("missing closing )".to_owned());
                }
                self.pos += 1;
                Ok(Node::Group(inner))
            }
            '[' => self.class(),
            '\\' => self.escape(),
            '^' | '$' => Err(format!("unsupported anchor `{c}` inside the pattern")),
            _ => Ok(Node::Char(c)),
        }
    }

    fn escape(&mut self) -> Result<Node, String> {
        let Some(c) = self.peek() else {
            return Err("trailing backslash".to_owned());
        };
        self.pos += 1;
        let class = |ranges: Vec<(char, char)>, negated| Ok(Node::Class { negated, ranges });
        match c {
            'd' => class(vec![('0', '9')], false),
            'D' => class(vec![('0', '9')], true),
            'w' => class(word(), false),
            'W' => class(word(), true),
            's' => class(space(), false),
            'S' => class(space(), true),
            c if c.is_ascii_alphanumeric() => Err(format!("invalid escape `\\{c}`")),
            c => Ok(Node::Char(c)),
        }
    }

    fn class(&mut self) -> Result<Node, String> {
        let negated = self.peek() == Some('^');
        if negated {
            self.pos += 1;
        }
        let mut ranges = Vec::new();
        let mut first = true;
        loop {
            let Some(c) = self.peek() else {
                return Err("missing closing ]".to_owned());
            };
            self.pos += 1;
            if c == ']' && !first {
                break;
            }
            first = false;
            let low = if c == '\\' {
                match self.escape()? {
                    Node::Char(c) => c,
                    Node::Class {
                        ranges: r,
                        negated: false,
                    } => {
                        ranges.extend(r);
                        continue;
                    }
                    _ => return Err("negated class escape inside a class".to_owned()),
                }
            } else {
                c
            };
            if self.peek() == Some('-') && self.chars.get(self.pos + 1).is_some_and(|c| *c != ']') {
                self.pos += 1;
                let high = self.chars[self.pos];
                self.pos += 1;
                if high < low {
                    return Err(format!("invalid character class range `{low}-{high}`"));
                }
                ranges.push((low, high));
            } else {
                ranges.push((low, low));
            }
        }
        Ok(Node::Class { negated, ranges })
    }

    fn number(&mut self) -> Option<u32> {
        let start = self.pos;
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.pos += 1;
        }
        self.chars[start..self.pos]
            .iter()
            .collect::<String>()
            .parse()
            .ok()
    }

    fn quantified(&mut self, atom: Node) -> Result<Node, String> {
        let (min, max) = match self.peek() {
            Some('*') => (0, None),
            Some('+') => (1, None),
            Some('?') => (0, Some(1)),
            Some('{') => {
                self.pos += 1;
                let min = self.number().ok_or("invalid repeat count")?;
                let max = if self.peek() == Some(',') {
                    self.pos += 1;
                    if self.peek() == Some('}') {
                        None
                    } else {
                        Some(self.number().ok_or("invalid repeat count")?)
                    }
                } else {
                    Some(min)
                };
                if self.peek() != Some('}')
                    || max.is_some_and(|max| max < min)
                    || min.max(max.unwrap_or(0)) > MAX_REPEAT
                {
                    return Err("invalid repeat count".to_owned());
                }
                (min, max)
            }
            _ => return Ok(atom),
        };
        self.pos += 1;
        if matches!(self.peek(), Some('*' | '+' | '?' | '{')) {
            return Err("bad repetition operator".to_owned());
        }
        Ok(Node::Repeat {
            node: Box::new(atom),
            min,
            max,
        })
    }
}

fn word() -> Vec<(char, char)> {
    vec![('a', 'z'), ('A', 'Z'), ('0', '9'), ('_', '_')]
}

fn space() -> Vec<(char, char)> {
    vec![(' ', ' '), ('\t', '\r')]
}

/// Matches `nodes` at `pos`, calling `next` with every end position until it accepts one.
fn match_seq(
    nodes: &[Node],
    text: &[char],
    pos: usize,
    steps: &Cell<usize>,
    next: &mut dyn FnMut(usize) -> bool,
) -> bool {
    steps.set(steps.get() + 1);
    if steps.get() > STEP_BUDGET {
        return false;
    }
    let Some((node, rest)) = nodes.split_first() else {
        return next(pos);
    };
    match node {
        Node::Char(_) | Node::Any | Node::Class { .. } => {
            text.get(pos).is_some_and(|c| single(node, *c))
                && match_seq(rest, text, pos + 1, steps, next)
        }
        Node::Group(alternatives) => alternatives.iter().any(|alternative| {
            match_seq(alternative, text, pos, steps, &mut |end| {
                match_seq(rest, text, end, steps, next)
            })
        }),
        Node::Repeat {
            node: inner,
            min,
            max,
        } => {
            let repeat = Repeat {
                inner,
                min: *min,
                max: *max,
                rest,
            };
            repeat.run(text, pos, 0, steps, next)
        }
    }
}

struct Repeat<'a> {
    inner: &'a Node,
    min: u32,
    max: Option<u32>,
    rest: &'a [Node],
}

impl Repeat<'_> {
    /// Greedy: one more repetition first, then the rest of the pattern.
    fn run(
        &self,
        text: &[char],
        pos: usize,
        count: u32,
        steps: &Cell<usize>,
        next: &mut dyn FnMut(usize) -> bool,
    ) -> bool {
        if self.max.is_none_or(|max| count < max) {
            let more = match_seq(
                std::slice::from_ref(self.inner),
                text,
                pos,
                steps,
                &mut |end| {
                    // An empty repetition only counts towards the minimum, or it would loop.
                    (end != pos || count < self.min) && self.run(text, end, count + 1, steps, next)
                },
            );
            if more {
                return true;
            }
        }
        count >= self.min && match_seq(self.rest, text, pos, steps, next)
    }
}

fn single(node: &Node, c: char) -> bool {
    match node {
        Node::Char(expected) => *expected == c,
        Node::Any => c != '\n',
        Node::Class { negated, ranges } => {
            ranges.iter().any(|(low, high)| (*low..=*high).contains(&c)) != *negated
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::Regex;

    fn matches(pattern: &str, text: &str) -> bool {
        Regex::new(pattern).expect("valid pattern").is_match(text)
    }

    #[test]
    fn whole_name_matches() {
        assert!(matches("orders.*", "orders-eu"));
        assert!(!matches("orders", "orders-eu"));
        assert!(matches("^(orders|payments)-[a-z]{2}$", "payments-us"));
        assert!(!matches("(orders|payments)-[a-z]{2}", "payments-usa"));
        assert!(matches("t\\d+", "t42"));
        assert!(matches("a(?:b|c)*d?", "abcbc"));
        assert!(matches("[^_].*", "topic"));
        assert!(!matches("[^_].*", "_internal"));
        assert!(matches("(a*)*b", "aaab"));
    }

    #[test]
    fn hostile_patterns_are_bounded() {
        let long = "a".repeat(60);
        assert!(!matches("(a|a)*(a|a)*(a|a)*c", &long));
        assert!(Regex::new("(").is_err());
        assert!(Regex::new("[z-a]").is_err());
        assert!(Regex::new("*a").is_err());
        assert!(Regex::new("a{5000}").is_err());
        assert!(Regex::new("\\q").is_err());
    }
}
