"""GEODE domain."""
