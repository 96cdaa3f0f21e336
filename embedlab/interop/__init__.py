"""Adapters that run embedlab methods inside other tools' harnesses (MTEB)."""
