//! Comparing two versions of a text line by line.

/// How many items `old` and `new` share at their start, and then how many at their end (the
/// end never reaching into the shared start): what lies between is what changed.
pub fn common_ends<T: PartialEq>(old: &[T], new: &[T]) -> (usize, usize) {
    let head = old.iter().zip(new).take_while(|(a, b)| a == b).count();
    let room = old.len().min(new.len()) - head;
    let tail = old
        .iter()
        .rev()
        .zip(new.iter().rev())
        .take(room)
        .take_while(|(a, b)| a == b)
        .count();
    (head, tail)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_start_and_end_do_not_overlap() {
        assert_eq!(common_ends(&["a", "b", "c"], &["a", "x", "c"]), (1, 1));
        assert_eq!(common_ends(&["a", "a"], &["a", "a", "a"]), (2, 0));
        assert_eq!(common_ends(&["a", "b"], &["a", "b"]), (2, 0));
        assert_eq!(common_ends::<&str>(&[], &["a"]), (0, 0));
    }
}
