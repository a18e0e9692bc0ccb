//! RE2 as Envoy judges it: whether Envoy would compile a regular expression of a route (path,
//! header and query parameter matches), decided before any proxy is asked.
//!
//! Envoy compiles `safe_regex` with Google's RE2 (`source/common/common/regex.cc`): a pattern
//! RE2 refuses makes Envoy refuse the whole route configuration that carries it. No well-kept
//! Rust crate links RE2 (the `re2` crates on crates.io fetch and build it at build time), so
//! this is a model: the pattern is parsed with `regex-syntax`, whose grammar is RE2's with
//! additions, and RE2's own rules are checked on the syntax tree:
//!
//! - what Rust's syntax has and RE2's has not (`\u` and `\U` escapes, `\<`, `\>` and `\b{..}`
//!   boundaries, the flags `x`, `u` and `R`, `\p{name=value}` and the Unicode properties RE2
//!   does not know, class set operations and nested classes, which RE2 would read as literal
//!   characters);
//! - repetition counts: at most 1,000 (`{1001}` is `invalid repetition size`), also multiplied
//!   through nested repetitions (RE2's `RepetitionWalker`: `(a{100}){11}` is refused too), and
//!   no repetition operator directly on another (`a**`, `bad repetition operator`);
//! - the compiled program's size: RE2 gives up (`pattern too large - compile failed`) past
//!   `max_mem` (8 MiB by default, what the fleets' default Envoy, 1.34, compiles with; newer ones
//!   allow more), about [`MAX_PROGRAM_INSTRUCTIONS`] instructions; the size is estimated with a
//!   Thompson NFA of the same pattern (`regex-automata`), whose states follow RE2's
//!   instructions closely (one per byte range, split and match).
//!
//! Envoy's own program size limit (`re2.max_program_size.error_level`, 100 by default) is raised
//! to 2^32-1 in every bootstrap the operator writes, so it is not checked here.
//!
//! Where the model is unsure it refuses: a pattern is never accepted here that Envoy refuses
//! (`tests/xds/re2_corpus.rs` compares both on a corpus, with a real Envoy).

use regex_automata::nfa::thompson;
use regex_syntax::ast::{
    self, Ast, ClassSet, ClassSetItem, ClassUnicodeKind, Flag, GroupKind, HexLiteralKind, LiteralKind,
    RepetitionKind, RepetitionRange,
};

/// RE2's `maximum_repeat_count`: the largest count of a repetition, and of the product of
/// nested ones.
pub const MAX_REPEAT: u64 = 1000;

/// The instructions RE2 can compile within its default `max_mem` of 8 MiB: two thirds of it
/// go to the forward program, four bytes of budget per 8-byte instruction (`Compiler::Setup`).
/// The estimate is kept at 3/4 of that, for the difference between the two compilers.
pub const MAX_PROGRAM_INSTRUCTIONS: usize = (8 << 20) * 2 / 3 / 4 / 8 * 3 / 4;

/// The repetition product of a pattern without counted repetitions.
const UNREPEATED: u64 = 1;

/// How deep the parser lets groups and classes nest (RE2 allows 1,000; deeper here is refused).
const NEST_LIMIT: u32 = 250;

/// Why RE2 (as Envoy runs it) would refuse a pattern, in RE2's words where it has some.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal(pub String);

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Whether Envoy's RE2 would compile `pattern`.
pub fn judge(pattern: &str) -> Result<(), Refusal> {
    let ast = ast::parse::ParserBuilder::new()
        .nest_limit(NEST_LIMIT)
        .build()
        .parse(pattern)
        .map_err(|error| Refusal(syntax_error(&error)))?;
    let mut checker = Checker { pattern, refusal: None, perl_classes: Vec::new() };
    checker.visit(&ast);
    if let Some(refusal) = checker.refusal {
        return Err(refusal);
    }
    program_size(&checker.with_ascii_perl_classes())
}

/// The parser's message in RE2's words where RE2 has some, without the pattern it quotes (the
/// caller names the field).
fn syntax_error(error: &ast::Error) -> String {
    use ast::ErrorKind as Kind;
    let what = match error.kind() {
        Kind::EscapeUnrecognized | Kind::EscapeHexInvalid | Kind::EscapeHexInvalidDigit => {
            "invalid escape sequence".to_owned()
        }
        Kind::GroupUnclosed => "missing )".to_owned(),
        Kind::GroupUnopened => "unexpected )".to_owned(),
        Kind::ClassUnclosed => "missing ]".to_owned(),
        Kind::ClassRangeInvalid | Kind::UnicodeClassInvalid => "invalid character class range".to_owned(),
        Kind::RepetitionMissing => "missing argument to repetition operator".to_owned(),
        Kind::RepetitionCountInvalid => "invalid repetition size".to_owned(),
        Kind::FlagUnrecognized => "invalid perl operator".to_owned(),
        other => other.to_string(),
    };
    let span = error.span();
    let at = error.pattern().get(span.start.offset..span.end.offset).unwrap_or_default();
    if at.is_empty() { what } else { format!("{what}: `{at}`") }
}

struct Checker<'a> {
    pattern: &'a str,
    refusal: Option<Refusal>,
    /// Where `\d`, `\s` and `\w` are, and whether inside brackets.
    perl_classes: Vec<(std::ops::Range<usize>, &'static str, bool)>,
}

impl Checker<'_> {
    fn perl_class(&mut self, class: &ast::ClassPerl, in_brackets: bool) {
        let name = match (&class.kind, class.negated) {
            (ast::ClassPerlKind::Digit, false) => "digit",
            (ast::ClassPerlKind::Digit, true) => "^digit",
            (ast::ClassPerlKind::Space, false) => "space",
            (ast::ClassPerlKind::Space, true) => "^space",
            (ast::ClassPerlKind::Word, false) => "word",
            (ast::ClassPerlKind::Word, true) => "^word",
        };
        self.perl_classes.push((class.span.start.offset..class.span.end.offset, name, in_brackets));
    }

    /// The pattern with RE2's meaning of `\d`, `\s` and `\w` (ASCII only; Rust's are
    /// Unicode's, hundreds of times larger compiled), for the size estimate.
    fn with_ascii_perl_classes(&self) -> String {
        let mut pattern = self.pattern.to_owned();
        for (span, name, in_brackets) in self.perl_classes.iter().rev() {
            let class = if *in_brackets { format!("[:{name}:]") } else { format!("[[:{name}:]]") };
            pattern.replace_range(span.clone(), &class);
        }
        pattern
    }

    fn refuse(&mut self, what: &str, span: &ast::Span) {
        if self.refusal.is_none() {
            let at = self.pattern.get(span.start.offset..span.end.offset).unwrap_or_default();
            self.refusal = Some(Refusal(format!("{what}: `{at}`")));
        }
    }

    /// Checks `ast`; returns the largest product of nested repetition counts within it (1
    /// without any).
    fn visit(&mut self, ast: &Ast) -> u64 {
        match ast {
            Ast::Empty(_) | Ast::Dot(_) => UNREPEATED,
            Ast::ClassPerl(class) => {
                self.perl_class(class, false);
                UNREPEATED
            }
            Ast::Flags(flags) => {
                self.flags(&flags.flags);
                UNREPEATED
            }
            Ast::Literal(literal) => {
                self.literal(literal);
                UNREPEATED
            }
            Ast::Assertion(assertion) => {
                use ast::AssertionKind as Kind;
                match assertion.kind {
                    Kind::StartLine
                    | Kind::EndLine
                    | Kind::StartText
                    | Kind::EndText
                    | Kind::WordBoundary
                    | Kind::NotWordBoundary => {}
                    _ => self.refuse(
                        "not a word boundary in RE2, which reads `\\<`, `\\>` and `\\b{..}` as characters",
                        &assertion.span,
                    ),
                }
                UNREPEATED
            }
            Ast::ClassUnicode(class) => {
                self.unicode_class(class);
                UNREPEATED
            }
            Ast::ClassBracketed(class) => {
                self.class_set(&class.kind);
                UNREPEATED
            }
            Ast::Repetition(repetition) => self.repetition(repetition),
            Ast::Group(group) => {
                match &group.kind {
                    GroupKind::CaptureIndex(_) => {}
                    GroupKind::CaptureName { name, .. } => {
                        let word = |c: char| c.is_alphanumeric() || c == '_';
                        if !name.name.chars().all(word) {
                            self.refuse("invalid named capture group", &name.span);
                        }
                    }
                    GroupKind::NonCapturing(flags) => self.flags(flags),
                }
                self.visit(&group.ast)
            }
            Ast::Alternation(alternation) => {
                alternation.asts.iter().map(|ast| self.visit(ast)).max().unwrap_or(UNREPEATED)
            }
            Ast::Concat(concat) => concat.asts.iter().map(|ast| self.visit(ast)).max().unwrap_or(UNREPEATED),
        }
    }

    /// RE2 checks each repetition as it is parsed, inner ones first, so the UNREPEATEDmost one whose
    /// nested counts multiply past [`MAX_REPEAT`] is named (`RepetitionWalker`).
    fn repetition(&mut self, repetition: &ast::Repetition) -> u64 {
        // `a**`, `a+{2}`: RE2 (in Perl mode, as Envoy parses) refuses a repetition of a repetition
        // that is not in a group.
        if matches!(*repetition.ast, Ast::Repetition(_)) {
            self.refuse("bad repetition operator", &repetition.op.span);
        }
        let count = match &repetition.op.kind {
            RepetitionKind::ZeroOrOne | RepetitionKind::ZeroOrMore | RepetitionKind::OneOrMore => None,
            RepetitionKind::Range(range) => {
                let (min, max) = match *range {
                    RepetitionRange::Exactly(n) => (n, Some(n)),
                    RepetitionRange::AtLeast(n) => (n, None),
                    RepetitionRange::Bounded(min, max) => (min, Some(max)),
                };
                if u64::from(min) > MAX_REPEAT || max.is_some_and(|max| u64::from(max) > MAX_REPEAT) {
                    self.refuse("invalid repetition size", &repetition.op.span);
                }
                // RE2's RepetitionWalker divides by the maximum, or by the minimum when unbounded,
                // and skips a zero.
                Some(u64::from(max.unwrap_or(min)))
            }
        };
        let inner = self.visit(&repetition.ast);
        match count {
            Some(count) if count > 0 => {
                let product = inner.saturating_mul(count);
                if product > MAX_REPEAT {
                    self.refuse("invalid repetition size", &repetition.op.span);
                }
                product
            }
            _ => inner,
        }
    }

    fn flags(&mut self, flags: &ast::Flags) {
        for item in &flags.items {
            if let ast::FlagsItemKind::Flag(Flag::IgnoreWhitespace | Flag::Unicode | Flag::CRLF) = item.kind {
                self.refuse("invalid perl operator", &item.span);
            }
        }
    }

    fn literal(&mut self, literal: &ast::Literal) {
        match literal.kind {
            LiteralKind::HexFixed(HexLiteralKind::UnicodeShort | HexLiteralKind::UnicodeLong)
            | LiteralKind::HexBrace(HexLiteralKind::UnicodeShort | HexLiteralKind::UnicodeLong)
            | LiteralKind::Octal => self.refuse("invalid escape sequence", &literal.span),
            // Envoy 1.40 refuses `\x` escapes past `\x{FF}` (`invalid escape sequence`), as RE2
            // does over Latin-1.
            LiteralKind::HexFixed(HexLiteralKind::X) | LiteralKind::HexBrace(HexLiteralKind::X)
                if u32::from(literal.c) > 0xFF =>
            {
                self.refuse("invalid escape sequence", &literal.span)
            }
            _ => {}
        }
    }

    fn unicode_class(&mut self, class: &ast::ClassUnicode) {
        if let ClassUnicodeKind::Named(name) = &class.kind
            && name.starts_with('^')
        {
            // RE2 takes `\p{^Greek}`; Rust's syntax does not, so it cannot be checked further.
            return self.refuse("write a negated class as `\\P{..}`", &class.span);
        }
        let known = match &class.kind {
            ClassUnicodeKind::OneLetter(letter) => GENERAL_CATEGORIES.contains(&letter.to_string().as_str()),
            ClassUnicodeKind::Named(name) => is_re2_unicode_group(name),
            ClassUnicodeKind::NamedValue { .. } => false,
        };
        if !known {
            self.refuse("invalid character class range", &class.span);
        }
    }

    fn class_set(&mut self, set: &ClassSet) {
        match set {
            ClassSet::BinaryOp(op) => self
                .refuse("class set operations are not RE2 syntax (RE2 reads them as characters)", &op.span),
            ClassSet::Item(item) => self.class_item(item),
        }
    }

    fn class_item(&mut self, item: &ClassSetItem) {
        match item {
            ClassSetItem::Empty(_) | ClassSetItem::Ascii(_) => {}
            ClassSetItem::Perl(class) => self.perl_class(class, true),
            ClassSetItem::Literal(literal) => self.literal(literal),
            ClassSetItem::Range(range) => {
                self.literal(&range.start);
                self.literal(&range.end);
            }
            ClassSetItem::Unicode(class) => self.unicode_class(class),
            ClassSetItem::Bracketed(class) => self.refuse(
                "nested character classes are not RE2 syntax (RE2 reads `[` as a character)",
                &class.span,
            ),
            ClassSetItem::Union(union) => union.items.iter().for_each(|item| self.class_item(item)),
        }
    }
}

/// RE2's Unicode general categories (`unicode_groups.cc`), and `Any`.
const GENERAL_CATEGORIES: &[&str] = &[
    "Any", "C", "Cc", "Cf", "Co", "Cs", "L", "Ll", "Lm", "Lo", "Lt", "Lu", "M", "Mc", "Me", "Mn", "N", "Nd",
    "Nl", "No", "P", "Pc", "Pd", "Pe", "Pf", "Pi", "Po", "Ps", "S", "Sc", "Sk", "Sm", "So", "Z", "Zl", "Zp",
    "Zs",
];

/// Whether RE2 knows `\p{name}`: a general category, or a script by its long name exactly as
/// Unicode spells it (`Greek`, `Old_Italic`); RE2 looks names up as written, where Rust's syntax
/// also takes aliases, other spellings and binary properties (`greek`, `Alphabetic`).
fn is_re2_unicode_group(name: &str) -> bool {
    if GENERAL_CATEGORIES.contains(&name) {
        return true;
    }
    let canonical = name.split('_').all(|word| {
        let mut chars = word.chars();
        chars.next().is_some_and(|c| c.is_ascii_uppercase()) && chars.all(|c| c.is_ascii_alphabetic())
    });
    canonical
        && regex_syntax::ast::parse::Parser::new()
            .parse(&format!(r"\p{{Script={name}}}"))
            .ok()
            .and_then(|ast| regex_syntax::hir::translate::Translator::new().translate("", &ast).ok())
            .is_some()
}

/// RE2's program for `pattern` fits its memory budget (estimated: see the module's comment).
fn program_size(pattern: &str) -> Result<(), Refusal> {
    // Bounded work: the NFA is built within a byte budget well above what passes.
    const NFA_BYTES: usize = 64 << 20;
    let too_large = || Refusal("pattern too large - compile failed".to_owned());
    let nfa = thompson::Compiler::new()
        .syntax(regex_automata::util::syntax::Config::new().nest_limit(NEST_LIMIT))
        .configure(
            thompson::Config::new()
                .which_captures(thompson::WhichCaptures::None)
                .nfa_size_limit(Some(NFA_BYTES)),
        )
        .build(pattern)
        .map_err(|error| match error.size_limit() {
            Some(_) => too_large(),
            None => Refusal(error.to_string()),
        })?;
    if nfa.states().len() > MAX_PROGRAM_INSTRUCTIONS {
        return Err(too_large());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(pattern: &str) -> String {
        judge(pattern).expect_err(pattern).0
    }

    #[test]
    fn ordinary_patterns_pass() {
        for pattern in [
            "/api/v[0-9]+",
            "^/items/[0-9]+$",
            "(?i)/Shop/.*",
            r"/a\.b\+c",
            "x{1000}",
            "(a{10}){100}",
            "(a*)*",
            r"\pL\p{Greek}\p{Old_Italic}\PN\P{Lu}",
            "[[:alpha:]][^a-z]",
            r"(?P<id>\d+)-(?<rest>\w+)",
            "a|",
            r"\x{FF}\x41é",
        ] {
            assert_eq!(judge(pattern), Ok(()), "{pattern}");
        }
    }

    #[test]
    fn repetition_counts_past_1000_are_refused_also_when_nested() {
        assert_eq!(refused("/x{1001}"), "invalid repetition size: `{1001}`");
        assert_eq!(refused("x{2,1001}"), "invalid repetition size: `{2,1001}`");
        assert_eq!(refused("x{1001,}"), "invalid repetition size: `{1001,}`");
        assert_eq!(refused("(a{100}){11}"), "invalid repetition size: `{11}`");
        assert_eq!(refused("((a{10}b){10}){11}"), "invalid repetition size: `{11}`");
        // Unbounded repetitions count by their minimum; `*`, `+` and `?` count nothing.
        assert_eq!(judge("(a{1000})*"), Ok(()));
        assert!(judge("(a{2,}){501}").is_err());
        assert_eq!(judge("(a{2,}){500}"), Ok(()));
        assert_eq!(judge("(a{0}){1000}"), Ok(()));
    }

    #[test]
    fn a_repetition_of_a_repetition_is_refused() {
        assert_eq!(refused("a**"), "bad repetition operator: `*`");
        assert!(judge("a{2}{3}").is_err());
        assert_eq!(judge("(?:a*)*"), Ok(()));
    }

    #[test]
    fn rust_only_syntax_is_refused() {
        for pattern in [
            r"\u0041",
            r"\U{41}",
            r"\<word\>",
            r"\b{start}x",
            "(?x)a b",
            "(?u)a",
            "(?R)a$",
            r"\p{Script=Greek}",
            r"\p{greek}",
            r"\p{Alphabetic}",
            "[a-z&&[^aeiou]]",
            "[[a-z]]",
            "(?P<a.b>x)",
            r"\x{100}",
            r"\p{^Lu}",
        ] {
            assert!(judge(pattern).is_err(), "{pattern} should be refused");
        }
    }

    #[test]
    fn syntax_errors_say_what_and_where() {
        assert_eq!(refused("/api/(v"), "missing ): `(`");
        assert_eq!(refused(r"\Z"), "invalid escape sequence: `\\Z`");
        assert!(refused("[z-a]").starts_with("invalid character class range"));
    }

    #[test]
    fn programs_past_res2s_memory_are_refused() {
        assert_eq!(refused(r"\pL{1000}"), "pattern too large - compile failed");
        assert_eq!(judge("[a-z]{1000}"), Ok(()));
        // RE2's `\d`, `\s` and `\w` are ASCII.
        assert_eq!(judge(r"\w{1000}[\d\S]{1000}"), Ok(()));
        let alternation: Vec<String> = (0..2000).map(|i| format!("/path{i}")).collect();
        assert_eq!(judge(&alternation.join("|")), Ok(()));
    }

    #[test]
    fn nesting_is_bounded() {
        let deep = format!("{}a{}", "(".repeat(300), ")".repeat(300));
        assert!(judge(&deep).is_err());
    }
}
