//! The events of the binlog, one file per kind. A record in a segment is a [`Record`]: a
//! transaction (row and DDL events committed together) or a heartbeat.

mod ddl;
mod heartbeat;
mod record;
mod row;
mod transaction;

pub use ddl::DdlEvent;
pub use heartbeat::Heartbeat;
pub use record::{Record, SegmentHeader};
pub use row::{Cause, RowChange, RowEvent};
pub use transaction::{Event, Origin, Transaction};

#[cfg(any(test, feature = "samples"))]
pub mod samples;
