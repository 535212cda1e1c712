//! Exact nearest neighbours in memory, for catalogs small enough to read whole per query.
//!
//! Why not an approximate index: a catalog of a few thousand items with a few passages each is
//! tens of thousands of vectors. Stored as int8 (one byte a dimension and a scale per vector) it
//! is about 20 MB for 512 dimensions, and one exact pass over it is a few million
//! multiply-adds, a millisecond or two on one core: cheaper than a round trip to a database's
//! HNSW walk, and exact where the walk is not.
//!
//! Every vector is normalised before it is quantised, so a dot product is a cosine. Each row is
//! scaled by its largest absolute component (symmetric int8), the query likewise, and the
//! product of two rows is summed in `i32` (exact) before the two scales are applied: the error
//! of a cosine is a few thousandths at most ([`tests`]).

use std::ops::Range;

/// Vectors of one length, each stored as int8 with its scale, and as given with its norm (for
/// exact cosines of the few the scan chose).
#[derive(Debug, Clone, Default)]
struct Rows {
    codes: Vec<i8>,
    scales: Vec<f32>,
    floats: Vec<f32>,
    norms: Vec<f64>,
}

impl Rows {
    fn push(&mut self, vector: &[f32]) {
        let (codes, scale) = quantise(vector);
        self.codes.extend_from_slice(&codes);
        self.scales.push(scale);
        self.floats.extend_from_slice(vector);
        self.norms.push(norm(vector));
    }

    /// The exact cosine of row `row` (of `query.len()`) and `query`, whose norm is
    /// `query_norm`; 0 when either is a zero vector.
    fn cosine(&self, row: usize, query: &[f32], query_norm: f64) -> f64 {
        let d = query.len();
        let dot: f64 = self.floats[row * d..(row + 1) * d]
            .iter()
            .zip(query)
            .map(|(&a, &b)| f64::from(a) * f64::from(b))
            .sum();
        let norms = self.norms[row] * query_norm;
        if norms == 0.0 { 0.0 } else { dot / norms }
    }

    fn len(&self) -> usize {
        self.scales.len()
    }
}

fn norm(vector: &[f32]) -> f64 {
    vector
        .iter()
        .map(|&v| f64::from(v) * f64::from(v))
        .sum::<f64>()
        .sqrt()
}

/// `vector` normalised, as int8 codes and the scale that turns them back into floats. A zero
/// vector is all zeros with scale 0 (its cosine to anything is 0).
fn quantise(vector: &[f32]) -> (Vec<i8>, f32) {
    let norm = vector.iter().map(|v| v * v).sum::<f32>().sqrt();
    let largest = vector.iter().fold(0f32, |m, v| m.max(v.abs()));
    if norm == 0.0 || largest == 0.0 || !norm.is_finite() {
        return (vec![0; vector.len()], 0.0);
    }
    let step = largest / 127.0;
    let codes = vector
        .iter()
        .map(|v| (v / step).round().clamp(-127.0, 127.0) as i8)
        .collect();
    (codes, step / norm)
}

/// Why an [`Index`] refused a vector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// A vector's length is not the index's dimension.
    Dimension { expected: usize, found: usize },
    /// A vector holds NaN or an infinity.
    NotFinite,
    /// No item at this position.
    NoItem(usize),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Dimension { expected, found } => {
                write!(
                    f,
                    "a vector of {found} dimensions in an index of {expected}"
                )
            }
            Error::NotFinite => write!(f, "a vector holds NaN or an infinity"),
            Error::NoItem(item) => write!(f, "no item {item} in the index"),
        }
    }
}

impl std::error::Error for Error {}

/// Items, each one document vector and any number of passage vectors, in the order pushed.
#[derive(Debug, Clone)]
pub struct Index {
    dimension: usize,
    documents: Rows,
    passages: Rows,
    /// The passage rows of each item.
    groups: Vec<Range<u32>>,
}

/// How close a query is to one item.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Match {
    /// Cosine of the query and the item's document vector.
    pub document: f32,
    /// Cosine of the query and the item's nearest passage, and that passage's position among
    /// the item's (0-based, in the order pushed); `None` for an item without passages.
    pub passage: Option<(f32, usize)>,
}

impl Index {
    pub fn new(dimension: usize) -> Self {
        Self {
            dimension,
            documents: Rows::default(),
            passages: Rows::default(),
            groups: Vec::new(),
        }
    }

    pub fn dimension(&self) -> usize {
        self.dimension
    }

    /// Number of items.
    pub fn len(&self) -> usize {
        self.groups.len()
    }

    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }

    /// Number of passage vectors over all items.
    pub fn passages(&self) -> usize {
        self.passages.len()
    }

    /// Bytes the vectors take.
    pub fn bytes(&self) -> usize {
        let rows =
            |r: &Rows| r.codes.len() + 4 * r.scales.len() + 4 * r.floats.len() + 8 * r.norms.len();
        rows(&self.documents) + rows(&self.passages) + 8 * self.groups.len()
    }

    fn check(&self, vector: &[f32]) -> Result<(), Error> {
        if vector.len() != self.dimension {
            return Err(Error::Dimension {
                expected: self.dimension,
                found: vector.len(),
            });
        }
        if vector.iter().any(|v| !v.is_finite()) {
            return Err(Error::NotFinite);
        }
        Ok(())
    }

    /// Adds an item; it is the next position of [`scan`](Self::scan)'s answer. Nothing is added
    /// when any of its vectors is refused.
    pub fn push<'a>(
        &mut self,
        document: &[f32],
        passages: impl IntoIterator<Item = &'a [f32]> + Clone,
    ) -> Result<(), Error> {
        self.check(document)?;
        for passage in passages.clone() {
            self.check(passage)?;
        }
        let first = self.passages.len() as u32;
        self.documents.push(document);
        for passage in passages {
            self.passages.push(passage);
        }
        self.groups.push(first..self.passages.len() as u32);
        Ok(())
    }

    /// How close `query` is to every item, in the order the items were pushed.
    pub fn scan(&self, query: &[f32]) -> Result<Vec<Match>, Error> {
        self.check(query)?;
        let (query, query_scale) = quantise(query);
        let documents = dots(&self.documents.codes, &query);
        let passages = dots(&self.passages.codes, &query);
        let cosine = |rows: &Rows, dots: &[i32], row: usize| {
            dots[row] as f32 * rows.scales[row] * query_scale
        };
        Ok(self
            .groups
            .iter()
            .enumerate()
            .map(|(item, group)| {
                let nearest = group
                    .clone()
                    .map(|row| (cosine(&self.passages, &passages, row as usize), row))
                    .fold(None::<(f32, u32)>, |best, (c, row)| match best {
                        Some((b, _)) if b >= c => best,
                        _ => Some((c, row)),
                    });
                Match {
                    document: cosine(&self.documents, &documents, item),
                    passage: nearest.map(|(c, row)| (c, (row - group.start) as usize)),
                }
            })
            .collect())
    }
}

/// How close a query is to one item, computed exactly from its vectors as given (in `f64`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ExactMatch {
    pub document: f64,
    /// As [`Match::passage`].
    pub passage: Option<(f64, usize)>,
}

impl Index {
    /// [`scan`](Self::scan)'s answer for item `item` (its position in the order pushed), exact:
    /// for the few items a scan chose, where its int8 cosines are too coarse to order near-ties.
    pub fn exact(&self, item: usize, query: &[f32]) -> Result<ExactMatch, Error> {
        self.check(query)?;
        let Some(group) = self.groups.get(item) else {
            return Err(Error::NoItem(item));
        };
        let query_norm = norm(query);
        let nearest = group
            .clone()
            .map(|row| (self.passages.cosine(row as usize, query, query_norm), row))
            .fold(None::<(f64, u32)>, |best, (c, row)| match best {
                Some((b, _)) if b >= c => best,
                _ => Some((c, row)),
            });
        Ok(ExactMatch {
            document: self.documents.cosine(item, query, query_norm),
            passage: nearest.map(|(c, row)| (c, (row - group.start) as usize)),
        })
    }
}

/// The integer dot product of `query` with each row of `codes` (rows of `query.len()`), with the
/// widest instructions this CPU has.
fn dots(codes: &[i8], query: &[i8]) -> Vec<i32> {
    let mut out = vec![0; codes.len().checked_div(query.len()).unwrap_or(0)];
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512bw") {
            // SAFETY: the CPU has AVX-512 BW (checked on the line above), all the function
            // enables.
            unsafe { dots_avx512(codes, query, &mut out) };
            return out;
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2 (checked on the line above), all the function enables.
            unsafe { dots_avx2(codes, query, &mut out) };
            return out;
        }
    }
    dots_plain(codes, query, &mut out);
    out
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw")]
fn dots_avx512(codes: &[i8], query: &[i8], out: &mut [i32]) {
    dots_plain(codes, query, out)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn dots_avx2(codes: &[i8], query: &[i8], out: &mut [i32]) {
    dots_plain(codes, query, out)
}

/// The kernel each instruction set compiles: a sum of `i16` products the compiler vectorises
/// into multiply-add instructions (`pmaddwd`). Plain loops into a slice the caller allocated:
/// anything not inlined here (a `collect`, say) would run without the caller's instructions.
#[inline(always)]
fn dots_plain(codes: &[i8], query: &[i8], out: &mut [i32]) {
    if query.is_empty() {
        return;
    }
    for (row, slot) in codes.chunks_exact(query.len()).zip(out.iter_mut()) {
        let mut sum = 0i32;
        for (&a, &b) in row.iter().zip(query) {
            sum += i32::from(i16::from(a) * i16::from(b));
        }
        *slot = sum;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deterministic pseudo-random vectors (xorshift), components in [-1, 1).
    fn vectors(seed: u64, count: usize, dimension: usize) -> Vec<Vec<f32>> {
        let mut state = seed.max(1);
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        };
        (0..count)
            .map(|_| (0..dimension).map(|_| next()).collect())
            .collect()
    }

    fn cosine(a: &[f32], b: &[f32]) -> f32 {
        let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
        let norm = |v: &[f32]| v.iter().map(|x| x * x).sum::<f32>().sqrt();
        dot / (norm(a) * norm(b))
    }

    #[test]
    fn every_cosine_is_within_a_few_thousandths_of_the_float_one_and_exact_ones_exact() {
        let dimension = 512;
        let documents = vectors(7, 50, dimension);
        let passages = vectors(11, 150, dimension);
        let mut index = Index::new(dimension);
        for (item, document) in documents.iter().enumerate() {
            // Items of 0 to 5 passages.
            let own = &passages[item * 3..item * 3 + item % 6];
            index.push(document, own.iter().map(Vec::as_slice)).unwrap();
        }
        for query in vectors(13, 5, dimension) {
            let matches = index.scan(&query).unwrap();
            assert_eq!(matches.len(), documents.len());
            let mut worst = 0f32;
            for (item, found) in matches.iter().enumerate() {
                worst = worst.max((found.document - cosine(&query, &documents[item])).abs());
                let own = &passages[item * 3..item * 3 + item % 6];
                let exact = own
                    .iter()
                    .map(|p| cosine(&query, p))
                    .fold(None::<f32>, |m, c| Some(m.map_or(c, |m| m.max(c))));
                let precise = index.exact(item, &query).unwrap();
                assert!(
                    (precise.document - f64::from(cosine(&query, &documents[item]))).abs() < 1e-5
                );
                match (precise.passage, exact) {
                    (Some((c, position)), Some(best)) => {
                        assert!((c - f64::from(best)).abs() < 1e-5);
                        assert!((f64::from(cosine(&query, &own[position])) - c).abs() < 1e-5);
                    }
                    (None, None) => {}
                    other => panic!("item {item}: exact passages {other:?}"),
                }
                match (found.passage, exact) {
                    (Some((c, position)), Some(best)) => {
                        worst = worst.max((c - best).abs());
                        // The passage named is one whose exact cosine is as near as the best.
                        assert!(cosine(&query, &own[position]) >= best - 0.005);
                    }
                    (None, None) => {}
                    other => panic!("item {item}: passages {other:?}"),
                }
            }
            assert!(worst < 0.005, "largest error {worst}");
        }
    }

    #[test]
    fn the_nearest_vector_is_found_whatever_its_length() {
        let mut index = Index::new(4);
        index.push(&[1.0, 0.0, 0.0, 0.0], []).unwrap();
        index
            .push(&[0.0, 3.0, 0.0, 0.0], [[0.0, 0.0, 5.0, 0.0].as_slice()])
            .unwrap();
        let matches = index.scan(&[0.0, 0.0, 0.2, 0.0]).unwrap();
        assert_eq!(matches[0].passage, None);
        assert!(matches[0].document.abs() < 1e-6);
        let (passage, position) = matches[1].passage.unwrap();
        assert!((passage - 1.0).abs() < 1e-3 && position == 0);
    }

    #[test]
    fn a_misfit_or_broken_vector_is_refused_and_nothing_is_added() {
        let mut index = Index::new(3);
        assert_eq!(
            index.push(&[1.0, 0.0], []),
            Err(Error::Dimension {
                expected: 3,
                found: 2
            })
        );
        assert_eq!(
            index.push(&[1.0, 0.0, 0.0], [[f32::NAN, 0.0, 0.0].as_slice()]),
            Err(Error::NotFinite)
        );
        assert!(index.is_empty() && index.passages() == 0);
        assert!(index.scan(&[1.0, 2.0]).is_err());
        assert_eq!(index.exact(0, &[1.0, 0.0, 0.0]), Err(Error::NoItem(0)));
        // A zero vector is kept, and is near nothing.
        index.push(&[0.0, 0.0, 0.0], []).unwrap();
        assert_eq!(index.scan(&[1.0, 0.0, 0.0]).unwrap()[0].document, 0.0);
    }

    /// Times a scan of a catalog's size: `cargo test -p nearest --release -- --ignored --nocapture`.
    #[test]
    #[ignore = "a benchmark"]
    fn bench_a_catalog_sized_scan() {
        let dimension = 512;
        let mut index = Index::new(dimension);
        let passages = vectors(5, 5, dimension);
        for document in vectors(3, 6_855, dimension) {
            index
                .push(&document, passages.iter().map(Vec::as_slice))
                .unwrap();
        }
        let queries = vectors(9, 50, dimension);
        let began = std::time::Instant::now();
        for query in &queries {
            std::hint::black_box(index.scan(query).unwrap());
        }
        let each = began.elapsed() / queries.len() as u32;
        println!(
            "{} items, {} passages, {} MB: {each:?} a scan",
            index.len(),
            index.passages(),
            index.bytes() / 1_000_000
        );
    }
}
