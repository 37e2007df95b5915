//! The custodian double (`opledger-custodian-sim`), being built: its wire contract is
//! docs/custodian-wire.md.

fn main() {}
