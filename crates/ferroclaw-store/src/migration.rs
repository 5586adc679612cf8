//! What both databases' migrations share: the state reported by `ferroclaw migrate`,
//! the errors that stop a start, and how a recorded migration is checked against this
//! build's.

/// One migration as the database knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigrationState {
    pub version: i64,
    pub name: String,
    /// Milliseconds since the epoch; `None`: not applied yet.
    pub applied_at: Option<i64>,
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum MigrationError {
    #[error("migration {version} ({name}) was changed after it was applied (recorded checksum {recorded}, this build has {expected}); restore it or use a database made by this build")]
    Edited {
        version: i64,
        name: String,
        recorded: String,
        expected: String,
    },
    #[error("the database has migration {0}, which this build does not know: it was made by a newer ferroclaw")]
    Unknown(i64),
    #[error("{0}")]
    Sql(String),
}

impl From<rusqlite::Error> for MigrationError {
    fn from(e: rusqlite::Error) -> Self {
        MigrationError::Sql(e.to_string())
    }
}

impl From<tokio_postgres::Error> for MigrationError {
    fn from(e: tokio_postgres::Error) -> Self {
        MigrationError::Sql(e.to_string())
    }
}

pub(crate) fn checksum(sql: &str) -> String {
    format!("{:016x}", ferroclaw_types::fnv1a(sql.as_bytes()))
}

/// A recorded migration must be one of `known`, unchanged.
pub(crate) fn check_recorded(
    known: &[(i64, &str, &str)],
    version: i64,
    name: String,
    recorded: String,
) -> Result<(), MigrationError> {
    let Some(&(_, _, sql)) = known.iter().find(|m| m.0 == version) else {
        return Err(MigrationError::Unknown(version));
    };
    let expected = checksum(sql);
    if recorded != expected {
        return Err(MigrationError::Edited {
            version,
            name,
            recorded,
            expected,
        });
    }
    Ok(())
}
