//! Bounds on what an answer may echo back. Anything a client sent can be megabytes long and
//! can contain control characters; a message quotes at most [`MAX_ECHO_CHARS`] of it, and a
//! list of findings shows at most a fixed number of items, then says how many were left out.
//! So the size of an answer (and of the log line about it) never follows the size of the input.

use std::borrow::Cow;

/// Characters of one client-supplied value quoted in a message.
pub const MAX_ECHO_CHARS: usize = 128;

/// `value`, cut to [`MAX_ECHO_CHARS`] characters (on a character boundary) with a note of how
/// much was left out. Short values are borrowed unchanged.
pub fn echo(value: &str) -> Cow<'_, str> {
    truncate(value, MAX_ECHO_CHARS)
}

/// `value` cut to `max_chars` characters, followed by `…(N more bytes)` when cut.
pub fn truncate(value: &str, max_chars: usize) -> Cow<'_, str> {
    match value.char_indices().nth(max_chars) {
        None => Cow::Borrowed(value),
        Some((cut, _)) => Cow::Owned(format!("{}…({} more bytes)", &value[..cut], value.len() - cut)),
    }
}

/// `value` cut to at most `max_bytes` bytes (on a character boundary), followed by
/// `…(N more bytes)` when cut: what a value held for a while takes is then bounded in bytes,
/// whatever its characters' widths. The note adds at most [`CUT_NOTE_BYTES`].
pub fn truncate_bytes(value: &str, max_bytes: usize) -> Cow<'_, str> {
    if value.len() <= max_bytes {
        return Cow::Borrowed(value);
    }
    // A character is at most 4 bytes: a boundary is at most 3 bytes back.
    let cut = (0..=max_bytes).rev().find(|&at| value.is_char_boundary(at)).unwrap_or(0);
    Cow::Owned(format!("{}…({} more bytes)", &value[..cut], value.len() - cut))
}

/// The most bytes the note of a cut adds: `…` (3 bytes) and `(N more bytes)` with N of up
/// to 20 digits.
pub const CUT_NOTE_BYTES: usize = 3 + "( more bytes)".len() + 20;

/// Keeps the first `max` items; when there were more, the last kept item is replaced by
/// `more(left_out)` so the list still says that something was left out (e.g. "and 12 more").
pub fn capped<T>(mut items: Vec<T>, max: usize, more: impl FnOnce(usize) -> T) -> Vec<T> {
    if items.len() > max && max > 0 {
        let left_out = items.len() - (max - 1);
        items.truncate(max - 1);
        items.push(more(left_out));
    } else if max == 0 {
        items.clear();
    }
    items
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_values_are_echoed_unchanged_and_long_ones_cut_on_a_char_boundary() {
        assert!(matches!(echo("edge"), Cow::Borrowed("edge")));
        let long = "é".repeat(1000);
        let cut = echo(&long);
        assert!(cut.starts_with(&"é".repeat(MAX_ECHO_CHARS)));
        assert!(cut.ends_with(&format!("…({} more bytes)", (1000 - MAX_ECHO_CHARS) * 2)), "{cut}");
        assert_eq!(truncate("abcdef", 6), "abcdef");
        assert_eq!(truncate("abcdefg", 6), "abcdef…(1 more bytes)");
    }

    #[test]
    fn values_cut_in_bytes_keep_whole_characters_and_stay_within_the_bound() {
        assert!(matches!(truncate_bytes("edge", 4), Cow::Borrowed("edge")));
        assert_eq!(truncate_bytes("abcdefg", 6), "abcdef…(1 more bytes)");
        // 4-byte characters: 1,024 bytes hold 256 of them, not 1,024.
        let wide = "😀".repeat(1000);
        let cut = truncate_bytes(&wide, 1022);
        assert!(cut.starts_with(&"😀".repeat(255)) && !cut.starts_with(&"😀".repeat(256)), "{cut}");
        assert!(cut.ends_with("…(2980 more bytes)"), "{cut}");
        assert!(cut.len() <= 1022 + CUT_NOTE_BYTES);
        let longest_note = format!("…({} more bytes)", u64::MAX);
        assert_eq!(longest_note.len(), CUT_NOTE_BYTES);
    }

    #[test]
    fn capped_lists_say_how_many_were_left_out() {
        let more = |n: usize| format!("and {n} more");
        assert_eq!(capped(vec!["a".to_owned(), "b".to_owned()], 2, more), ["a", "b"]);
        let items: Vec<String> = (0..10).map(|i| i.to_string()).collect();
        assert_eq!(capped(items, 3, more), ["0", "1", "and 8 more"]);
        assert!(capped(vec![1, 2], 0, |n| n).is_empty());
    }
}
