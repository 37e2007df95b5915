-- A custodian's transaction settles like our own (issue 27): the custodian executor reads the
-- transaction its provider's record names from its own evidence endpoints (a quorum, one pinned
-- block, a canonical inclusion at final depth, paying exactly the approved transfer) and settles
-- BROADCAST -> CONFIRMED with the inclusion, which the chain watcher re-checks for
-- reorganizations like every other (CONFIRMED -> BROADCAST; the executor then follows again). A
-- settlement consumes the hold: it cannot pay twice. The row mirrors crates/domain's table.
INSERT INTO opledger_transition_rules (from_state, to_state, actor, hold_effect)
VALUES ('BROADCAST', 'CONFIRMED', 'custodian', 'SETTLE');
GRANT SELECT, INSERT ON inclusions TO opledger_custodian;
GRANT EXECUTE ON FUNCTION opledger_resolve_holds(uuid, uuid[], text[]) TO opledger_custodian;
