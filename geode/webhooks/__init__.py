"""Webhook intake: authenticated, idempotent HTTP deliveries that start AUTOMATION turns (DESIGN §9)."""
