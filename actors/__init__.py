"""GEODE runtime shell."""
