"""Messenger bots: platform-neutral messages, bindings, session ids and replies, and translators."""
