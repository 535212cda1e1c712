//! The crate's one error type: what its public functions return.

use std::{fmt::Display, path::PathBuf};

/// Why loading a model or embedding a text failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A model file could not be read.
    #[error("reading {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A model file is not what the encoder expects (its format, a tensor's name, dtype or
    /// shape), or the configuration is inconsistent.
    #[error("{0}")]
    Format(String),
    /// The tokenizer could not be loaded or could not read a text.
    #[error("tokenizer: {0}")]
    Tokenizer(String),
    /// An input the model cannot take (a token id outside the vocabulary, too many tokens).
    #[error("{0}")]
    Input(String),
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// [`Error::Io`] for `path`.
    pub(crate) fn io(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
        move |source| Error::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

impl From<std::array::TryFromSliceError> for Error {
    fn from(_: std::array::TryFromSliceError) -> Self {
        Error::Format("a field of the weights file has the wrong length".into())
    }
}

impl From<std::num::TryFromIntError> for Error {
    fn from(error: std::num::TryFromIntError) -> Self {
        Error::Format(format!("a size in the weights file does not fit: {error}"))
    }
}

impl From<std::string::FromUtf8Error> for Error {
    fn from(error: std::string::FromUtf8Error) -> Self {
        Error::Format(format!("a name in the weights file is not UTF-8: {error}"))
    }
}

/// A missing value, or a failure of another library, as an [`Error::Format`] with `message`
/// (and the other library's reason).
pub(crate) trait OrFormat<T> {
    fn or_format(self, message: impl FnOnce() -> String) -> Result<T>;
}

impl<T> OrFormat<T> for Option<T> {
    fn or_format(self, message: impl FnOnce() -> String) -> Result<T> {
        self.ok_or_else(|| Error::Format(message()))
    }
}

impl<T, E: Display> OrFormat<T> for std::result::Result<T, E> {
    fn or_format(self, message: impl FnOnce() -> String) -> Result<T> {
        self.map_err(|e| Error::Format(format!("{}: {e}", message())))
    }
}

/// `anyhow::ensure!` for [`Error::Format`].
macro_rules! ensure_format {
    ($cond:expr, $($arg:tt)+) => {
        if !$cond {
            return Err($crate::Error::Format(format!($($arg)+)));
        }
    };
}

/// `anyhow::bail!` for [`Error::Format`].
macro_rules! bail_format {
    ($($arg:tt)+) => {
        return Err($crate::Error::Format(format!($($arg)+)))
    };
}

pub(crate) use {bail_format, ensure_format};
