//! A description's facets: the clauses it is made of ("something calm", "of somebody that
//! travels alone", "helps people"). The whole description is one vector, where its longest
//! clause dominates; each facet is embedded too and walks the passage index on its own, so an
//! anime that one sentence of its synopsis answers one clause of the query is still a
//! candidate, and is scored by how well its passages answer every clause (see
//! `vector::search`).

/// At most this many facets per query: each costs an embedding and an index walk (four cost
/// 18 ms of page p50, two 8 ms: `docs/measurements.md`).
pub const MAX_FACETS: usize = 2;
/// A clause shorter than this says too little on its own ("and", "a girl").
const MIN_FACET_WORDS: usize = 2;
/// Queries longer than this are pasted synopses: their whole vector already matches the
/// synopsis they paraphrase, and their first clauses are no better than the rest.
const MAX_QUERY_WORDS: usize = 40;

/// Words that join two clauses, in English and Spanish.
const JOINS: [&str; 11] = [
    "and", "but", "or", "while", "whereas", "y", "e", "pero", "o", "mientras", "aunque",
];

/// The facets of `text`: its clauses, split at punctuation and at joining words, of at least
/// [`MIN_FACET_WORDS`] words, the first [`MAX_FACETS`]. Empty when the text is one clause (its
/// own vector is that facet) or a pasted synopsis.
pub fn facets(text: &str) -> Vec<String> {
    if text.split_whitespace().count() > MAX_QUERY_WORDS {
        return Vec::new();
    }
    let mut clauses: Vec<String> = Vec::new();
    for piece in text.split([',', ';', '.', ':', '!', '?', '(', ')', '¿', '¡']) {
        let mut current: Vec<&str> = Vec::new();
        for word in piece.split_whitespace() {
            if JOINS.contains(&word.to_lowercase().as_str()) {
                push_clause(&mut clauses, &mut current);
            } else {
                current.push(word);
            }
        }
        push_clause(&mut clauses, &mut current);
    }
    if clauses.len() < 2 {
        return Vec::new();
    }
    clauses.truncate(MAX_FACETS);
    clauses
}

fn push_clause(clauses: &mut Vec<String>, words: &mut Vec<&str>) {
    if words.len() >= MIN_FACET_WORDS {
        clauses.push(words.join(" "));
    }
    words.clear();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_description_splits_into_its_clauses() {
        assert_eq!(
            facets("Something calm, of somebody that travels alone and help to the people"),
            ["Something calm", "of somebody that travels alone"]
        );
        assert_eq!(
            facets("una chica en silla de ruedas obsesionada con el mar y un estudiante de buceo"),
            [
                "una chica en silla de ruedas obsesionada con el mar",
                "un estudiante de buceo"
            ]
        );
    }

    #[test]
    fn one_clause_titles_and_pasted_synopses_have_no_facets() {
        assert!(facets("a boy who pilots a giant robot").is_empty());
        assert!(facets("samurai x serie").is_empty());
        // Single words left between joins are not facets.
        assert!(facets("cats and dogs").is_empty());
        let synopsis = "word ".repeat(MAX_QUERY_WORDS + 1) + ", and more words here";
        assert!(facets(&synopsis).is_empty());
    }

    #[test]
    fn at_most_two_facets_are_kept() {
        let text = "one two, three four, five six";
        assert_eq!(facets(text), ["one two", "three four"]);
    }
}
