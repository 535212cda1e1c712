//! Search: embedders (and, next, lexical and vector retrieval, fusion, rerank).

pub mod e5;
