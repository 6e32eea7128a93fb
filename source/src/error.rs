//! The one error type of `ringrep-source`: every error a client can see carries its MySQL
//! error code, SQLSTATE and message, so the SQL layer and the server print it unchanged.

use std::fmt;

/// MySQL error codes used by ringrep. The numbers are MySQL's (or NDB's, for 940 and 4xxx).
pub mod code {
    pub const ER_HA_ERROR_DURING_COMMIT: u16 = 1180;
    pub const ER_ILLEGAL_HA_CREATE_OPTION: u16 = 1478;
    pub const ER_ILLEGAL_HA: u16 = 1031;
    pub const ER_DUP_ENTRY: u16 = 1062;
    pub const ER_NO_SUCH_TABLE: u16 = 1146;
    pub const ER_BAD_FIELD_ERROR: u16 = 1054;
    pub const ER_PARSE_ERROR: u16 = 1064;
    pub const ER_TABLE_EXISTS_ERROR: u16 = 1050;
    pub const ER_BAD_TABLE_ERROR: u16 = 1051;
    pub const ER_DB_CREATE_EXISTS: u16 = 1007;
    pub const ER_DB_DROP_EXISTS: u16 = 1008;
    pub const ER_BAD_DB_ERROR: u16 = 1049;
    pub const ER_NO_DB_ERROR: u16 = 1046;
    pub const ER_BAD_NULL_ERROR: u16 = 1048;
    pub const ER_NO_DEFAULT_FOR_FIELD: u16 = 1364;
    pub const ER_WRONG_VALUE_COUNT_ON_ROW: u16 = 1136;
    pub const ER_DATA_TOO_LONG: u16 = 1406;
    pub const ER_WARN_DATA_OUT_OF_RANGE: u16 = 1264;
    pub const ER_TRUNCATED_WRONG_VALUE: u16 = 1292;
    pub const ER_TRUNCATED_WRONG_VALUE_FOR_FIELD: u16 = 1366;
    pub const ER_LOCK_WAIT_TIMEOUT: u16 = 1205;
    pub const ER_LOCK_DEADLOCK: u16 = 1213;
    pub const ER_OPTION_PREVENTS_STATEMENT: u16 = 1290;
    pub const ER_NOT_SUPPORTED_YET: u16 = 1235;
    pub const ER_UNKNOWN_SYSTEM_VARIABLE: u16 = 1193;
    pub const ER_WRONG_VALUE_FOR_VAR: u16 = 1231;
    pub const ER_DUP_FIELDNAME: u16 = 1060;
    pub const ER_DUP_KEYNAME: u16 = 1061;
    pub const ER_KEY_COLUMN_DOES_NOT_EXITS: u16 = 1072;
    pub const ER_MULTIPLE_PRI_KEY: u16 = 1068;
    pub const ER_CANT_DROP_FIELD_OR_KEY: u16 = 1091;
    pub const ER_INVALID_DEFAULT: u16 = 1067;
    pub const ER_BLOB_CANT_HAVE_DEFAULT: u16 = 1101;
    pub const ER_ALTER_OPERATION_NOT_SUPPORTED_REASON: u16 = 1846;
    pub const ER_UNKNOWN_ERROR: u16 = 1105;
    pub const ER_CANT_DO_THIS_DURING_AN_TRANSACTION: u16 = 1179;
    pub const ER_ACCESS_DENIED_ERROR: u16 = 1045;
    pub const ER_WRONG_ARGUMENTS: u16 = 1210;
    pub const ER_DIVISION_BY_ZERO: u16 = 1365;
    pub const ER_SUBQUERY_NO_1_ROW: u16 = 1242;
    pub const ER_OPERAND_COLUMNS: u16 = 1241;
    pub const ER_NON_UNIQ_ERROR: u16 = 1052;
    pub const ER_WRONG_FIELD_WITH_GROUP: u16 = 1055;
    pub const ER_INVALID_GROUP_FUNC_USE: u16 = 1111;
    pub const ER_SP_DOES_NOT_EXIST: u16 = 1305;
    /// NDB: direct write to a ring buffer table.
    pub const NDB_DIRECT_WRITE: u16 = 940;
    /// NDB: parameter error in API call.
    pub const NDB_PARAMETER_ERROR: u16 = 4118;
    pub const NDB_DELETE_OLDEST_TTL: u16 = 4358;
    pub const NDB_TTL_MUST_SET_ALL: u16 = 4359;
}

/// Whether retrying can help.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// Bad input: the same statement fails again.
    User,
    /// A lock wait or deadlock: retry the transaction.
    Retriable,
    /// Storage or I/O failure.
    Internal,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub code: u16,
    pub sqlstate: &'static str,
    pub message: String,
    pub kind: ErrorKind,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "ERROR {} ({}): {}",
            self.code, self.sqlstate, self.message
        )
    }
}

impl std::error::Error for Error {}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn new(code: u16, sqlstate: &'static str, message: impl Into<String>) -> Error {
        let kind = match code {
            code::ER_LOCK_WAIT_TIMEOUT | code::ER_LOCK_DEADLOCK => ErrorKind::Retriable,
            code::ER_UNKNOWN_ERROR => ErrorKind::Internal,
            _ => ErrorKind::User,
        };
        Error {
            code,
            sqlstate,
            message: message.into(),
            kind,
        }
    }

    pub fn internal(message: impl Into<String>) -> Error {
        Error {
            code: code::ER_UNKNOWN_ERROR,
            sqlstate: "HY000",
            message: message.into(),
            kind: ErrorKind::Internal,
        }
    }

    /// A table-option rule of the spec (CREATE/ALTER), printed as MySQL's error 1478.
    pub fn create_option(what: &str) -> Error {
        Error::new(
            code::ER_ILLEGAL_HA_CREATE_OPTION,
            "HY000",
            format!(
                "Table storage engine 'ndbcluster' does not support the create option '{what}'"
            ),
        )
    }

    /// A statement rule of the spec (DML), printed as MySQL's error 1031.
    pub fn not_allowed(what: &str) -> Error {
        Error::new(
            code::ER_ILLEGAL_HA,
            "HY000",
            format!("Table storage engine for '{what}' doesn't have this option"),
        )
    }

    pub fn no_such_table(db: &str, table: &str) -> Error {
        Error::new(
            code::ER_NO_SUCH_TABLE,
            "42S02",
            format!("Table '{db}.{table}' doesn't exist"),
        )
    }

    pub fn bad_field(column: &str, place: &str) -> Error {
        Error::new(
            code::ER_BAD_FIELD_ERROR,
            "42S22",
            format!("Unknown column '{column}' in '{place}'"),
        )
    }

    pub fn dup_entry(value: &str, key: &str) -> Error {
        Error::new(
            code::ER_DUP_ENTRY,
            "23000",
            format!("Duplicate entry '{value}' for key '{key}'"),
        )
    }

    pub fn direct_write() -> Error {
        Error::new(code::NDB_DIRECT_WRITE, "HY000", "Direct write to ring-buffer table not allowed. Use SQL, NdbRingBufferWriter or ClusterJ")
    }

    pub fn parameter(detail: &str) -> Error {
        Error::new(
            code::NDB_PARAMETER_ERROR,
            "HY000",
            format!("Parameter error in API call: {detail}"),
        )
    }

    pub fn lock_wait_timeout() -> Error {
        Error::new(
            code::ER_LOCK_WAIT_TIMEOUT,
            "HY000",
            "Lock wait timeout exceeded; try restarting transaction",
        )
    }

    pub fn deadlock() -> Error {
        Error::new(
            code::ER_LOCK_DEADLOCK,
            "40001",
            "Deadlock found when trying to get lock; try restarting transaction",
        )
    }

    pub fn rolled_back_at_commit() -> Error {
        Error::new(
            code::ER_HA_ERROR_DURING_COMMIT,
            "HY000",
            "Got error 125 - 'Transaction has been rolled back' during COMMIT",
        )
    }

    pub fn read_only() -> Error {
        Error::new(code::ER_OPTION_PREVENTS_STATEMENT, "HY000", "The MySQL server is running with the --read-only option so it cannot execute this statement")
    }

    pub fn syntax(detail: impl Into<String>) -> Error {
        Error::new(code::ER_PARSE_ERROR, "42000", detail)
    }

    pub fn unsupported(what: impl Into<String>) -> Error {
        Error::new(
            code::ER_NOT_SUPPORTED_YET,
            "42000",
            format!(
                "This version of ringrep doesn't yet support '{}'",
                what.into()
            ),
        )
    }

    pub fn is_retriable(&self) -> bool {
        self.kind == ErrorKind::Retriable
    }
}

impl From<binlog_format::Error> for Error {
    fn from(e: binlog_format::Error) -> Error {
        Error::internal(format!("binlog: {e}"))
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Error {
        Error::internal(format!("I/O: {e}"))
    }
}
