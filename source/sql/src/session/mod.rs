//! The top floor: a session's entry points ([`crate::SqlSession::execute`] and the others),
//! which read a statement's text and hand it to the floor below that runs it. It may import
//! every floor; nothing imports it.

mod run;
