"""Local fakes for tests, demos and benches: the Telegram/Slack/Discord servers and the scripted provider.

Shipped in the wheel because ``scripts/*-server`` and ``geode scripted-provider`` launch them; no runtime
child (store, lanes, executor, loop, control, messengers) imports this package (tests/test_layout.py).
"""
