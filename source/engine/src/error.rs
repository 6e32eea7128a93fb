//! The one error type of the engine and the SQL layer above it: every error a client can see
//! carries its MySQL error code, SQLSTATE and message, so the SQL layer and the server print it
//! unchanged, and a kind that says whether retrying can help.

use std::fmt;
use std::sync::Arc;

/// A MySQL error code bound to its SQLSTATE: the pair is defined once, in [`code`], and every
/// error is made from one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Code {
    /// MySQL's error number (NDB's for 940 and the 4xxx codes).
    pub number: u16,
    /// The SQLSTATE MySQL sends with it.
    pub sqlstate: &'static str,
}

impl Code {
    /// A code and its SQLSTATE.
    pub const fn new(number: u16, sqlstate: &'static str) -> Code {
        Code { number, sqlstate }
    }
}

impl From<Code> for u16 {
    fn from(c: Code) -> u16 {
        c.number
    }
}

impl PartialEq<Code> for u16 {
    fn eq(&self, other: &Code) -> bool {
        *self == other.number
    }
}

/// The MySQL error codes ringrep uses, each with its SQLSTATE. The numbers and states are
/// MySQL's (NDB's for 940 and 4xxx), the names MySQL's own `ER_*` names.
pub mod code {
    use super::Code;

    /// A commit failed in the storage engine (ringrep: error 125, the transaction was rolled back).
    pub const ER_HA_ERROR_DURING_COMMIT: Code = Code::new(1180, "HY000");
    /// A table option the storage engine refuses (the spec's CREATE/ALTER rules on rings).
    pub const ER_ILLEGAL_HA_CREATE_OPTION: Code = Code::new(1478, "HY000");
    /// An operation the storage engine refuses on this table (the spec's DML rules on rings).
    pub const ER_ILLEGAL_HA: Code = Code::new(1031, "HY000");
    /// A duplicate value for a primary or unique key.
    pub const ER_DUP_ENTRY: Code = Code::new(1062, "23000");
    /// The table does not exist.
    pub const ER_NO_SUCH_TABLE: Code = Code::new(1146, "42S02");
    /// A table that is not in a database of computed tables (`information_schema`).
    pub const ER_UNKNOWN_TABLE: Code = Code::new(1109, "42S02");
    /// An unknown column.
    pub const ER_BAD_FIELD_ERROR: Code = Code::new(1054, "42S22");
    /// A syntax error.
    pub const ER_PARSE_ERROR: Code = Code::new(1064, "42000");
    /// An empty statement.
    pub const ER_EMPTY_QUERY: Code = Code::new(1065, "42000");
    /// The same table name or alias twice in one FROM clause.
    pub const ER_NONUNIQ_TABLE: Code = Code::new(1066, "42000");
    /// CREATE TABLE of a table that exists.
    pub const ER_TABLE_EXISTS_ERROR: Code = Code::new(1050, "42S01");
    /// DROP TABLE of an unknown table.
    pub const ER_BAD_TABLE_ERROR: Code = Code::new(1051, "42S02");
    /// CREATE DATABASE of a database that exists.
    pub const ER_DB_CREATE_EXISTS: Code = Code::new(1007, "HY000");
    /// DROP DATABASE of an unknown database.
    pub const ER_DB_DROP_EXISTS: Code = Code::new(1008, "HY000");
    /// An unknown database.
    pub const ER_BAD_DB_ERROR: Code = Code::new(1049, "42000");
    /// No database selected.
    pub const ER_NO_DB_ERROR: Code = Code::new(1046, "3D000");
    /// NULL for a NOT NULL column.
    pub const ER_BAD_NULL_ERROR: Code = Code::new(1048, "23000");
    /// A NOT NULL column without a default was not given a value.
    pub const ER_NO_DEFAULT_FOR_FIELD: Code = Code::new(1364, "HY000");
    /// A row with another number of values than columns.
    pub const ER_WRONG_VALUE_COUNT_ON_ROW: Code = Code::new(1136, "21S01");
    /// A string longer than its column.
    pub const ER_DATA_TOO_LONG: Code = Code::new(1406, "22001");
    /// A value cut to fit its column: a number read from the front of a string, a string cut
    /// by INSERT IGNORE, a DECIMAL rounded, trailing spaces dropped (the last two as notes).
    pub const WARN_DATA_TRUNCATED: Code = Code::new(1265, "01000");
    /// A number outside its column's range.
    pub const ER_WARN_DATA_OUT_OF_RANGE: Code = Code::new(1264, "22003");
    /// An arithmetic result outside its type's range.
    pub const ER_DATA_OUT_OF_RANGE: Code = Code::new(1690, "22003");
    /// A value that does not convert (a bad date, for example).
    pub const ER_TRUNCATED_WRONG_VALUE: Code = Code::new(1292, "22007");
    /// Two members of an ENUM equal under its collation.
    pub const ER_DUPLICATED_VALUE_IN_TYPE: Code = Code::new(1291, "HY000");
    /// A SET member with a comma.
    pub const ER_ILLEGAL_VALUE_FOR_TYPE: Code = Code::new(1367, "22007");
    /// An ENUM of more than 65,535 members, a SET of more than 64.
    pub const ER_TOO_BIG_ENUM: Code = Code::new(1097, "HY000");
    /// A logarithm of a number outside its domain (a warning; the result is NULL).
    pub const ER_INVALID_ARGUMENT_FOR_LOGARITHM: Code = Code::new(3020, "2201E");
    /// A value that does not convert to its column's type.
    pub const ER_TRUNCATED_WRONG_VALUE_FOR_FIELD: Code = Code::new(1366, "HY000");
    /// A row lock was not granted in time; the statement may be retried.
    pub const ER_LOCK_WAIT_TIMEOUT: Code = Code::new(1205, "HY000");
    /// A deadlock; this transaction was rolled back and may be retried.
    pub const ER_LOCK_DEADLOCK: Code = Code::new(1213, "40001");
    /// The node is read-only (a replica) for this statement.
    pub const ER_OPTION_PREVENTS_STATEMENT: Code = Code::new(1290, "HY000");
    /// A feature ringrep does not have.
    pub const ER_NOT_SUPPORTED_YET: Code = Code::new(1235, "42000");
    /// An unknown system variable.
    pub const ER_UNKNOWN_SYSTEM_VARIABLE: Code = Code::new(1193, "HY000");
    /// A statement that could not run (SHOW BINLOG EVENTS of a missing file or offset).
    pub const ER_ERROR_WHEN_EXECUTING_COMMAND: Code = Code::new(1220, "HY000");
    /// An ENGINE= name ringrep does not have.
    pub const ER_UNKNOWN_STORAGE_ENGINE: Code = Code::new(1286, "42000");
    /// A value a system variable does not take.
    pub const ER_WRONG_VALUE_FOR_VAR: Code = Code::new(1231, "42000");
    /// An unknown time zone.
    pub const ER_UNKNOWN_TIME_ZONE: Code = Code::new(1298, "HY000");
    /// A column name given twice.
    pub const ER_DUP_FIELDNAME: Code = Code::new(1060, "42S21");
    /// An index name given twice.
    pub const ER_DUP_KEYNAME: Code = Code::new(1061, "42000");
    /// An index on a column that does not exist (MySQL's spelling of the name).
    pub const ER_KEY_COLUMN_DOES_NOT_EXITS: Code = Code::new(1072, "42000");
    /// More than one primary key.
    pub const ER_MULTIPLE_PRI_KEY: Code = Code::new(1068, "42000");
    /// DROP of a column or index that does not exist.
    pub const ER_CANT_DROP_FIELD_OR_KEY: Code = Code::new(1091, "42000");
    /// A default value the column cannot hold.
    pub const ER_INVALID_DEFAULT: Code = Code::new(1067, "42000");
    /// A default on a BLOB, TEXT or JSON column.
    pub const ER_BLOB_CANT_HAVE_DEFAULT: Code = Code::new(1101, "42000");
    /// A fractional-seconds precision over 6, a DECIMAL's over 65.
    pub const ER_TOO_BIG_PRECISION: Code = Code::new(1426, "42000");
    /// A type's size it cannot have (FLOAT(54)).
    pub const ER_WRONG_FIELD_SPEC: Code = Code::new(1063, "42000");
    /// A CHAR, VARCHAR, BINARY or VARBINARY longer than its type allows.
    pub const ER_TOO_BIG_FIELDLENGTH: Code = Code::new(1074, "42000");
    /// A DECIMAL's scale over 30.
    pub const ER_TOO_BIG_SCALE: Code = Code::new(1425, "42000");
    /// A DECIMAL's scale over its precision.
    pub const ER_M_BIGGER_THAN_D: Code = Code::new(1427, "42000");
    /// A FOREIGN KEY that cannot be added: around a ring buffer table, as RonDB's own tests
    /// of the spec's rule expect.
    pub const ER_CANNOT_ADD_FOREIGN: Code = Code::new(1215, "HY000");
    /// A parent row that child rows still reference, deleted or changed under a RESTRICT or
    /// NO ACTION foreign key.
    pub const ER_ROW_IS_REFERENCED_2: Code = Code::new(1451, "23000");
    /// A child row whose foreign key values no parent row holds.
    pub const ER_NO_REFERENCED_ROW_2: Code = Code::new(1452, "23000");
    /// A foreign key whose parent columns are not the leading columns of an index.
    pub const ER_FK_NO_INDEX_PARENT: Code = Code::new(1822, "HY000");
    /// A foreign key whose parent table does not exist.
    pub const ER_FK_CANNOT_OPEN_PARENT: Code = Code::new(1824, "HY000");
    /// A foreign key name the database has already.
    pub const ER_FK_DUP_NAME: Code = Code::new(1826, "23000");
    /// A column dropped that a foreign key of its table needs.
    pub const ER_FK_COLUMN_CANNOT_DROP: Code = Code::new(1828, "HY000");
    /// A column dropped that a foreign key of another table references.
    pub const ER_FK_COLUMN_CANNOT_DROP_CHILD: Code = Code::new(1829, "HY000");
    /// ON DELETE / ON UPDATE SET NULL on a NOT NULL column.
    pub const ER_FK_COLUMN_NOT_NULL: Code = Code::new(1830, "HY000");
    /// An index dropped that a foreign key needs.
    pub const ER_DROP_INDEX_FK: Code = Code::new(1553, "HY000");
    /// A foreign key whose two column lists differ in length.
    pub const ER_WRONG_FK_DEF: Code = Code::new(1239, "42000");
    /// TRUNCATE of a table another table's foreign key references.
    pub const ER_TRUNCATE_ILLEGAL_FK: Code = Code::new(1701, "42000");
    /// Cascades deeper than InnoDB's 15 levels.
    pub const ER_FK_DEPTH_EXCEEDED: Code = Code::new(3008, "HY000");
    /// DROP TABLE of a table another table's foreign key references.
    pub const ER_FK_CANNOT_DROP_PARENT: Code = Code::new(3730, "HY000");
    /// A foreign key column not in its parent table.
    pub const ER_FK_NO_COLUMN_PARENT: Code = Code::new(3734, "HY000");
    /// A foreign key column whose type its parent column's does not match.
    pub const ER_FK_INCOMPATIBLE_COLUMNS: Code = Code::new(3780, "HY000");
    /// A column COMMENT over 1024 characters.
    pub const ER_TOO_LONG_FIELD_COMMENT: Code = Code::new(1629, "HY000");
    /// A FLOAT's or DOUBLE's `(M, D)` with M over 255, a BIT's width over 64.
    pub const ER_TOO_BIG_DISPLAYWIDTH: Code = Code::new(1439, "42000");
    /// BIT(0).
    pub const ER_INVALID_FIELD_SIZE: Code = Code::new(3013, "HY000");
    /// A column assigned twice in one statement.
    pub const ER_FIELD_SPECIFIED_TWICE: Code = Code::new(1110, "42000");
    /// An ALTER that cannot run with the ALGORITHM asked for.
    pub const ER_ALTER_OPERATION_NOT_SUPPORTED_REASON: Code = Code::new(1846, "0A000");
    /// A value given for a generated column.
    pub const ER_UNSUPPORTED_ACTION_ON_GENERATED_COLUMN: Code = Code::new(3105, "HY000");
    /// A JSON column given text that is not JSON.
    pub const ER_INVALID_JSON_TEXT: Code = Code::new(3140, "22032");
    /// A failure of ringrep or of what is under it (storage, I/O).
    pub const ER_UNKNOWN_ERROR: Code = Code::new(1105, "HY000");
    /// A statement not allowed inside a transaction.
    pub const ER_CANT_DO_THIS_DURING_AN_TRANSACTION: Code = Code::new(1179, "25000");
    /// Wrong user or password.
    pub const ER_ACCESS_DENIED_ERROR: Code = Code::new(1045, "28000");
    /// A database the account has no privilege on.
    pub const ER_DBACCESS_DENIED_ERROR: Code = Code::new(1044, "42000");
    /// A command the account may not run on a table.
    pub const ER_TABLEACCESS_DENIED_ERROR: Code = Code::new(1142, "42000");
    /// SET SESSION of a global-only variable.
    pub const ER_GLOBAL_VARIABLE: Code = Code::new(1229, "HY000");
    /// A statement that needs the session outside any transaction and LOCK TABLES.
    pub const ER_LOCK_OR_ACTIVE_TRANSACTION: Code = Code::new(1192, "HY000");
    /// A character set name MySQL does not know (an introducer, CONVERT ... USING).
    pub const ER_UNKNOWN_CHARACTER_SET: Code = Code::new(1115, "42000");
    /// SET of a read-only variable.
    pub const ER_INCORRECT_GLOBAL_LOCAL_VAR: Code = Code::new(1238, "HY000");
    /// SET of a variable to a value of the wrong type.
    pub const ER_WRONG_TYPE_FOR_VAR: Code = Code::new(1232, "42000");
    /// A statement that cannot be prepared (PREPARE of PREPARE, EXECUTE or DEALLOCATE).
    pub const ER_UNSUPPORTED_PS: Code = Code::new(1295, "HY000");
    /// START REPLICA (or the like) on a node with no replication source.
    pub const ER_BAD_SLAVE: Code = Code::new(1200, "HY000");
    /// A replication setting changed while the replica runs.
    pub const ER_REPLICA_CHANNEL_IO_THREAD_MUST_STOP: Code = Code::new(3021, "HY000");
    /// A login to an account that `ACCOUNT LOCK` locked.
    pub const ER_ACCOUNT_HAS_BEEN_LOCKED: Code = Code::new(3118, "HY000");
    /// A global privilege the operation needs and the account lacks.
    pub const ER_SPECIFIC_ACCESS_DENIED_ERROR: Code = Code::new(1227, "42000");
    /// Wrong arguments to a function or command.
    pub const ER_WRONG_ARGUMENTS: Code = Code::new(1210, "HY000");
    /// An unknown prepared statement.
    pub const ER_UNKNOWN_STMT_HANDLER: Code = Code::new(1243, "HY000");
    /// A division by zero: a warning in a SELECT, an error in a value an INSERT or UPDATE
    /// writes (MySQL's default strict mode).
    pub const ER_DIVISION_BY_ZERO: Code = Code::new(1365, "22012");
    /// A scalar subquery returned more than one row.
    pub const ER_SUBQUERY_NO_1_ROW: Code = Code::new(1242, "21000");
    /// An operand with the wrong number of columns.
    pub const ER_OPERAND_COLUMNS: Code = Code::new(1241, "21000");
    /// Set operations over SELECTs with different column counts.
    pub const ER_WRONG_NUMBER_OF_COLUMNS_IN_SELECT: Code = Code::new(1222, "21000");
    /// A derived table without an alias.
    pub const ER_DERIVED_MUST_HAVE_ALIAS: Code = Code::new(1248, "42000");
    /// A subquery reads the table its statement changes.
    pub const ER_UPDATE_TABLE_USED: Code = Code::new(1093, "HY000");
    /// SELECT * without a table.
    pub const ER_NO_TABLES_USED: Code = Code::new(1096, "HY000");
    /// An ambiguous column name.
    pub const ER_NON_UNIQ_ERROR: Code = Code::new(1052, "23000");
    /// A non-aggregated column outside GROUP BY.
    pub const ER_WRONG_FIELD_WITH_GROUP: Code = Code::new(1055, "42000");
    /// An aggregate where none is allowed.
    pub const ER_INVALID_GROUP_FUNC_USE: Code = Code::new(1111, "HY000");
    /// The source cannot serve its binlog to a replica (corruption, a gap): the replica stops.
    pub const ER_MASTER_FATAL_ERROR_READING_BINLOG: Code = Code::new(1236, "HY000");
    /// A client packet over `max_allowed_packet`; the connection is closed.
    pub const ER_NET_PACKET_TOO_LARGE: Code = Code::new(1153, "08S01");
    /// A native function called with the wrong number of arguments.
    pub const ER_WRONG_PARAMCOUNT_TO_NATIVE_FCT: Code = Code::new(1582, "42000");
    /// An unknown function or procedure.
    pub const ER_SP_DOES_NOT_EXIST: Code = Code::new(1305, "42000");
    /// KILL of a connection id that is not one.
    pub const ER_NO_SUCH_THREAD: Code = Code::new(1094, "HY000");
    /// KILL of another account's connection without the privilege.
    pub const ER_KILL_DENIED_ERROR: Code = Code::new(1095, "HY000");
    /// The statement's connection was killed (KILL of its own connection).
    pub const ER_QUERY_INTERRUPTED: Code = Code::new(1317, "70100");
    /// INSERT, UPDATE or DELETE through a view.
    pub const ER_NON_UPDATABLE_TABLE: Code = Code::new(1288, "HY000");
    /// A view's column list and its query's columns differ in number.
    pub const ER_VIEW_WRONG_LIST: Code = Code::new(1353, "HY000");
    /// A session holding LOCK TABLES used a table it did not lock.
    pub const ER_TABLE_NOT_LOCKED: Code = Code::new(1100, "HY000");
    /// A session holding LOCK TABLES wrote a table it locked for READ.
    pub const ER_TABLE_NOT_LOCKED_FOR_WRITE: Code = Code::new(1099, "HY000");
    /// A statement a stored procedure may not run (LOCK TABLES, UNLOCK TABLES).
    pub const ER_SP_BADSTATEMENT: Code = Code::new(1314, "0A000");
    /// A user-level lock name that is empty or longer than 64 characters.
    pub const ER_USER_LOCK_WRONG_NAME: Code = Code::new(3057, "42000");
    /// A GET_LOCK wait that would close a cycle of waits.
    pub const ER_USER_LOCK_DEADLOCK: Code = Code::new(3058, "HY000");
    /// A recursive query block with aggregation or a window function.
    pub const ER_CTE_RECURSIVE_FORBIDS_AGGREGATION: Code = Code::new(3575, "HY000");
    /// A recursive query block reading its expression on the inner side of an outer join.
    pub const ER_CTE_RECURSIVE_FORBIDDEN_JOIN_ORDER: Code = Code::new(3576, "HY000");
    /// A recursive query block reading its expression twice or in a subquery.
    pub const ER_CTE_RECURSIVE_REQUIRES_SINGLE_REFERENCE: Code = Code::new(3577, "HY000");
    /// A recursive common table expression without a UNION.
    pub const ER_CTE_RECURSIVE_REQUIRES_UNION: Code = Code::new(3573, "HY000");
    /// A recursive common table expression whose first query block reads itself, or a
    /// query block that does not after one that does.
    pub const ER_CTE_RECURSIVE_REQUIRES_NONRECURSIVE_FIRST: Code = Code::new(3574, "HY000");
    /// A recursive common table expression still growing after `cte_max_recursion_depth`
    /// iterations.
    pub const ER_CTE_MAX_RECURSION_DEPTH: Code = Code::new(3636, "HY000");
    /// A transaction too large for one binlog record.
    pub const ER_TRANS_CACHE_FULL: Code = Code::new(1197, "HY000");
    /// A result held for a statement outgrew its limit (a recursive common table expression).
    pub const ER_RECORD_FILE_FULL: Code = Code::new(1114, "HY000");
    /// A view that reads itself.
    pub const ER_VIEW_RECURSIVE: Code = Code::new(1462, "HY000");
    /// CREATE PROCEDURE of a name that exists.
    pub const ER_SP_ALREADY_EXISTS: Code = Code::new(1304, "42000");
    /// CALL with the wrong number of arguments.
    pub const ER_SP_WRONG_NO_OF_ARGS: Code = Code::new(1318, "42000");
    /// CALLs nested too deep.
    pub const ER_SP_RECURSION_LIMIT: Code = Code::new(1456, "HY000");
    /// CREATE TRIGGER of a name its database has.
    pub const ER_TRG_ALREADY_EXISTS: Code = Code::new(1359, "HY000");
    /// DROP TRIGGER (or SHOW CREATE TRIGGER) of an unknown trigger.
    pub const ER_TRG_DOES_NOT_EXIST: Code = Code::new(1360, "HY000");
    /// CREATE TRIGGER on a view.
    pub const ER_TRG_ON_VIEW_OR_TEMP_TABLE: Code = Code::new(1361, "HY000");
    /// A trigger that sets a row it may not change (OLD, or NEW in an AFTER trigger).
    pub const ER_TRG_CANT_CHANGE_ROW: Code = Code::new(1362, "HY000");
    /// A trigger that names a row its event has not (OLD on INSERT, NEW on DELETE).
    pub const ER_TRG_NO_SUCH_ROW_IN_TRG: Code = Code::new(1363, "HY000");
    /// FOLLOWS or PRECEDES of a trigger that is not one of the table's for the same event and
    /// timing.
    pub const ER_REFERENCED_TRG_DOES_NOT_EXIST: Code = Code::new(3011, "HY000");
    /// A trigger in another database than its table.
    pub const ER_TRG_IN_WRONG_SCHEMA: Code = Code::new(1435, "HY000");
    /// CREATE TRIGGER on a table of the system database.
    pub const ER_NO_TRIGGERS_ON_SYSTEM_SCHEMA: Code = Code::new(1465, "HY000");
    /// DROP DATABASE of the system database.
    pub const ER_NO_SYSTEM_SCHEMA_ACCESS: Code = Code::new(3552, "HY000");
    /// A trigger that would return a result set.
    pub const ER_SP_NO_RETSET: Code = Code::new(1415, "0A000");
    /// A procedure returning a result set where none can go (CALL in a trigger).
    pub const ER_SP_BADSELECT: Code = Code::new(1312, "0A000");
    /// A commit (COMMIT, or DDL's implicit one) inside a trigger.
    pub const ER_COMMIT_NOT_ALLOWED_IN_SF_OR_TRG: Code = Code::new(1422, "HY000");
    /// SET autocommit inside a trigger.
    pub const ER_SP_CANT_SET_AUTOCOMMIT: Code = Code::new(1445, "HY000");
    /// A statement a trigger may not run (dynamic SQL).
    pub const ER_STMT_NOT_ALLOWED_IN_SF_OR_TRG: Code = Code::new(1336, "0A000");
    /// A trigger writing the table its statement is changing.
    pub const ER_CANT_UPDATE_USED_TABLE_IN_SF_OR_TRG: Code = Code::new(1442, "HY000");
    /// SIGNAL of an SQLSTATE that is not one ('00xxx', not five characters).
    pub const ER_SP_BAD_SQLSTATE: Code = Code::new(1407, "42000");
    /// A stored program assigning a variable it did not declare.
    pub const ER_SP_UNDECLARED_VAR: Code = Code::new(1327, "42000");
    /// SELECT ... INTO of a query with more than one row.
    pub const ER_TOO_MANY_ROWS: Code = Code::new(1172, "42000");
    /// SELECT ... INTO of a query without rows (a warning).
    pub const ER_SP_FETCH_NO_DATA: Code = Code::new(1329, "02000");
    /// File not found (LOAD DATA INFILE).
    pub const EE_FILENOTFOUND: Code = Code::new(29, "HY000");
    /// The disk (or the quota) is full: a write or commit that needed space was not made.
    pub const ER_DISK_FULL: Code = Code::new(1021, "HY000");
    /// NDB: direct write to a ring buffer table (wrapped in 1296 by the server, as MySQL does).
    pub const NDB_DIRECT_WRITE: Code = Code::new(940, "HY000");
    /// NDB: parameter error in API call.
    pub const NDB_PARAMETER_ERROR: Code = Code::new(4118, "HY000");
    /// NDB: deleteOldest on a ring table with TTL.
    pub const NDB_DELETE_OLDEST_TTL: Code = Code::new(4358, "HY000");
    /// NDB: a TTL ring write must set every column.
    pub const NDB_TTL_MUST_SET_ALL: Code = Code::new(4359, "HY000");
}

/// Whether retrying can help.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// Bad input: the same statement fails again.
    User,
    /// A lock wait or deadlock: retry the transaction.
    Retriable,
    /// A storage or I/O failure that can pass (a disk that fills up and is freed, a file
    /// briefly unreadable): retrying later may succeed.
    Transient,
    /// Corruption or a broken invariant: retrying cannot help.
    Internal,
}

/// An error as a MySQL client sees it, with its cause when it came from below (the binlog,
/// the file system).
#[derive(Debug, Clone)]
pub struct Error {
    /// MySQL's error number.
    pub code: u16,
    /// The SQLSTATE that goes with `code`.
    pub sqlstate: &'static str,
    /// The message text.
    pub message: String,
    /// Whether retrying can help.
    pub kind: ErrorKind,
    /// The error this one came from, if any.
    pub source: Option<Arc<dyn std::error::Error + Send + Sync>>,
}

impl PartialEq for Error {
    fn eq(&self, other: &Error) -> bool {
        self.code == other.code
            && self.sqlstate == other.sqlstate
            && self.message == other.message
            && self.kind == other.kind
    }
}

impl Eq for Error {}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "ERROR {} ({}): {}",
            self.code, self.sqlstate, self.message
        )
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

/// The result type of the engine and the SQL layer.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// An error of `code` with `message`.
    pub fn new(code: Code, message: impl Into<String>) -> Error {
        let kind = if code == code::ER_LOCK_WAIT_TIMEOUT || code == code::ER_LOCK_DEADLOCK {
            ErrorKind::Retriable
        } else if code == code::ER_UNKNOWN_ERROR {
            ErrorKind::Internal
        } else {
            ErrorKind::User
        };
        Error {
            code: code.number,
            sqlstate: code.sqlstate,
            message: message.into(),
            kind,
            source: None,
        }
    }

    /// A failure of ringrep itself or of what is under it, as MySQL's error 1105.
    pub fn internal(message: impl Into<String>) -> Error {
        Error::new(code::ER_UNKNOWN_ERROR, message)
    }

    /// This error's code and SQLSTATE.
    pub fn code(&self) -> Code {
        Code::new(self.code, self.sqlstate)
    }

    /// A table-option rule of the spec (CREATE/ALTER), printed as MySQL's error 1478.
    pub fn create_option(what: &str) -> Error {
        Error::new(
            code::ER_ILLEGAL_HA_CREATE_OPTION,
            format!(
                "Table storage engine 'ndbcluster' does not support the create option '{what}'"
            ),
        )
    }

    /// The spec's rule that a ring buffer table has no foreign keys, as parent or as child:
    /// MySQL's 1215, which RonDB's tests of the rule expect.
    pub fn ring_foreign_key() -> Error {
        Error::new(
            code::ER_CANNOT_ADD_FOREIGN,
            "Cannot add foreign key constraint",
        )
    }

    /// A statement rule of the spec (DML), printed as MySQL's error 1031.
    pub fn not_allowed(what: &str) -> Error {
        Error::new(
            code::ER_ILLEGAL_HA,
            format!("Table storage engine for '{what}' doesn't have this option"),
        )
    }

    /// Error 1146: table `db.table` does not exist.
    pub fn no_such_table(db: &str, table: &str) -> Error {
        Error::new(
            code::ER_NO_SUCH_TABLE,
            format!("Table '{db}.{table}' doesn't exist"),
        )
    }

    /// Error 1054: unknown column `column` in `place` ('field list', 'where clause', ...).
    pub fn bad_field(column: &str, place: &str) -> Error {
        Error::new(
            code::ER_BAD_FIELD_ERROR,
            format!("Unknown column '{column}' in '{place}'"),
        )
    }

    /// Error 1062: `value` is already in key `key`.
    pub fn dup_entry(value: &str, key: &str) -> Error {
        Error::new(
            code::ER_DUP_ENTRY,
            format!("Duplicate entry '{value}' for key '{key}'"),
        )
    }

    /// NDB error 940: a write to a ring table outside the ring protocol, from anyone but the applier.
    pub fn direct_write() -> Error {
        Error::new(code::NDB_DIRECT_WRITE, "Direct write to ring-buffer table not allowed. Use SQL, NdbRingBufferWriter or ClusterJ")
    }

    /// NDB error 4118: a wrong argument to the native writer.
    pub fn parameter(detail: &str) -> Error {
        Error::new(
            code::NDB_PARAMETER_ERROR,
            format!("Parameter error in API call: {detail}"),
        )
    }

    /// Error 1205: a row lock was not granted within the lock wait timeout (retriable).
    pub fn lock_wait_timeout() -> Error {
        Error::new(
            code::ER_LOCK_WAIT_TIMEOUT,
            "Lock wait timeout exceeded; try restarting transaction",
        )
    }

    /// Error 1205 for a statement that would have waited for a row lock, or read more rows
    /// than its budget, while running where it must stay brief (the server's connection
    /// task: [`Session::lock_wait`] off, [`Session::read_budget`] set): nothing of it is
    /// left, and the caller runs it again where it may wait. Never meant for a client.
    ///
    /// [`Session::lock_wait`]: crate::session::Session::lock_wait
    /// [`Session::read_budget`]: crate::session::Session::read_budget
    pub fn would_wait() -> Error {
        Error::new(code::ER_LOCK_WAIT_TIMEOUT, WOULD_WAIT)
    }

    /// Whether this is [`Error::would_wait`].
    pub fn is_would_wait(&self) -> bool {
        self.code == code::ER_LOCK_WAIT_TIMEOUT && self.message == WOULD_WAIT
    }

    /// Error 1213: this transaction was chosen to break a deadlock and was rolled back (retriable).
    pub fn deadlock() -> Error {
        Error::new(
            code::ER_LOCK_DEADLOCK,
            "Deadlock found when trying to get lock; try restarting transaction",
        )
    }

    /// Error 1213 for a transaction that read state a heal then took back (a commit whose
    /// write or fsync failed): what it computed from it must not commit. Retriable, and
    /// retried by the SQL layer for a statement in autocommit mode.
    pub fn read_taken_back() -> Error {
        Error::new(code::ER_LOCK_DEADLOCK, READ_TAKEN_BACK)
    }

    /// Whether this is [`Error::read_taken_back`].
    pub fn is_read_taken_back(&self) -> bool {
        self.code == code::ER_LOCK_DEADLOCK && self.message == READ_TAKEN_BACK
    }

    /// A statement's result held back because a commit it could have read failed: the code
    /// of that failure, a message that says so. [`Error::is_withheld`] tells it apart.
    pub fn withheld(cause: &Error) -> Error {
        let mut err = Error::new(
            Code::new(cause.code, cause.sqlstate),
            format!("{WITHHELD}{})", cause.message),
        );
        err.kind = cause.kind;
        err
    }

    /// Whether this is [`Error::withheld`]: the statement changed nothing and may run again.
    pub fn is_withheld(&self) -> bool {
        self.message.starts_with(WITHHELD)
    }

    /// Error 1180 with NDB's error 125: the transaction was rolled back at commit (INSERT IGNORE
    /// on a ring that hit a duplicate, as the spec says).
    pub fn rolled_back_at_commit() -> Error {
        Error::new(
            code::ER_HA_ERROR_DURING_COMMIT,
            "Got error 125 - 'Transaction has been rolled back' during COMMIT",
        )
    }

    /// Error 1290: a client write on a read-only node (a replica).
    pub fn read_only() -> Error {
        Error::new(code::ER_OPTION_PREVENTS_STATEMENT, "The MySQL server is running with the --read-only option so it cannot execute this statement")
    }

    /// Error 1290 for a write on a node whose `super_read_only` is on.
    pub fn super_read_only() -> Error {
        Error::new(code::ER_OPTION_PREVENTS_STATEMENT, "The MySQL server is running with the --super-read-only option so it cannot execute this statement")
    }

    /// Error 1064: a syntax error, `detail` saying where.
    pub fn syntax(detail: impl Into<String>) -> Error {
        Error::new(code::ER_PARSE_ERROR, detail)
    }

    /// Error 1235: `what` is a feature ringrep does not have yet.
    pub fn unsupported(what: impl Into<String>) -> Error {
        Error::new(
            code::ER_NOT_SUPPORTED_YET,
            format!(
                "This version of ringrep doesn't yet support '{}'",
                what.into()
            ),
        )
    }

    /// Whether retrying can help: the transaction after a lock wait or deadlock, the
    /// operation after a transient storage failure.
    pub fn is_retriable(&self) -> bool {
        matches!(self.kind, ErrorKind::Retriable | ErrorKind::Transient)
    }

    /// Whether this is a lock wait or deadlock, after which the transaction may be retried
    /// at once.
    pub fn is_lock_conflict(&self) -> bool {
        self.kind == ErrorKind::Retriable
    }
}

const WOULD_WAIT: &str =
    "A lock wait or a long read where a statement must stay brief; run it again";

const WITHHELD: &str =
    "the result is withheld: a transaction it could have read failed to commit (";

const READ_TAKEN_BACK: &str =
    "The transaction read data that a failed commit then took back; try restarting transaction";

/// Whether an I/O error says the disk or the quota is full.
fn is_disk_full(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded
    )
}

/// MySQL's error 1021 for a full disk at `what` (a file or directory); the I/O error goes
/// into the source.
fn disk_full(what: &str) -> Error {
    let mut err = Error::new(
        code::ER_DISK_FULL,
        format!(
            "Disk full ({what}); nothing was changed: free some space and retry (errno: 28 - \
             No space left on device)"
        ),
    );
    err.kind = ErrorKind::Transient;
    err
}

impl From<binlog_format::Error> for Error {
    /// Keeps the binlog error as the source, and its retry class: an I/O error is
    /// [`ErrorKind::Transient`] (a full disk MySQL's 1021), corruption
    /// [`ErrorKind::Internal`].
    fn from(e: binlog_format::Error) -> Error {
        let mut err = match &e {
            binlog_format::Error::Io { path, source } if is_disk_full(source) => {
                disk_full(&path.display().to_string())
            }
            // MySQL's error for a transaction its binlog cache cannot hold.
            binlog_format::Error::TooLarge { bytes, max } => Error::new(
                code::ER_TRANS_CACHE_FULL,
                format!(
                    "Multi-statement transaction required more than 'max_binlog_cache_size' bytes of storage: its binlog record would be {bytes} bytes, and one record holds at most {max}"
                ),
            ),
            _ => Error::internal(format!("binlog: {e}")),
        };
        if e.is_retriable() {
            err.kind = ErrorKind::Transient;
        }
        err.source = Some(Arc::new(e));
        err
    }
}

impl From<std::io::Error> for Error {
    /// Keeps the I/O error as the source; an I/O error is [`ErrorKind::Transient`] (a full
    /// disk MySQL's 1021).
    fn from(e: std::io::Error) -> Error {
        let mut err = if is_disk_full(&e) {
            disk_full("data directory")
        } else {
            Error::internal(format!("I/O: {e}"))
        };
        err.kind = ErrorKind::Transient;
        err.source = Some(Arc::new(e));
        err
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A code carries its SQLSTATE into the error; comparing the number with the code works.
    #[test]
    fn an_error_takes_its_sqlstate_from_its_code() {
        let e = Error::new(code::ER_DUP_ENTRY, "dup");
        assert_eq!((e.code, e.sqlstate), (1062, "23000"));
        assert!(e.code == code::ER_DUP_ENTRY);
        assert_eq!(e.code(), code::ER_DUP_ENTRY);
        assert!(!e.is_retriable());
        assert!(Error::deadlock().is_lock_conflict() && Error::deadlock().is_retriable());
    }

    /// A binlog I/O failure stays retriable after crossing into the engine's error, and keeps
    /// the binlog error as its source; corruption is not retriable.
    #[test]
    fn binlog_errors_keep_their_cause_and_retry_class() {
        let io = binlog_format::Error::Io {
            path: "/x/binlog.000001".into(),
            source: std::io::Error::other("disk went away"),
        };
        let e = Error::from(io);
        assert_eq!(e.kind, ErrorKind::Transient);
        assert!(e.is_retriable() && !e.is_lock_conflict());
        let source = std::error::Error::source(&e).expect("a source");
        assert!(source.to_string().contains("disk went away"), "{source}");

        let full = binlog_format::Error::Io {
            path: "/x/binlog.000001".into(),
            source: std::io::Error::from_raw_os_error(28),
        };
        let e = Error::from(full);
        assert_eq!((e.code, e.sqlstate), (1021, "HY000"), "{e}");
        assert!(
            e.is_retriable() && e.message.contains("binlog.000001"),
            "{e}"
        );

        let corrupt = binlog_format::Error::Invalid("bad".into());
        let e = Error::from(corrupt);
        assert_eq!(e.kind, ErrorKind::Internal);
        assert!(!e.is_retriable());
        assert!(std::error::Error::source(&e).is_some());
    }
}
