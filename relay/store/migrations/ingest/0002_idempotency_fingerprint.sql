-- Idempotency keys are scoped by caller and remembered with a fingerprint of their request
-- (relay/store/idempotency.py). Scoped keys are stored as "<caller>/<key>" in the same
-- column: keys recorded before this migration are not scoped, so they no longer match and
-- expire with the TTL.

ALTER TABLE idempotency_keys ADD COLUMN fingerprint TEXT;
