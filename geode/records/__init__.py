"""Durable records: checkpoints, effect receipts, timeline, evidence ledger, turns, cursors, dedupe keys."""
